//! The validated spec and the values it instantiates to.

use super::error::Location;
use super::expr::Expr;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// A loaded, validated kernel spec.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The spec file (as given).
    pub path: PathBuf,
    /// The IR file, resolved against the spec file's directory.
    pub ir: PathBuf,
    /// The first kernel's entry name, as written (mangled or demangled): the
    /// kernel of a single-kernel spec, the name a pipeline's results go by.
    pub kernel: String,
    /// Every kernel the launches use, as written, in the order `kernel`
    /// lists them (one for the single-kernel form).
    pub kernels: Vec<String>,
    /// Target architecture, e.g. `sm_90`.
    pub arch: Option<String>,
    /// Free-form project name.
    pub project: Option<String>,
    /// The launches: `[launch]` as a pipeline of one, or `[[launches]]`.
    pub pipeline: Vec<super::pipeline::Step>,
    /// The buffers and scalars the launches pass: for the single-kernel
    /// form, the kernel's arguments in its parameter order.
    pub args: Vec<ArgSpec>,
    /// The train tests in use: `[tests]`'s as loaded, a backend's after
    /// [`Spec::for_backend`](crate::spec::Spec::for_backend).
    pub train: Vec<TestCase>,
    /// The heldout tests in use, likewise.
    pub heldout: Vec<TestCase>,
    /// `[tests]` as written, with the sets `[tests.sim]` and `[tests.gpu]`
    /// replace (what `for_backend` chooses from).
    pub(crate) written: WrittenTests,
    pub acceptance: Acceptance,
    /// Harness mode: the kernel's application runs it (`[harness]`). Such a
    /// spec has no `[launch]` or `[[args]]`: its pipeline is one trivial 1x1
    /// launch without arguments, and nothing launches it.
    pub harness: Option<Harness>,
    /// `[tune]`: the constants gevo may choose and the configuration this
    /// spec runs (its constants are every test's parameters, its IR `ir`).
    pub tune: Option<super::tune::Tune>,
    /// The spec file's text (for `content_hash`).
    pub(crate) text: String,
}

/// `[harness]`: how to run the kernel's application with a given PTX.
#[derive(Debug, Clone, PartialEq)]
pub struct Harness {
    /// The program and its arguments. `{ptx}`, `{out}`, `{test}`, `{seed}`
    /// and the test's parameters (`{n}`) are replaced per run.
    pub command: Vec<String>,
    /// The files the command runs: the program when given as a path, and
    /// arguments naming files (scripts), resolved against `workdir`.
    pub programs: Vec<PathBuf>,
    /// The program, opened when the spec loaded (and, for the daemon,
    /// checked on that descriptor): every run executes this file, never
    /// what `command[0]` names by then. `None` only for the command line's
    /// own specs whose program could not be opened then (the run says why).
    pub program: Option<CheckedProgram>,
    /// Where the command runs (resolved against the spec's directory).
    pub workdir: PathBuf,
    /// Longest a run may take before it is killed (and the variant rejected).
    pub timeout: std::time::Duration,
    /// Most bytes of stdout, of stderr, and of each output file.
    pub max_output_bytes: u64,
    /// On the GPU: runs of the original and of the variant per test, in
    /// alternating order; their undisturbed times (lower quartiles) are
    /// compared.
    pub rounds: u32,
    /// Files the command writes in `{out}`, compared with the original's.
    pub outputs: Vec<HarnessOutput>,
}

/// A harness program as opened when its spec loaded.
#[derive(Debug, Clone)]
pub struct CheckedProgram {
    /// Where `command[0]` led: resolved against the workdir, or found on
    /// [`Harness::PATH`].
    pub path: PathBuf,
    /// An `O_PATH` descriptor of the file (close-on-exec): runs execute it.
    pub fd: Arc<std::os::fd::OwnedFd>,
    /// The file's device and inode.
    pub id: (u64, u64),
}

impl PartialEq for CheckedProgram {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.id == other.id
    }
}

/// One output file of a harness run.
#[derive(Debug, Clone, PartialEq)]
pub struct HarnessOutput {
    /// A plain file name inside `{out}`.
    pub file: String,
    pub elem: ElemType,
}

/// The placeholders every harness command may use besides test parameters.
pub const HARNESS_PLACEHOLDERS: [&str; 4] = ["ptx", "out", "test", "seed"];

impl Harness {
    /// The `PATH` a harness command sees, where a program named without a
    /// `/` is looked up.
    pub const PATH: &'static str = "/usr/local/bin:/usr/bin:/bin";

    /// The command line for one run: placeholders replaced.
    pub fn argv(
        &self,
        test: &TestCase,
        ptx: &std::path::Path,
        out: &std::path::Path,
    ) -> Vec<String> {
        self.command
            .iter()
            .map(|arg| {
                substitute(arg, |name| match name {
                    "ptx" => Some(ptx.display().to_string()),
                    "out" => Some(out.display().to_string()),
                    "test" => Some(test.name.clone()),
                    "seed" => Some(test.seed.to_string()),
                    _ => test
                        .params
                        .get(name)
                        .map(|v| super::expr::format_number(*v)),
                })
                .expect("placeholders are checked when the spec loads")
            })
            .collect()
    }
}

/// `text` with every `{name}` replaced by `value(name)`; a name without a
/// value, or an unpaired brace, is the error. `{{` and `}}` stand for braces.
pub(crate) fn substitute(
    text: &str,
    mut value: impl FnMut(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('}') {
            return Err("a lone `}` (write `}}` for a brace)".into());
        }
        let Some(end) = tail.find('}') else {
            return Err("a `{` without its `}` (write `{{` for a brace)".into());
        };
        let name = &tail[1..end];
        let v = value(name).ok_or_else(|| format!("no value for the placeholder `{{{name}}}`"))?;
        out.push_str(&v);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A value from the spec with the place it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Located<T> {
    pub value: T,
    pub at: Location,
}

/// A launch's geometry, as expressions over test parameters (and loop
/// variables): `[launch]`, or one entry of `[[launches]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// 1 to 3 entries (x, y, z); missing ones are 1.
    pub grid: Vec<Located<Expr>>,
    /// 1 to 3 entries (x, y, z); missing ones are 1.
    pub block: Vec<Located<Expr>>,
    /// Dynamic shared memory in bytes (default 0).
    pub shared_bytes: Located<Expr>,
    /// Repeated launches (default: one launch, no swaps).
    pub repeat: Option<Repeat>,
    pub block_at: Location,
}

/// `launch.repeat`: launch the kernel `count` times, swapping buffers between launches.
#[derive(Debug, Clone, PartialEq)]
pub struct Repeat {
    pub count: Located<Expr>,
    /// Pairs of argument indices (both buffers) exchanged between launches.
    pub swap: Vec<(usize, usize)>,
    pub(crate) swap_at: Vec<Location>,
}

/// One `[[args]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgSpec {
    pub name: String,
    pub kind: ArgKind,
    pub at: Location,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ArgKind {
    Buffer {
        elem: ElemType,
        /// Number of elements.
        len: Located<Expr>,
        role: Role,
        /// `Fill::Zero` for `out` buffers.
        fill: Located<Fill>,
    },
    Scalar {
        ty: ElemType,
        value: Located<Expr>,
    },
}

/// A number as written in the spec: TOML integer or float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Int(i) => write!(f, "{i}"),
            Number::Float(v) => write!(f, "{v}"),
        }
    }
}

/// How a buffer's initial contents are made.
#[derive(Debug, Clone, PartialEq)]
pub enum Fill {
    /// All zero bytes (every `out` buffer).
    Zero,
    /// Uniform in `[lo, hi)`, float types only.
    Uniform { lo: f64, hi: f64 },
    /// Normal (Box-Muller), float types only.
    Normal { mean: f64, stddev: f64 },
    /// Uniform integers in `[lo, hi]` (inclusive), any type.
    IntRange { lo: i64, hi: i64 },
    /// `start, start + 1, start + 2, ...`
    Iota { start: Number },
    /// Every element the same.
    Constant(Number),
    /// Contents of a file: `.npy`, or raw little-endian elements.
    File {
        /// Resolved path.
        path: PathBuf,
        /// The element data (the `.npy` payload without its header).
        data: Arc<Vec<u8>>,
        /// Number of elements in the file.
        elems: usize,
    },
}

/// Which set of test cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestSet {
    Train,
    Heldout,
    All,
    /// The held-out tests gevo generates from the spec's parameters and
    /// keeps where the original runs cleanly (`spec::generate`, `eval`).
    Generated,
}

/// Where a spec's tests run: which of `[tests.sim]` and `[tests.gpu]`
/// applies (see [`Spec::for_backend`](crate::spec::Spec::for_backend)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TestTarget {
    /// The CPU simulator: the `sim` backend, the GPU backend's compile
    /// workers and pre-screen, harness programs on the simulator.
    Sim,
    /// A GPU: the GPU worker's measurements, harness programs on a GPU.
    Gpu,
}

impl TestTarget {
    pub const ALL: [TestTarget; 2] = [TestTarget::Sim, TestTarget::Gpu];

    /// The sub-table's name: `sim` or `gpu`.
    pub fn name(self) -> &'static str {
        match self {
            TestTarget::Sim => "sim",
            TestTarget::Gpu => "gpu",
        }
    }
}

/// `[tests]` as written: the sets every backend uses unless its sub-table
/// replaces them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WrittenTests {
    pub(crate) train: Vec<TestCase>,
    pub(crate) heldout: Vec<TestCase>,
    /// `[tests.sim]`
    pub(crate) sim: TestOverrides,
    /// `[tests.gpu]`
    pub(crate) gpu: TestOverrides,
    /// `fixed`, `allowed` and `generate`: what generated tests may change.
    pub(crate) generation: super::generate::Generation,
}

/// A `[tests.sim]` or `[tests.gpu]` table: the sets it replaces.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TestOverrides {
    pub(crate) train: Option<Vec<TestCase>>,
    pub(crate) heldout: Option<Vec<TestCase>>,
}

impl WrittenTests {
    pub(crate) fn overrides(&self, target: TestTarget) -> &TestOverrides {
        match target {
            TestTarget::Sim => &self.sim,
            TestTarget::Gpu => &self.gpu,
        }
    }
}

/// One test case: parameter values and the seed for generated inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct TestCase {
    /// `train[0]`, `heldout[1]`, ...
    pub name: String,
    pub seed: u64,
    /// Parameters (the test's table without `seed`).
    pub params: BTreeMap<String, f64>,
}

/// `[acceptance]`: how a variant's outputs are compared with the reference.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Acceptance {
    pub metric: Metric,
    pub tolerance: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Exact,
    MaxAbs,
    MaxRel,
    Ulp,
}

impl Metric {
    pub const NAMES: [&'static str; 4] = ["exact", "max_abs", "max_rel", "ulp"];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Exact => "exact",
            Metric::MaxAbs => "max_abs",
            Metric::MaxRel => "max_rel",
            Metric::Ulp => "ulp",
        }
    }

    pub fn from_name(name: &str) -> Option<Metric> {
        Some(match name {
            "exact" => Metric::Exact,
            "max_abs" => Metric::MaxAbs,
            "max_rel" => Metric::MaxRel,
            "ulp" => Metric::Ulp,
            _ => return None,
        })
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Element type of a buffer, or type of a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElemType {
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

impl ElemType {
    pub const ALL: [ElemType; 10] = [
        ElemType::F32,
        ElemType::F64,
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::U8,
        ElemType::U16,
        ElemType::U32,
        ElemType::U64,
    ];

    /// Size in bytes.
    pub fn size(self) -> usize {
        match self {
            ElemType::I8 | ElemType::U8 => 1,
            ElemType::I16 | ElemType::U16 => 2,
            ElemType::F32 | ElemType::I32 | ElemType::U32 => 4,
            ElemType::F64 | ElemType::I64 | ElemType::U64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F64)
    }

    pub fn is_signed(self) -> bool {
        matches!(
            self,
            ElemType::I8 | ElemType::I16 | ElemType::I32 | ElemType::I64
        )
    }

    /// The name used in spec files (`f32`, `u8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::U8 => "u8",
            ElemType::U16 => "u16",
            ElemType::U32 => "u32",
            ElemType::U64 => "u64",
        }
    }

    pub fn from_name(name: &str) -> Option<ElemType> {
        ElemType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Smallest and largest value of an integer type (as i128); `None` for floats.
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            ElemType::I8 => (i8::MIN.into(), i8::MAX.into()),
            ElemType::I16 => (i16::MIN.into(), i16::MAX.into()),
            ElemType::I32 => (i32::MIN.into(), i32::MAX.into()),
            ElemType::I64 => (i64::MIN.into(), i64::MAX.into()),
            ElemType::U8 => (0, u8::MAX.into()),
            ElemType::U16 => (0, u16::MAX.into()),
            ElemType::U32 => (0, u32::MAX.into()),
            ElemType::U64 => (0, u64::MAX.into()),
            ElemType::F32 | ElemType::F64 => return None,
        })
    }

    /// The `.npy` dtype string numpy writes for this type (`<f4`, `|u1`, ...).
    pub fn npy_descr(self) -> &'static str {
        match self {
            ElemType::F32 => "<f4",
            ElemType::F64 => "<f8",
            ElemType::I8 => "|i1",
            ElemType::I16 => "<i2",
            ElemType::I32 => "<i4",
            ElemType::I64 => "<i8",
            ElemType::U8 => "|u1",
            ElemType::U16 => "<u2",
            ElemType::U32 => "<u4",
            ElemType::U64 => "<u8",
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the kernel does with a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read only; filled from `fill`, not compared.
    In,
    /// Written only; zero-filled, compared.
    Out,
    /// Read and written; filled from `fill`, compared.
    Inout,
}

impl Role {
    /// Whether the buffer's final contents are compared with the reference.
    pub fn is_output(self) -> bool {
        matches!(self, Role::Out | Role::Inout)
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::In => "in",
            Role::Out => "out",
            Role::Inout => "inout",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scalar kernel argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
}

impl Scalar {
    pub fn elem(self) -> ElemType {
        match self {
            Scalar::I8(_) => ElemType::I8,
            Scalar::I16(_) => ElemType::I16,
            Scalar::I32(_) => ElemType::I32,
            Scalar::I64(_) => ElemType::I64,
            Scalar::U8(_) => ElemType::U8,
            Scalar::U16(_) => ElemType::U16,
            Scalar::U32(_) => ElemType::U32,
            Scalar::U64(_) => ElemType::U64,
            Scalar::F32(_) => ElemType::F32,
            Scalar::F64(_) => ElemType::F64,
        }
    }

    /// Little-endian bytes, as the kernel parameter is laid out.
    pub fn to_le_bytes(self) -> Vec<u8> {
        match self {
            Scalar::I8(v) => v.to_le_bytes().to_vec(),
            Scalar::I16(v) => v.to_le_bytes().to_vec(),
            Scalar::I32(v) => v.to_le_bytes().to_vec(),
            Scalar::I64(v) => v.to_le_bytes().to_vec(),
            Scalar::U8(v) => v.to_le_bytes().to_vec(),
            Scalar::U16(v) => v.to_le_bytes().to_vec(),
            Scalar::U32(v) => v.to_le_bytes().to_vec(),
            Scalar::U64(v) => v.to_le_bytes().to_vec(),
            Scalar::F32(v) => v.to_le_bytes().to_vec(),
            Scalar::F64(v) => v.to_le_bytes().to_vec(),
        }
    }
}

/// The scalar's bits in a 64-bit argument register: integers zero-extended
/// from their own width, floats as their IEEE bits.
pub fn scalar_bits(s: Scalar) -> u64 {
    match s {
        Scalar::I8(v) => v as u8 as u64,
        Scalar::I16(v) => v as u16 as u64,
        Scalar::I32(v) => v as u32 as u64,
        Scalar::I64(v) => v as u64,
        Scalar::U8(v) => u64::from(v),
        Scalar::U16(v) => u64::from(v),
        Scalar::U32(v) => u64::from(v),
        Scalar::U64(v) => v,
        Scalar::F32(v) => u64::from(v.to_bits()),
        Scalar::F64(v) => v.to_bits(),
    }
}

/// One kernel argument's value for a test.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    Buffer {
        elem: ElemType,
        role: Role,
        /// `len * elem.size()` bytes, little-endian elements.
        data: Vec<u8>,
    },
    Scalar(Scalar),
}

/// Everything needed to run one test case: the arguments' values and the
/// launches in order, buffer swaps resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// One value per `[[args]]` entry, in order: a buffer's initial contents
    /// (its memory is named by the entry's index), or a scalar.
    pub args: Vec<ArgValue>,
    /// The arguments' names in the spec, in order (for messages).
    pub names: Vec<String>,
    /// Every launch of the test, in order.
    pub launches: Vec<super::pipeline::LaunchInstance>,
    /// Per argument: the memory bound to it after the last launch, through
    /// which `out`/`inout` buffers are compared.
    pub final_binding: Vec<usize>,
}

impl Instance {
    /// The first launch (every instance has at least one).
    pub fn first_launch(&self) -> &super::pipeline::LaunchInstance {
        &self.launches[0]
    }
}

/// The outcome of comparing one output buffer with the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    pub passed: bool,
    /// The metric's value: max abs diff, max rel diff, max ulp distance, or
    /// for `exact` the number of differing elements. Infinite when the
    /// buffers differ in length or a NaN faces a number.
    pub error: f64,
    /// First element that fails the acceptance test (`None` when passed).
    pub first_mismatch: Option<usize>,
}
