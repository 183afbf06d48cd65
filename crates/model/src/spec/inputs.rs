//! Per-test evaluation of a spec and deterministic input generation.

use super::error::SpecError;
use super::expr::{format_number, Expr, MAX_EXACT_INT};
use super::model::*;
use super::pipeline::{Expander, Geometry, LaunchInstance, Step, MAX_LAUNCHES};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

/// Largest buffer, in bytes (16 GiB).
pub const MAX_BUFFER_BYTES: u64 = 1 << 34;
/// Most threads in one block.
pub const MAX_BLOCK_THREADS: u64 = 1024;

/// A test's launches and argument sizes, before any data is made.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) launches: Vec<LaunchInstance>,
    pub(crate) final_binding: Vec<usize>,
    /// Element count per argument (0 for scalars).
    pub(crate) lens: Vec<usize>,
    /// Value per argument (`None` for buffers).
    pub(crate) scalars: Vec<Option<Scalar>>,
}

fn show(e: &Expr, v: f64) -> String {
    let v = format_number(v);
    if e.source().trim() == v {
        format!("found {v}")
    } else {
        format!("found `{}` = {v}", e.source())
    }
}

impl Spec {
    fn eval(&self, e: &Located<Expr>, test: &TestCase) -> Result<f64, SpecError> {
        e.value.eval(&test.params).map_err(|err| {
            e.at.error(&self.path, format!("{} in test {}", err.message, test.name))
        })
    }

    /// Evaluates an integer field; `lo..=hi` is its range (capped at ±2^53).
    pub(crate) fn eval_int(
        &self,
        e: &Located<Expr>,
        test: &TestCase,
        lo: i128,
        hi: i128,
    ) -> Result<i128, SpecError> {
        let v = self.eval(e, test)?;
        if v.fract() != 0.0 {
            return Err(e.at.error(
                &self.path,
                format!(
                    "must be an integer, {} in test {}",
                    show(&e.value, v),
                    test.name
                ),
            ));
        }
        let exact = MAX_EXACT_INT as i128;
        let (lo, hi) = (lo.max(-exact), hi.min(exact));
        if v < lo as f64 || v > hi as f64 {
            return Err(e.at.error(
                &self.path,
                format!(
                    "must be between {lo} and {hi}, {} in test {}",
                    show(&e.value, v),
                    test.name
                ),
            ));
        }
        Ok(v as i128)
    }

    /// Evaluates a scalar of type `ty`: integral and in range for integer
    /// types, within range for `f32`.
    pub(crate) fn eval_scalar(
        &self,
        ty: ElemType,
        value: &Located<Expr>,
        test: &TestCase,
    ) -> Result<Scalar, SpecError> {
        Ok(match ty.int_range() {
            Some((lo, hi)) => int_scalar(ty, self.eval_int(value, test, lo, hi)?),
            None => {
                let v = self.eval(value, test)?;
                if ty == ElemType::F32 {
                    if v.abs() > f32::MAX as f64 {
                        return Err(value.at.error(
                            &self.path,
                            format!(
                                "out of f32 range, {} in test {}",
                                show(&value.value, v),
                                test.name
                            ),
                        ));
                    }
                    Scalar::F32(v as f32)
                } else {
                    Scalar::F64(v)
                }
            }
        })
    }

    /// One launch's geometry and launch count for a test.
    pub(crate) fn geometry(&self, l: &Launch, test: &TestCase) -> Result<Geometry, SpecError> {
        let mut grid = [1u32; 3];
        for (d, e) in l.grid.iter().enumerate() {
            let max = if d == 0 { i32::MAX as i128 } else { 65535 };
            grid[d] = self.eval_int(e, test, 1, max)? as u32;
        }
        let mut block = [1u32; 3];
        for (d, e) in l.block.iter().enumerate() {
            let max = if d == 2 {
                64
            } else {
                MAX_BLOCK_THREADS as i128
            };
            block[d] = self.eval_int(e, test, 1, max)? as u32;
        }
        let threads: u64 = block.iter().map(|&b| b as u64).product();
        if threads > MAX_BLOCK_THREADS {
            return Err(l.block_at.error(
                &self.path,
                format!(
                    "{}x{}x{} = {threads} threads per block, at most {MAX_BLOCK_THREADS}, in test {}",
                    block[0], block[1], block[2], test.name
                ),
            ));
        }
        let shared_bytes = self.eval_int(&l.shared_bytes, test, 0, u32::MAX as i128)? as u32;
        let count = match &l.repeat {
            None => 1,
            Some(r) => self.eval_int(&r.count, test, 1, MAX_LAUNCHES as i128)? as u32,
        };
        Ok(Geometry {
            grid,
            block,
            shared_bytes,
            count,
        })
    }

    /// Swapped buffers must have equal lengths in every test.
    pub(crate) fn check_swap(
        &self,
        a: usize,
        b: usize,
        at: &crate::spec::Location,
        lens: &[usize],
        test: &TestCase,
    ) -> Result<(), SpecError> {
        if lens[a] != lens[b] {
            return Err(at.error(
                &self.path,
                format!(
                    "buffers of different lengths cannot be swapped: `{}` has {} elements, `{}` has {}, in test {}",
                    self.args[a].name, lens[a], self.args[b].name, lens[b], test.name
                ),
            ));
        }
        Ok(())
    }

    /// Evaluates every expression for a test, expands the pipeline, and
    /// checks the results.
    pub(crate) fn plan(&self, test: &TestCase) -> Result<Plan, SpecError> {
        // The single-kernel form checks its launch before its arguments.
        if let [Step::Launch(l)] = self.pipeline.as_slice() {
            if self.is_single_launch() {
                self.geometry(&l.geometry, test)?;
            }
        }
        let mut lens = Vec::with_capacity(self.args.len());
        let mut scalars = Vec::with_capacity(self.args.len());
        for arg in &self.args {
            match &arg.kind {
                ArgKind::Buffer {
                    elem, len, fill, ..
                } => {
                    let max = (MAX_BUFFER_BYTES / elem.size() as u64) as i128;
                    let n = self.eval_int(len, test, 1, max)? as usize;
                    check_fill(self, fill, *elem, n, test)?;
                    lens.push(n);
                    scalars.push(None);
                }
                ArgKind::Scalar { ty, value } => {
                    lens.push(0);
                    scalars.push(Some(self.eval_scalar(*ty, value, test)?));
                }
            }
        }
        let expanded = Expander {
            spec: self,
            lens: &lens,
            scalars: &scalars,
            binding: (0..self.args.len()).collect(),
            out: Vec::new(),
            steps: 0,
            labelled: !self.is_single_launch(),
        }
        .run(&self.pipeline, test)?;
        if expanded.launches.is_empty() {
            let at = match self.pipeline.first() {
                Some(Step::Launch(l)) => &l.geometry.block_at,
                Some(Step::Loop(l)) => &l.at,
                None => unreachable!("a pipeline has at least one entry"),
            };
            return Err(at.error(
                &self.path,
                format!(
                    "the pipeline makes no launch in test {}; every test must run a kernel",
                    test.name
                ),
            ));
        }
        Ok(Plan {
            launches: expanded.launches,
            final_binding: expanded.final_binding,
            lens,
            scalars,
        })
    }

    /// Bytes of buffer data a test's instance holds, without generating it.
    pub fn buffer_bytes(&self, test: &TestCase) -> Result<usize, SpecError> {
        self.sum_buffers(test, |_| 1)
    }

    /// Bytes a test takes on a GPU (`cuda::measure`): every buffer the
    /// kernels run on, a pristine copy of each input, and with `references`
    /// the original's result of each output.
    pub fn device_bytes(&self, test: &TestCase, references: bool) -> Result<usize, SpecError> {
        self.sum_buffers(test, |role| {
            1 + usize::from(role != Role::Out) + usize::from(references && role != Role::In)
        })
    }

    /// The bytes of `test`'s buffers, each counted `copies(role)` times.
    fn sum_buffers(
        &self,
        test: &TestCase,
        copies: impl Fn(Role) -> usize,
    ) -> Result<usize, SpecError> {
        let plan = self.plan(test)?;
        Ok(self
            .args
            .iter()
            .zip(&plan.lens)
            .map(|(arg, len)| match &arg.kind {
                ArgKind::Buffer { elem, role, .. } => copies(*role) * len * elem.size(),
                ArgKind::Scalar { .. } => 0,
            })
            .sum())
    }

    /// Threads a test's launches run, over all of them, without generating
    /// its inputs.
    pub fn thread_count(&self, test: &TestCase) -> Result<u64, SpecError> {
        let plan = self.plan(test)?;
        Ok(plan
            .launches
            .iter()
            .map(|l| {
                l.grid
                    .iter()
                    .chain(&l.block)
                    .map(|&d| u64::from(d))
                    .product::<u64>()
            })
            .sum())
    }

    /// Evaluates all expressions for `test` and generates its inputs.
    ///
    /// Buffers with a random fill draw from a ChaCha8 generator seeded per
    /// argument from the test's seed and the argument's name (see
    /// [`fill_seed`]); `out` buffers are zero-filled. The same spec and test
    /// give the same bytes, in any process. Large random buffers are made
    /// on every core ([`Spec::instantiate_on`]).
    pub fn instantiate(&self, test: &TestCase) -> Result<Instance, SpecError> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.instantiate_on(test, cores)
    }

    /// [`Spec::instantiate`] with at most `threads` threads per buffer; the
    /// bytes do not depend on `threads`.
    pub fn instantiate_on(&self, test: &TestCase, threads: usize) -> Result<Instance, SpecError> {
        let plan = self.plan(test)?;
        let mut args = Vec::with_capacity(self.args.len());
        for (i, arg) in self.args.iter().enumerate() {
            args.push(match &arg.kind {
                ArgKind::Buffer {
                    elem, role, fill, ..
                } => ArgValue::Buffer {
                    elem: *elem,
                    role: *role,
                    data: generate(
                        &fill.value,
                        *elem,
                        plan.lens[i],
                        fill_seed(test.seed, &arg.name),
                        threads,
                    ),
                },
                ArgKind::Scalar { .. } => {
                    ArgValue::Scalar(plan.scalars[i].expect("planned scalar"))
                }
            });
        }
        Ok(Instance {
            args,
            names: self.args.iter().map(|a| a.name.clone()).collect(),
            launches: plan.launches,
            final_binding: plan.final_binding,
        })
    }
}

/// Checks a fill against a test's buffer length: data files must hold
/// exactly `len` elements, integer iotas must stay in range.
fn check_fill(
    spec: &Spec,
    fill: &Located<Fill>,
    elem: ElemType,
    len: usize,
    test: &TestCase,
) -> Result<(), SpecError> {
    match &fill.value {
        Fill::File { path, elems, .. } if *elems != len => Err(fill.at.error(
            &spec.path,
            format!(
                "{} holds {elems} {elem} elements, but len is {len} in test {}",
                path.display(),
                test.name
            ),
        )),
        Fill::Iota {
            start: Number::Int(s),
        } => {
            if let Some((_, hi)) = elem.int_range() {
                let last = *s as i128 + len as i128 - 1;
                if last > hi {
                    return Err(fill.at.error(
                        &spec.path,
                        format!(
                            "iota from {s} reaches {last} with len {len}, beyond {elem}'s maximum {hi}, in test {}",
                            test.name
                        ),
                    ));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn int_scalar(ty: ElemType, v: i128) -> Scalar {
    match ty {
        ElemType::I8 => Scalar::I8(v as i8),
        ElemType::I16 => Scalar::I16(v as i16),
        ElemType::I32 => Scalar::I32(v as i32),
        ElemType::I64 => Scalar::I64(v as i64),
        ElemType::U8 => Scalar::U8(v as u8),
        ElemType::U16 => Scalar::U16(v as u16),
        ElemType::U32 => Scalar::U32(v as u32),
        ElemType::U64 => Scalar::U64(v as u64),
        ElemType::F32 => Scalar::F32(v as f32),
        ElemType::F64 => Scalar::F64(v as f64),
    }
}

/// The 32-byte ChaCha8 seed of one buffer's generator:
/// `SHA-256("gevo-spec-fill-v1" || 0x00 || seed as u64 little-endian || name as UTF-8)`.
pub fn fill_seed(seed: u64, arg_name: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"gevo-spec-fill-v1\0");
    h.update(seed.to_le_bytes());
    h.update(arg_name.as_bytes());
    h.finalize().into()
}

/// A uniform draw in [0, 1): the top 53 bits of the next u64, times 2^-53.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn put_float(cell: &mut [u8], elem: ElemType, v: f64) {
    match elem {
        ElemType::F32 => cell.copy_from_slice(&(v as f32).to_le_bytes()),
        ElemType::F64 => cell.copy_from_slice(&v.to_le_bytes()),
        _ => unreachable!("float fill on an integer buffer is refused on load"),
    }
}

fn put_int(cell: &mut [u8], elem: ElemType, v: i128) {
    match elem {
        ElemType::I8 => cell.copy_from_slice(&(v as i8).to_le_bytes()),
        ElemType::I16 => cell.copy_from_slice(&(v as i16).to_le_bytes()),
        ElemType::I32 => cell.copy_from_slice(&(v as i32).to_le_bytes()),
        ElemType::I64 => cell.copy_from_slice(&(v as i64).to_le_bytes()),
        ElemType::U8 => cell.copy_from_slice(&(v as u8).to_le_bytes()),
        ElemType::U16 => cell.copy_from_slice(&(v as u16).to_le_bytes()),
        ElemType::U32 => cell.copy_from_slice(&(v as u32).to_le_bytes()),
        ElemType::U64 => cell.copy_from_slice(&(v as u64).to_le_bytes()),
        ElemType::F32 | ElemType::F64 => put_float(cell, elem, v as f64),
    }
}

fn put_number(cell: &mut [u8], elem: ElemType, v: Number) {
    match v {
        Number::Int(i) => put_int(cell, elem, i as i128),
        Number::Float(f) => put_float(cell, elem, f),
    }
}

/// Random elements per thread below which one thread makes a buffer.
pub(crate) const ELEMENTS_PER_THREAD: usize = 1 << 20;

/// Makes `len` elements of a fill from the generator seeded with `seed`, a
/// random fill of a large buffer split over up to `threads` threads: a GPU
/// worker makes its tests' inputs (gigabytes at GPU sizes) at every start,
/// and after every variant that crashes one. ChaCha8 can seek, and each
/// random fill draws one u64 per element (the normal fill two per pair of
/// elements, and the parts start at even elements), so each part starts
/// where one generator would be there: the bytes are the same as one
/// thread's.
pub(crate) fn generate(
    fill: &Fill,
    elem: ElemType,
    len: usize,
    seed: [u8; 32],
    threads: usize,
) -> Vec<u8> {
    let size = elem.size();
    // Zeroed pages come lazily from the allocator; every element is then
    // written in place.
    let mut out = vec![0u8; len * size];
    if len == 0 || matches!(fill, Fill::Zero) {
        return out;
    }
    let random = matches!(
        fill,
        Fill::Uniform { .. } | Fill::Normal { .. } | Fill::IntRange { .. }
    );
    let threads = if random {
        threads.min(len / ELEMENTS_PER_THREAD).max(1)
    } else {
        1
    };
    let per = len.div_ceil(threads).next_multiple_of(2);
    std::thread::scope(|s| {
        for (k, part) in out.chunks_mut(per * size).enumerate() {
            let first = k * per;
            let mut make = move || {
                let mut rng = ChaCha8Rng::from_seed(seed);
                // Two 32-bit words per u64 drawn.
                rng.set_word_pos(2 * first as u128);
                fill_part(fill, elem, first, part, &mut rng);
            };
            if threads == 1 {
                make();
            } else {
                s.spawn(make);
            }
        }
    });
    out
}

/// Writes the elements `first..` of a fill into `out`, the random ones
/// drawn from `rng` onwards.
fn fill_part(fill: &Fill, elem: ElemType, first: usize, out: &mut [u8], rng: &mut ChaCha8Rng) {
    let size = elem.size();
    let mut cells = out.chunks_exact_mut(size);
    match fill {
        Fill::Zero => {}
        Fill::Uniform { lo, hi } => {
            for cell in cells {
                put_float(cell, elem, lo + (hi - lo) * unit(rng));
            }
        }
        Fill::Normal { mean, stddev } => {
            while let Some(cell) = cells.next() {
                // Box-Muller: u1 in (0, 1], u2 in [0, 1); both values of the pair are used.
                let u1 = 1.0 - unit(rng);
                let u2 = unit(rng);
                let r = (-2.0 * u1.ln()).sqrt();
                let theta = 2.0 * std::f64::consts::PI * u2;
                put_float(cell, elem, mean + stddev * r * theta.cos());
                if let Some(cell) = cells.next() {
                    put_float(cell, elem, mean + stddev * r * theta.sin());
                }
            }
        }
        Fill::IntRange { lo, hi } => {
            let span = (*hi as i128 - *lo as i128 + 1) as u128;
            for cell in cells {
                let x = ((rng.next_u64() as u128 * span) >> 64) as i128;
                put_int(cell, elem, *lo as i128 + x);
            }
        }
        Fill::Iota { start } => {
            for (i, cell) in cells.enumerate() {
                let i = first + i;
                match start {
                    Number::Int(s) => put_int(cell, elem, *s as i128 + i as i128),
                    Number::Float(s) => put_float(cell, elem, s + i as f64),
                }
            }
        }
        Fill::Constant(v) => {
            for cell in cells {
                put_number(cell, elem, *v);
            }
        }
        // Exactly `len` elements (checked on load).
        Fill::File { data, .. } => {
            let at = first * size;
            out.copy_from_slice(&data[at..at + out.len()]);
        }
    }
}
