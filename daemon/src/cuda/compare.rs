//! Output comparison on the device: a kernel per element type computes a
//! variant's output buffer against the original's under the spec's metric
//! (`spec::compare`'s rules: NaN, infinities, signed zeros, ulp distance),
//! where both buffers already are, and only the verdict comes back (the
//! metric's value, the count of failing elements and the first of them:
//! 24 bytes per output instead of the whole buffer).
//!
//! The kernels are LLVM IR written here and compiled with the variants'
//! own code generator when a GPU worker starts. `spec::compare` stays the
//! reference: the simulator and the unit tests use it, and the tests below
//! run these kernels on the simulator against it.

use super::driver::{DeviceBuffer, Kernel};
use super::CudaError;
use gevo_ir::{CodegenOptions, IrError, KernelIr};
use gevo_model::spec::{Acceptance, Comparison, ElemType, Metric};

/// Threads per block, and the most blocks, of a comparison launch (a
/// grid-stride loop covers the rest).
const THREADS: u32 = 256;
const MAX_BLOCKS: u32 = 1024;

/// What a comparison kernel leaves in its three words: the largest
/// element value of the metric (as f64 bits; non-negative doubles order as
/// their bits), the number of failing elements, the first failing index
/// (`u64::MAX`: none).
const WORDS: usize = 3;
const NO_FAILURE: u64 = u64::MAX;

/// The kernel comparing `elem` buffers.
pub fn kernel_name(elem: ElemType) -> String {
    format!("gevo_compare_{}", elem.name())
}

/// The metric's number as the kernels take it.
fn metric_code(metric: Metric) -> u64 {
    match metric {
        Metric::Exact => 0,
        Metric::MaxAbs => 1,
        Metric::MaxRel => 2,
        Metric::Ulp => 3,
    }
}

/// The module of comparison kernels, one per element type, each
/// `(ptr reference, ptr actual, i64 n, i32 metric, double tolerance, ptr words)`.
pub fn module_ir() -> String {
    let mut ir = String::from(HEADER);
    let mut annotations = Vec::new();
    for (i, elem) in ElemType::ALL.into_iter().enumerate() {
        ir.push_str(&kernel_ir(elem));
        annotations.push(format!(
            "!{i} = !{{ptr @{}, !\"kernel\", i32 1}}",
            kernel_name(elem)
        ));
    }
    let list: Vec<String> = (0..annotations.len()).map(|i| format!("!{i}")).collect();
    ir.push_str(&format!("!nvvm.annotations = !{{{}}}\n", list.join(", ")));
    for a in annotations {
        ir.push_str(&a);
        ir.push('\n');
    }
    ir
}

const HEADER: &str = r#"target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
declare double @llvm.fabs.f64(double)
declare double @llvm.maxnum.f64(double, double)

"#;

/// `spec::compare`'s floor of max_rel's denominator (1e-30), and +inf, as
/// LLVM writes doubles exactly.
const REL_TINY: &str = "0x39B4484BFEEBC2A0";
const INF: &str = "0x7FF0000000000000";

fn kernel_ir(elem: ElemType) -> String {
    let bits = elem.size() * 8;
    let int = format!("i{bits}");
    let value = match elem {
        ElemType::F32 | ElemType::F64 => float_element(elem, &int),
        _ => int_element(elem, &int),
    };
    format!(
        r#"define void @{name}(ptr %ref, ptr %act, i64 %n, i32 %metric, double %tol, ptr %words) {{
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %nctaid = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %tid64 = zext i32 %tid to i64
  %ntid64 = zext i32 %ntid to i64
  %ctaid64 = zext i32 %ctaid to i64
  %nctaid64 = zext i32 %nctaid to i64
  %blockstart = mul i64 %ctaid64, %ntid64
  %start = add i64 %blockstart, %tid64
  %stride = mul i64 %ntid64, %nctaid64
  %isexact = icmp eq i32 %metric, 0
  %isrel = icmp eq i32 %metric, 2
  %isabs = icmp eq i32 %metric, 1
  br label %head

head:
  %i = phi i64 [ %start, %entry ], [ %next, %body ]
  %max = phi double [ 0.0, %entry ], [ %max2, %body ]
  %count = phi i64 [ 0, %entry ], [ %count2, %body ]
  %first = phi i64 [ -1, %entry ], [ %first2, %body ]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %body, label %done

body:
  %rp = getelementptr {int}, ptr %ref, i64 %i
  %ap = getelementptr {int}, ptr %act, i64 %i
  %rb = load {int}, ptr %rp
  %ab = load {int}, ptr %ap
{value}  %bigger = fcmp ogt double %e, %max
  %max2 = select i1 %bigger, double %e, double %max
  %failcount = zext i1 %fail to i64
  %count2 = add i64 %count, %failcount
  %nofirst = icmp eq i64 %first, -1
  %isfirst = and i1 %fail, %nofirst
  %first2 = select i1 %isfirst, i64 %i, i64 %first
  %next = add i64 %i, %stride
  br label %head

done:
  %anymax = fcmp ogt double %max, 0.0
  br i1 %anymax, label %putmax, label %aftermax

putmax:
  %maxbits = bitcast double %max to i64
  %w0 = atomicrmw umax ptr %words, i64 %maxbits monotonic
  br label %aftermax

aftermax:
  %anyfail = icmp ne i64 %count, 0
  br i1 %anyfail, label %putfail, label %end

putfail:
  %w1p = getelementptr i64, ptr %words, i64 1
  %w1 = atomicrmw add ptr %w1p, i64 %count monotonic
  %w2p = getelementptr i64, ptr %words, i64 2
  %w2 = atomicrmw umin ptr %w2p, i64 %first monotonic
  br label %end

end:
  ret void
}}

"#,
        name = kernel_name(elem),
    )
}

/// The element's metric value `%e` and whether it fails, `%fail`, for
/// floats: compared as doubles (f32 widens exactly), NaN against NaN
/// equal, NaN against a number failing (an infinite metric value), ulp as
/// the distance on the line of bit patterns where -0 and +0 are both 0.
fn float_element(elem: ElemType, int: &str) -> String {
    let (to_double, magnitude_mask) = match elem {
        ElemType::F32 => (
            "  %rf = bitcast i32 %rb to float\n  %x = fpext float %rf to double\n  %af = bitcast i32 %ab to float\n  %y = fpext float %af to double\n",
            "2147483647",
        ),
        _ => (
            "  %x = bitcast i64 %rb to double\n  %y = bitcast i64 %ab to double\n",
            "9223372036854775807",
        ),
    };
    let sign_shift = elem.size() * 8 - 1;
    let widen_magnitudes = match elem {
        ElemType::F32 => "  %rm = zext i32 %rmag to i64\n  %am = zext i32 %amag to i64\n",
        _ => "  %rm = add i64 %rmag, 0\n  %am = add i64 %amag, 0\n",
    };
    format!(
        r#"{to_double}  %xnan = fcmp uno double %x, 0.0
  %ynan = fcmp uno double %y, 0.0
  %bothnan = and i1 %xnan, %ynan
  %anynan = or i1 %xnan, %ynan
  %onenan = xor i1 %xnan, %ynan
  %sameb = icmp eq {int} %rb, %ab
  %exactsame = or i1 %sameb, %bothnan
  %eexact = select i1 %exactsame, double 0.0, double 1.0
  %eq = fcmp oeq double %x, %y
  %diff = fsub double %x, %y
  %adiff = call double @llvm.fabs.f64(double %diff)
  %eabs = select i1 %eq, double 0.0, double %adiff
  %ax = call double @llvm.fabs.f64(double %x)
  %ay = call double @llvm.fabs.f64(double %y)
  %den = call double @llvm.maxnum.f64(double %ax, double {REL_TINY})
  %rel = fdiv double %adiff, %den
  %xinf = fcmp oeq double %ax, {INF}
  %yinf = fcmp oeq double %ay, {INF}
  %anyinf = or i1 %xinf, %yinf
  %relinf = select i1 %anyinf, double {INF}, double %rel
  %erel = select i1 %eq, double 0.0, double %relinf
  %rmag = and {int} %rb, {magnitude_mask}
  %amag = and {int} %ab, {magnitude_mask}
  %rsignb = lshr {int} %rb, {sign_shift}
  %asignb = lshr {int} %ab, {sign_shift}
  %rsign = trunc {int} %rsignb to i1
  %asign = trunc {int} %asignb to i1
  %rnonzero = icmp ne {int} %rmag, 0
  %anonzero = icmp ne {int} %amag, 0
  %rneg = and i1 %rsign, %rnonzero
  %aneg = and i1 %asign, %anonzero
{widen_magnitudes}  %sameside = icmp eq i1 %rneg, %aneg
  %rmbig = icmp uge i64 %rm, %am
  %dra = sub i64 %rm, %am
  %dar = sub i64 %am, %rm
  %dsame = select i1 %rmbig, i64 %dra, i64 %dar
  %dsum = add i64 %rm, %am
  %dulp = select i1 %sameside, i64 %dsame, i64 %dsum
  %eulp = uitofp i64 %dulp to double
  %erelulp = select i1 %isrel, double %erel, double %eulp
  %enum = select i1 %isabs, double %eabs, double %erelulp
  %nanval = select i1 %bothnan, double 0.0, double {INF}
  %enonexact = select i1 %anynan, double %nanval, double %enum
  %e = select i1 %isexact, double %eexact, double %enonexact
  %overtol = fcmp ogt double %enonexact, %tol
  %failnonexact = or i1 %onenan, %overtol
  %failexact = fcmp une double %eexact, 0.0
  %fail = select i1 %isexact, i1 %failexact, i1 %failnonexact
"#
    )
}

/// The same for integers, widened to 64 bits: the distance as an unsigned
/// 64-bit magnitude (exact even between i64's extremes), max_abs and ulp
/// both that distance, max_rel over the reference's magnitude.
fn int_element(elem: ElemType, int: &str) -> String {
    let signed = matches!(
        elem,
        ElemType::I8 | ElemType::I16 | ElemType::I32 | ElemType::I64
    );
    let (widen, ge) = if signed {
        ("sext", "sge")
    } else {
        ("zext", "uge")
    };
    let x = if int == "i64" {
        "  %x = add i64 %rb, 0\n  %y = add i64 %ab, 0\n".to_string()
    } else {
        format!("  %x = {widen} {int} %rb to i64\n  %y = {widen} {int} %ab to i64\n")
    };
    let magnitude = if signed {
        "  %xneg = icmp slt i64 %x, 0\n  %xflip = sub i64 0, %x\n  %xmag = select i1 %xneg, i64 %xflip, i64 %x\n"
    } else {
        "  %xmag = add i64 %x, 0\n"
    };
    format!(
        r#"{x}  %same = icmp eq i64 %x, %y
  %xbig = icmp {ge} i64 %x, %y
  %dxy = sub i64 %x, %y
  %dyx = sub i64 %y, %x
  %d = select i1 %xbig, i64 %dxy, i64 %dyx
  %df = uitofp i64 %d to double
{magnitude}  %xmagf = uitofp i64 %xmag to double
  %den = call double @llvm.maxnum.f64(double %xmagf, double {REL_TINY})
  %rel = fdiv double %df, %den
  %eexact = select i1 %same, double 0.0, double 1.0
  %enum = select i1 %isrel, double %rel, double %df
  %e = select i1 %isexact, double %eexact, double %enum
  %overtol = fcmp ogt double %enum, %tol
  %differ = xor i1 %same, true
  %fail = select i1 %isexact, i1 %differ, i1 %overtol
"#
    )
}

/// The comparison a kernel's three words say, as `spec::compare` says it.
pub fn comparison_from(metric: Metric, words: [u64; WORDS]) -> Comparison {
    let [max_bits, failing, first] = words;
    Comparison {
        passed: failing == 0,
        error: match metric {
            Metric::Exact => failing as f64,
            _ => f64::from_bits(max_bits),
        },
        first_mismatch: (first != NO_FAILURE).then_some(first as usize),
    }
}

/// The comparison kernels loaded in the current context, and the words
/// they write.
pub struct DeviceComparison {
    kernels: Kernel,
    words: DeviceBuffer,
    capacity: usize,
}

/// One output buffer to compare: its element type, the original's result
/// and the variant's, both on the device.
pub struct Pair<'a> {
    pub elem: ElemType,
    pub reference: &'a DeviceBuffer,
    pub actual: &'a DeviceBuffer,
}

/// The comparison kernels' PTX for `codegen`'s arch (made where the
/// variants' PTX is, with LLVM; loaded by [`DeviceComparison::load`]).
pub fn module_ptx(codegen: &CodegenOptions) -> Result<String, IrError> {
    let ir = KernelIr::parse_kernels("comparison kernels", module_ir().as_bytes(), &names())?;
    Ok(ir.compile(&ir.empty_patch(), codegen)?.ptx)
}

fn names() -> Vec<String> {
    ElemType::ALL.into_iter().map(kernel_name).collect()
}

impl DeviceComparison {
    /// Loads the comparison kernels ([`module_ptx`]) into the current
    /// context; `outputs`: the most buffers one call compares.
    pub fn load(ptx: &str, outputs: usize) -> Result<Self, CudaError> {
        let kernels = Kernel::load(ptx, &names())?;
        let capacity = outputs.max(1);
        let words = DeviceBuffer::new(capacity * WORDS * 8)?;
        Ok(DeviceComparison {
            kernels,
            words,
            capacity,
        })
    }

    /// Compares each pair under `acceptance` with one upload and one
    /// download of the words; buffers of different lengths are not
    /// compared here (`spec::compare` says why they fail).
    pub fn compare(
        &self,
        acceptance: &Acceptance,
        pairs: &[Pair],
    ) -> Result<Vec<Comparison>, CudaError> {
        assert!(pairs.len() <= self.capacity, "more outputs than loaded for");
        let init: Vec<u8> = [0u64, 0, NO_FAILURE]
            .repeat(pairs.len())
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        self.words.upload(&init)?;
        for (i, pair) in pairs.iter().enumerate() {
            assert_eq!(
                pair.reference.len, pair.actual.len,
                "compare equal lengths only"
            );
            let n = (pair.reference.len / pair.elem.size()) as u64;
            if n == 0 {
                continue;
            }
            let blocks = n.div_ceil(u64::from(THREADS)).min(u64::from(MAX_BLOCKS)) as u32;
            let kernel = ElemType::ALL
                .iter()
                .position(|e| *e == pair.elem)
                .expect("every element type has its kernel");
            let mut args = [
                pair.reference.ptr,
                pair.actual.ptr,
                n,
                metric_code(acceptance.metric),
                acceptance.tolerance.to_bits(),
                self.words.ptr + (i * WORDS * 8) as u64,
            ];
            self.kernels
                .launch(kernel, [blocks, 1, 1], [THREADS, 1, 1], 0, &mut args)?;
        }
        let mut bytes = vec![0u8; pairs.len() * WORDS * 8];
        self.words.download(&mut bytes)?;
        Ok(bytes
            .chunks_exact(WORDS * 8)
            .map(|c| {
                let word = |k: usize| u64::from_le_bytes(c[8 * k..8 * k + 8].try_into().unwrap());
                comparison_from(acceptance.metric, [word(0), word(1), word(2)])
            })
            .collect())
    }
}

pub mod cases;
#[cfg(test)]
mod tests;
