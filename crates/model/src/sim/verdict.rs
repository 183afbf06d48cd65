//! Why a simulated run failed, naming the instruction, block and thread,
//! and where the caller knows them, the spec's argument, the shared
//! variable and the CUDA source line, in the user's words.

use crate::sim::pointer::signed_offset;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    OutOfBounds {
        space: &'static str,
        buffer: usize,
        offset: u64,
        bytes: u32,
    },
    SharedRace {
        offset: u64,
        /// The other thread, when exactly one other thread touched the byte.
        other_thread: Option<[u32; 3]>,
        write: bool,
    },
    UninitializedShared {
        offset: u64,
    },
    /// A plain store to global bytes that another block (`other_block`,
    /// its CTA coordinates) also wrote with plain stores in this launch.
    GlobalRace {
        buffer: usize,
        offset: u64,
        bytes: u32,
        other_block: [u32; 3],
    },
    /// A store (plain, vector or atomic) into a global buffer the caller
    /// protected: an input the original kernel never writes.
    InputWritten {
        buffer: usize,
        offset: u64,
        bytes: u32,
    },
    /// An aligned barrier this thread waits at while `other_thread` of the
    /// same block has exited (`other_barrier` None) or waits at another
    /// barrier instruction.
    DivergentBarrier {
        other_thread: [u32; 3],
        other_barrier: Option<u32>,
    },
    /// Lanes of one warp reached an aligned barrier apart, `other_thread`
    /// of the warp not among them (found by the GPU backend's guarded
    /// builds, whose barriers let lanes arrive apart; the ordinary build
    /// hangs there).
    WarpDivergentBarrier {
        other_thread: [u32; 3],
    },
    StepBudget {
        budget: u64,
    },
    /// An access at an address its width does not allow (found by the GPU
    /// backend's guarded builds; the simulator does not check alignment).
    Misaligned {
        space: &'static str,
        buffer: usize,
        offset: u64,
        bytes: u32,
    },
    /// A thread made more loop trips than its budget (the GPU backend's
    /// guarded builds: a multiple of the original's most).
    TripBudget {
        budget: u64,
    },
    /// A thread looped past its run's time budget (the GPU backend's
    /// guarded builds: a multiple of the original's guarded run).
    TimeBudget {
        budget_us: u64,
    },
    Unsupported {
        what: String,
    },
    Unreachable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub fault: Fault,
    /// The edit engine's instruction id.
    pub instruction: u32,
    pub block: String,
    pub cta: [u32; 3],
    pub thread: [u32; 3],
    /// Boxed: verdicts travel in `Err`s, which stay small.
    pub context: Box<Context>,
}

/// What a fault touched, in the user's words: filled in by whoever knows
/// (the simulator knows buffers by number and shared memory by offset).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Context {
    /// The global buffer's kernel argument (set by `eval`).
    pub buffer: Option<BufferName>,
    /// The static shared variable holding the byte, and the byte's offset
    /// within it (set by the simulator).
    pub shared: Option<(String, u64)>,
    /// `file:line` of the instruction in the CUDA source, when the IR has
    /// line tables (set by `eval`).
    pub source: Option<String>,
    /// The launch of a pipeline that faulted, as the spec names it
    /// (`launches[1].body[0] (lu_perimeter, k = 16)`; set by `eval`).
    pub launch: Option<String>,
}

/// A global buffer as the spec names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferName {
    pub arg: String,
    pub elem_bytes: u64,
    /// In elements.
    pub len: u64,
}

impl BufferName {
    /// Where byte `offset` (as the pointer holds it) lies relative to the
    /// buffer: `element -64, 64 elements before its start`, `element 4096
    /// of 4096, just past its end`.
    pub fn position(&self, offset: u64) -> String {
        let byte = signed_offset(offset);
        let size = self.elem_bytes.max(1) as i64;
        let element = byte.div_euclid(size);
        let within = if byte.rem_euclid(size) == 0 {
            String::new()
        } else {
            format!(" (byte {} of it)", byte.rem_euclid(size))
        };
        let len = self.len as i64;
        let plural = |n: i64| if n == 1 { "" } else { "s" };
        let where_ = if element < 0 {
            format!(
                ", {} element{} before its start",
                -element,
                plural(-element)
            )
        } else if element == len {
            ", just past its end".to_string()
        } else if element > len {
            let past = element - len + 1;
            format!(", {past} element{} past its end", plural(past))
        } else {
            String::new()
        };
        format!("element {element}{within} of {len}{where_}")
    }
}

impl Verdict {
    /// A short name for tables and JSON: `out_of_bounds`, `race`, ...
    pub fn kind(&self) -> &'static str {
        match self.fault {
            Fault::OutOfBounds { .. } => "out_of_bounds",
            Fault::SharedRace { .. } => "race",
            Fault::UninitializedShared { .. } => "uninitialized_shared",
            Fault::GlobalRace { .. } => "global_race",
            Fault::InputWritten { .. } => "input_written",
            Fault::DivergentBarrier { .. } | Fault::WarpDivergentBarrier { .. } => {
                "divergent_barrier"
            }
            Fault::StepBudget { .. } => "step_budget",
            Fault::Misaligned { .. } => "misaligned",
            Fault::TripBudget { .. } => "trip_budget",
            Fault::TimeBudget { .. } => "time_budget",
            Fault::Unsupported { .. } => "unsupported",
            Fault::Unreachable => "unreachable",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::OutOfBounds {
                space,
                buffer,
                offset,
                bytes,
            } => match *space {
                "global" => write!(
                    f,
                    "out-of-bounds {bytes}-byte access to buffer {buffer} at byte {}",
                    signed_offset(*offset)
                ),
                "invalid" => write!(f, "{bytes}-byte access through an invalid pointer"),
                _ => write!(
                    f,
                    "out-of-bounds {bytes}-byte {space} access at byte {}",
                    signed_offset(*offset)
                ),
            },
            Fault::SharedRace {
                offset,
                other_thread,
                write,
            } => {
                let what = if *write { "write" } else { "read" };
                match other_thread {
                    Some(t) => write!(f, "shared-memory race: {what} of byte {offset} also touched by thread {t:?} since the last barrier"),
                    None => write!(f, "shared-memory race: {what} of byte {offset} also touched by other threads since the last barrier"),
                }
            }
            Fault::UninitializedShared { offset } => {
                write!(
                    f,
                    "read of shared byte {offset}, never written in this block"
                )
            }
            Fault::GlobalRace {
                buffer,
                offset,
                bytes,
                other_block,
            } => write!(
                f,
                "global-memory race: {bytes}-byte write to buffer {buffer} at byte {offset}, which block {other_block:?} also wrote in this launch"
            ),
            Fault::InputWritten {
                buffer,
                offset,
                bytes,
            } => write!(
                f,
                "{bytes}-byte write to input buffer {buffer} at byte {offset}, which the original never writes"
            ),
            Fault::DivergentBarrier {
                other_thread,
                other_barrier: None,
            } => write!(
                f,
                "divergent barrier: reached while thread {other_thread:?} of the same block has exited"
            ),
            Fault::DivergentBarrier {
                other_thread,
                other_barrier: Some(i),
            } => write!(
                f,
                "divergent barrier: reached while thread {other_thread:?} of the same block waits at another barrier, instruction i{i}"
            ),
            Fault::WarpDivergentBarrier { other_thread } => write!(
                f,
                "divergent barrier: reached apart from thread {other_thread:?} of the same warp (an aligned barrier hangs there)"
            ),
            Fault::StepBudget { budget } => {
                write!(f, "step budget of {budget} instructions per block exceeded")
            }
            Fault::Misaligned {
                space,
                offset,
                bytes,
                ..
            } => write!(
                f,
                "misaligned {bytes}-byte {space} access at byte {}",
                signed_offset(*offset)
            ),
            Fault::TripBudget { budget } => {
                write!(f, "loop trip budget of {budget} trips per loop entry exceeded")
            }
            Fault::TimeBudget { budget_us } => write!(
                f,
                "still looping past the run's time budget of {:.1} ms",
                *budget_us as f64 / 1e3
            ),
            Fault::Unsupported { what } => write!(f, "unsupported: {what}"),
            Fault::Unreachable => f.write_str("reached `unreachable`"),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(launch) = &self.context.launch {
            write!(f, "in {launch}: ")?;
        }
        if let (Fault::InputWritten { offset, .. }, Some(b)) = (&self.fault, &self.context.buffer) {
            // The line first: it is what the user looks up.
            let at = self
                .context
                .source
                .as_deref()
                .map_or(String::new(), |s| format!(" at {s}"));
            return write!(
                f,
                "writes input buffer `{}`{at} ({}), which the original never writes (instruction i{} in block {}, block {:?}, thread {:?})",
                b.arg,
                b.position(*offset),
                self.instruction,
                self.block,
                self.cta,
                self.thread
            );
        }
        match (&self.fault, &self.context.buffer, &self.context.shared) {
            (
                Fault::OutOfBounds {
                    space: "global",
                    offset,
                    bytes,
                    ..
                },
                Some(b),
                _,
            ) => write!(
                f,
                "out-of-bounds {bytes}-byte access to `{}` at {}",
                b.arg,
                b.position(*offset)
            )?,
            (
                Fault::GlobalRace {
                    offset,
                    bytes,
                    other_block,
                    ..
                },
                Some(b),
                _,
            ) => write!(
                f,
                "global-memory race: {bytes}-byte write to `{}` at {}, which block {other_block:?} also wrote in this launch",
                b.arg,
                b.position(*offset)
            )?,
            (
                Fault::Misaligned {
                    space: "global",
                    offset,
                    bytes,
                    ..
                },
                Some(b),
                _,
            ) => write!(
                f,
                "misaligned {bytes}-byte access to `{}` at {}",
                b.arg,
                b.position(*offset)
            )?,
            (fault, _, Some((name, at))) => write!(f, "{fault} (byte {at} of `{name}`)")?,
            (fault, _, _) => write!(f, "{fault}")?,
        }
        write!(
            f,
            " (instruction i{} in block {}, block {:?}, thread {:?}",
            self.instruction, self.block, self.cta, self.thread
        )?;
        match &self.context.source {
            Some(line) => write!(f, ", {line})"),
            None => f.write_str(")"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BufferName;

    #[test]
    fn positions_are_signed_elements_relative_to_the_buffer() {
        let b = BufferName {
            arg: "J".into(),
            elem_bytes: 4,
            len: 4096,
        };
        let wrapped = (1u64 << 40) - 256;
        for (offset, text) in [
            (wrapped, "element -64 of 4096, 64 elements before its start"),
            (
                (1u64 << 40) - 4,
                "element -1 of 4096, 1 element before its start",
            ),
            (4096 * 4, "element 4096 of 4096, just past its end"),
            (4100 * 4, "element 4100 of 4096, 5 elements past its end"),
            (12, "element 3 of 4096"),
            (13, "element 3 (byte 1 of it) of 4096"),
        ] {
            assert_eq!(b.position(offset), text);
        }
    }
}
