//! Guarded check runs (docs/evolve.md, "Guarded check builds"): a
//! variant's guarded build (`ir::guard`) runs each train test once, with the
//! test's buffer ranges and trip budget in its table; a recorded fault
//! becomes a verdict naming the source line, argument and element as the
//! simulator's do, and the worker keeps its context, inputs and references.
//! Only variants whose guarded runs pass are timed, unguarded.
//!
//! The budget of a test is calibrated at start: the original's guarded
//! build runs it with no budget and reports the most trips one entry into a
//! loop made (in steps of 64); variants get [`BUDGET_FACTOR`] times that, plus [`BUDGET_SLACK`],
//! and [`TIME_BUDGET_FACTOR`] times that run's time, so that a loop whose
//! trips are slow ends before the worker's watchdog does.

use super::device_test::StagedTest;
use super::driver::{Kernel, Symbol};
use super::load::Loader;
use super::toolkit::Cubin;
use super::CudaError;
use gevo_ir::guard::{self, FaultKind, GuardSite};
use gevo_model::sim::{BufferName, Context, Fault, Verdict};
use gevo_model::spec::{ArgValue, LaunchParam};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A variant's trip budget is this many times the original's most ...
pub const BUDGET_FACTOR: u64 = 8;
/// ... plus this many trips (loops whose trips depend on data).
pub const BUDGET_SLACK: u64 = 1024;
/// A variant's time budget is this many times the original's guarded run
/// of the test ...
pub const TIME_BUDGET_FACTOR: u32 = 10;
/// ... and at least this long (the clock's grain, launch jitter).
pub const MIN_TIME_BUDGET: Duration = Duration::from_millis(2);

/// What a guarded run of a test may spend before its looping threads end:
/// trips per loop entry, and time for the whole run (`Budget::NONE`: no limit,
/// for the calibration run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub trips: u64,
    pub time: Duration,
}

impl Budget {
    pub const NONE: Budget = Budget {
        trips: 0,
        time: Duration::ZERO,
    };

    /// A test's budget from the original's guarded run of it (with no
    /// budget): the most trips one loop entry made, and how long the run
    /// took.
    pub fn from_original(most_trips: u64, took: Duration) -> Budget {
        Budget {
            trips: most_trips
                .saturating_mul(BUDGET_FACTOR)
                .saturating_add(BUDGET_SLACK),
            time: (took * TIME_BUDGET_FACTOR).max(MIN_TIME_BUDGET),
        }
    }
}

/// A guarded build as the compile workers send it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardedBuild {
    pub ptx: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cubin: Option<Cubin>,
    /// The fault record's sites.
    pub sites: Vec<GuardSite>,
    /// Every write to global memory refuses the table's read-only ranges
    /// (`ir::Guarded::protects_inputs`): its run needs no kept input
    /// restored before it, nor compared after it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub protects_inputs: bool,
    /// Its kernels fill shared memory with the table's poison pattern
    /// first (`ir::Guarded::poisons_shared`): a mismatch may be run again
    /// with another pattern to see whether it reads bytes never written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub poisons_shared: bool,
}

/// A guarded build loaded, with its state and table on the device.
pub(super) struct GuardedKernel {
    pub kernel: Kernel,
    state: Symbol,
    table: Symbol,
}

/// What a guarded run left in the state.
pub(super) struct GuardState([u64; guard::STATE_WORDS]);

impl GuardedKernel {
    pub fn load(
        loader: &Loader,
        ptx: &str,
        cubin: Option<&Cubin>,
        names: &[String],
    ) -> Result<GuardedKernel, CudaError> {
        GuardedKernel::from_kernel(loader.variant(ptx, cubin, names)?)
    }

    /// A guarded build loaded already (a cubin linked from parts, say).
    pub fn from_kernel(kernel: Kernel) -> Result<GuardedKernel, CudaError> {
        let symbol = |name: &str| {
            kernel.global(name).ok_or_else(|| CudaError::InvalidPtx {
                log: format!("the guarded build has no {name}"),
            })
        };
        let state = symbol(guard::STATE_SYMBOL)?;
        let table = symbol(guard::TABLE_SYMBOL)?;
        Ok(GuardedKernel {
            kernel,
            state,
            table,
        })
    }

    /// Before a guarded run of `test`: its buffers' ranges, the budget and
    /// the first poison pattern in the table, the state cleared.
    pub fn arm(&self, test: &StagedTest, budget: Budget) -> Result<(), CudaError> {
        self.arm_poisoned(test, budget, guard::POISON_PATTERNS[0])
    }

    /// [`GuardedKernel::arm`] with shared memory poisoned by `pattern`.
    pub fn arm_poisoned(
        &self,
        test: &StagedTest,
        budget: Budget,
        pattern: u64,
    ) -> Result<(), CudaError> {
        let ranges: Vec<u64> = test
            .work
            .iter()
            .flatten()
            .flat_map(|b| [b.ptr, b.ptr + b.len as u64])
            .collect();
        // The guarded build tests no alignment where an access is proven
        // aligned from a parameter (ir/guard/aligned.rs): that holds only
        // for buffers that begin on this boundary, as the driver's do.
        if let Some(b) = test
            .work
            .iter()
            .flatten()
            .find(|b| b.ptr % guard::BUFFER_ALIGNMENT != 0)
        {
            return Err(CudaError::InvalidPtx {
                log: format!(
                    "a test buffer at {:#x} is not aligned to {} bytes, as a guarded build assumes",
                    b.ptr,
                    guard::BUFFER_ALIGNMENT
                ),
            });
        }
        let count = ranges.len() / 2;
        if count > guard::MAX_RANGES {
            return Err(CudaError::InvalidPtx {
                log: format!(
                    "the test has {count} buffers, more than a guarded build checks ({})",
                    guard::MAX_RANGES
                ),
            });
        }
        let mut table = vec![0; guard::TABLE_WORDS];
        table[0] = budget.trips;
        table[1] = count as u64;
        table[2..2 + ranges.len()].copy_from_slice(&ranges);
        // The kept inputs' ranges, by their place among the ranges.
        let protect = test.protect_kept.get();
        table[guard::TABLE_READ_ONLY] = test
            .work
            .iter()
            .enumerate()
            .filter(|(_, b)| b.is_some())
            .enumerate()
            .filter(|(_, (slot, _))| protect && test.kept_inputs.contains(slot))
            .fold(0, |bits, (k, _)| bits | 1 << k);
        table[guard::TABLE_POISON] = pattern;
        table[guard::TABLE_TIME_BUDGET] = budget.time.as_nanos().min(u64::MAX as u128) as u64;
        self.table.write(&table)?;
        self.state.write(&[0; guard::STATE_WORDS])
    }

    /// The state after the run (call once the run is done).
    pub fn state(&self) -> Result<GuardState, CudaError> {
        let mut words = [0; guard::STATE_WORDS];
        self.state.read(&mut words)?;
        Ok(GuardState(words))
    }
}

impl GuardState {
    pub fn fault(&self) -> Option<FaultKind> {
        FaultKind::from_word(self.0[guard::STATE_KIND])
    }

    /// The most trips one loop entry made, in steps of 64 (with no budget set).
    pub fn most_trips(&self) -> u64 {
        self.0[guard::STATE_MOST_TRIPS]
    }

    /// The recorded fault as the simulator would say it; None without one.
    /// `kernels` are the chosen kernels' symbols, in the spec's order.
    pub fn verdict(
        &self,
        sites: &[GuardSite],
        test: &StagedTest,
        budget: Budget,
        kernels: &[String],
    ) -> Option<Verdict> {
        let kind = self.fault()?;
        let words = &self.0;
        let site = sites
            .iter()
            .find(|s| u64::from(s.id) == words[guard::STATE_SITE]);
        let address = words[guard::STATE_ADDRESS];
        let bytes = site.map_or(0, |s| s.bytes);
        let mut context = Context {
            source: site.and_then(|s| s.source.clone()),
            ..Context::default()
        };
        let written = self.written_input(sites, test, kernels);
        let fault = match (kind, written) {
            (_, Some((slot, offset))) => {
                context.buffer = buffer_name(test, slot);
                Fault::InputWritten {
                    buffer: slot,
                    offset,
                    bytes,
                }
            }
            // A budget names a loop, not a buffer (`address` holds trips).
            (FaultKind::TripBudget, None) => Fault::TripBudget {
                budget: budget.trips,
            },
            (FaultKind::TimeBudget, None) => Fault::TimeBudget {
                budget_us: budget.time.as_micros() as u64,
            },
            (FaultKind::DivergentBarrier, None) => Fault::WarpDivergentBarrier {
                other_thread: unpack_lane(address),
            },
            (
                FaultKind::GlobalOutOfBounds
                | FaultKind::SharedOutOfBounds
                | FaultKind::GlobalMisaligned
                | FaultKind::SharedMisaligned,
                None,
            ) => {
                let shared = matches!(
                    kind,
                    FaultKind::SharedOutOfBounds | FaultKind::SharedMisaligned
                );
                let (space, buffer, offset) = if shared {
                    ("shared", 0, address)
                } else {
                    match site
                        .and_then(|s| argument_buffer(test, s, kernels, address))
                        .or_else(|| nearest_buffer(test, address))
                    {
                        None => ("invalid", 0, address),
                        Some((slot, offset)) => {
                            context.buffer = buffer_name(test, slot);
                            ("global", slot, offset)
                        }
                    }
                };
                match kind {
                    FaultKind::GlobalMisaligned | FaultKind::SharedMisaligned => {
                        Fault::Misaligned {
                            space,
                            buffer,
                            offset,
                            bytes,
                        }
                    }
                    _ => Fault::OutOfBounds {
                        space,
                        buffer,
                        offset,
                        bytes,
                    },
                }
            }
        };
        let thread = words[guard::STATE_THREAD];
        let block = words[guard::STATE_BLOCK];
        Some(Verdict {
            fault,
            instruction: site.and_then(|s| s.instruction).unwrap_or(0),
            block: site.map_or_else(String::new, |s| s.block.clone()),
            cta: [
                (block & 0xffff_ffff) as u32,
                ((block >> 32) & 0xffff) as u32,
                (block >> 48) as u32,
            ],
            thread: unpack_thread(thread),
            context: Box::new(context),
        })
    }

    /// The kept input (slot) and byte offset a refused write was aimed at:
    /// a write inside its own argument's buffer that is out of bounds only
    /// because the table makes the kept inputs read-only (`arm`). None for
    /// any other record.
    pub fn written_input(
        &self,
        sites: &[GuardSite],
        test: &StagedTest,
        kernels: &[String],
    ) -> Option<(usize, u64)> {
        if self.fault()? != FaultKind::GlobalOutOfBounds || !test.protect_kept.get() {
            return None;
        }
        let words = &self.0;
        let site = sites
            .iter()
            .find(|s| u64::from(s.id) == words[guard::STATE_SITE])
            .filter(|s| s.kind.writes())?;
        let (slot, offset) = argument_buffer(test, site, kernels, words[guard::STATE_ADDRESS])?;
        let len = test.work.get(slot)?.as_ref()?.len as u64;
        (test.kept_inputs.contains(&slot) && offset + u64::from(site.bytes) <= len)
            .then_some((slot, offset))
    }
}

/// A divergent barrier's other lane (`FaultKind::DivergentBarrier`): its
/// linear index in the block, divided out by the block's sizes.
fn unpack_lane(word: u64) -> [u32; 3] {
    let index = (word & 0xffff) as u32;
    let x_size = ((word >> 16) & 0xffff).max(1) as u32;
    let y_size = ((word >> 32) & 0xffff).max(1) as u32;
    [
        index % x_size,
        index / x_size % y_size,
        index / (x_size * y_size),
    ]
}

/// A thread's coordinates as the guard runtime packs them
/// (`x | y << 20 | z << 40`).
fn unpack_thread(word: u64) -> [u32; 3] {
    [
        (word & 0xf_ffff) as u32,
        ((word >> 20) & 0xf_ffff) as u32,
        (word >> 40) as u32,
    ]
}

/// The buffer (by slot) whose range `address` is in or nearest to, and
/// the address's offset from its start ([`offset_from`]).
fn nearest_buffer(test: &StagedTest, address: u64) -> Option<(usize, u64)> {
    test.work
        .iter()
        .enumerate()
        .filter_map(|(slot, b)| b.as_ref().map(|b| (slot, b)))
        .min_by_key(|(_, b)| {
            let end = b.ptr + b.len as u64;
            if address < b.ptr {
                b.ptr - address
            } else if address >= end {
                address - end + 1
            } else {
                0
            }
        })
        .map(|(slot, b)| (slot, offset_from(b.ptr, address)))
}

/// `address` relative to `start`, as the simulator's pointers hold an
/// offset (two's complement over `OFFSET_BITS`: before the start is negative).
fn offset_from(start: u64, address: u64) -> u64 {
    address.wrapping_sub(start) & ((1u64 << gevo_model::sim::pointer::OFFSET_BITS) - 1)
}

/// The buffer (by slot) the site's pointer derives from, as the first
/// launch of its kernel binds it, and the address's offset from its start.
fn argument_buffer(
    test: &StagedTest,
    site: &GuardSite,
    kernels: &[String],
    address: u64,
) -> Option<(usize, u64)> {
    let parameter = site.argument? as usize;
    let kernel = kernels.iter().position(|k| *k == site.function)?;
    let launch = test.instance.launches.iter().find(|l| l.kernel == kernel)?;
    let LaunchParam::Buffer { slot, .. } = *launch.params.get(parameter)? else {
        return None;
    };
    let buffer = test.work.get(slot)?.as_ref()?;
    Some((slot, offset_from(buffer.ptr, address)))
}

/// The spec's argument a test buffer starts as (slot `i` is argument `i`'s
/// buffer; swaps may bind it to another argument in later launches).
fn buffer_name(test: &StagedTest, slot: usize) -> Option<BufferName> {
    let instance = &test.instance;
    match &instance.args[slot] {
        ArgValue::Buffer { elem, data, .. } => Some(BufferName {
            arg: instance.names[slot].clone(),
            elem_bytes: elem.size() as u64,
            len: (data.len() / elem.size().max(1)) as u64,
        }),
        ArgValue::Scalar(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device packs the other lane as `index | x_size << 16 | y_size
    /// << 32` (ir/guard/barriers.rs); the host divides it out.
    #[test]
    fn a_divergent_barriers_other_lane_unpacks_to_its_thread() {
        let pack = |index: u64, x: u64, y: u64| index | x << 16 | y << 32;
        for (word, thread) in [
            (pack(37, 16, 16), [5, 2, 0]),
            (pack(45, 8, 4), [5, 1, 1]),
            (pack(1023, 1024, 1), [1023, 0, 0]),
            (pack(1023, 1, 1024), [0, 1023, 0]),
            (pack(0, 32, 32), [0, 0, 0]),
        ] {
            assert_eq!(unpack_lane(word), thread, "{word:#x}");
        }
    }
}
