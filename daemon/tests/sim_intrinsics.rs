//! The simulator's intrinsics and libdevice functions, table-driven: each
//! row calls one function in a one-thread kernel whose arguments are loaded
//! from memory at run time (so nothing is folded before the simulator sees
//! it) and compares the stored result bit for bit.

use gevod::ir::KernelIr;
use gevod::sim::{self, pointer, GlobalMemory, LaunchDims, Limits};

/// A call argument: a value loaded from memory, or an immediate (`immarg`
/// flags must be constants).
enum Arg {
    Value(&'static str, u64),
    Imm(&'static str, &'static str),
}

fn f(x: f32) -> Arg {
    Arg::Value("float", u64::from(x.to_bits()))
}
fn d(x: f64) -> Arg {
    Arg::Value("double", x.to_bits())
}
fn i(x: i32) -> Arg {
    Arg::Value("i32", u64::from(x as u32))
}
fn l(x: i64) -> Arg {
    Arg::Value("i64", x as u64)
}
fn h(x: i16) -> Arg {
    Arg::Value("i16", u64::from(x as u16))
}
fn b(x: i8) -> Arg {
    Arg::Value("i8", u64::from(x as u8))
}
fn flag(value: &'static str) -> Arg {
    Arg::Imm("i1", value)
}
fn f2(x: [f32; 2]) -> Arg {
    Arg::Value("<2 x float>", pack_f32(x))
}
fn i2(x: [i32; 2]) -> Arg {
    Arg::Value("<2 x i32>", pack_i32(x))
}

fn ef(x: f32) -> u64 {
    u64::from(x.to_bits())
}
fn ed(x: f64) -> u64 {
    x.to_bits()
}
fn ei(x: i32) -> u64 {
    u64::from(x as u32)
}
fn el(x: i64) -> u64 {
    x as u64
}
fn pack_f32(x: [f32; 2]) -> u64 {
    u64::from(x[0].to_bits()) | (u64::from(x[1].to_bits()) << 32)
}
fn pack_i32(x: [i32; 2]) -> u64 {
    u64::from(x[0] as u32) | (u64::from(x[1] as u32) << 32)
}

const NAN: f32 = f32::NAN; // 0x7fc00000, the canonical quiet NaN

struct Case {
    name: &'static str,
    ret: &'static str,
    args: Vec<Arg>,
    expect: u64,
}

fn case(name: &'static str, ret: &'static str, args: Vec<Arg>, expect: u64) -> Case {
    Case {
        name,
        ret,
        args,
        expect,
    }
}

fn bytes_of_type(ty: &str) -> usize {
    match ty {
        "i8" => 1,
        "i16" => 2,
        "float" | "i32" => 4,
        _ => 8,
    }
}

fn kernel(c: &Case) -> String {
    let mut body = String::new();
    let mut params = Vec::new();
    let mut types = Vec::new();
    for (k, arg) in c.args.iter().enumerate() {
        match arg {
            Arg::Value(ty, _) => {
                body += &format!(
                    "  %p{k} = getelementptr i8, ptr %in, i64 {}\n  %a{k} = load {ty}, ptr %p{k}, align 8\n",
                    8 * k
                );
                params.push(format!("{ty} %a{k}"));
                types.push(*ty);
            }
            Arg::Imm(ty, literal) => {
                params.push(format!("{ty} {literal}"));
                types.push(*ty);
            }
        }
    }
    format!(
        r#"target triple = "nvptx64-nvidia-cuda"
define void @k(ptr %in, ptr %out) {{
{body}  %r = call {ret} @{name}({params})
  store {ret} %r, ptr %out, align 8
  ret void
}}
declare {ret} @{name}({types})
!nvvm.annotations = !{{!0}}
!0 = !{{ptr @k, !"kernel", i32 1}}
"#,
        ret = c.ret,
        name = c.name,
        params = params.join(", "),
        types = types.join(", "),
    )
}

/// Runs the case; its result's raw bits.
fn run(c: &Case) -> Result<u64, String> {
    let text = kernel(c);
    let ir = KernelIr::parse("case.ll", text.as_bytes(), None).map_err(|e| e.to_string())?;
    let program = ir.lower(&ir.empty_patch()).map_err(|e| e.to_string())?;
    let mut input = Vec::new();
    for arg in &c.args {
        let bits = match arg {
            Arg::Value(_, bits) => *bits,
            Arg::Imm(..) => 0,
        };
        input.extend_from_slice(&bits.to_le_bytes());
    }
    input.resize(input.len().max(8), 0);
    let memory = GlobalMemory::new(&[&input, &[0u8; 8]]);
    let dims = LaunchDims {
        grid: [1, 1, 1],
        block: [1, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let args = [
        pointer::make(pointer::GLOBAL, 0, 0),
        pointer::make(pointer::GLOBAL, 1, 0),
    ];
    let limits = Limits {
        block_step_budget: 1000,
    };
    sim::run(&program, &dims, &args, &memory, limits, 1).map_err(|v| v.to_string())?;
    let out = memory.contents(1);
    let n = bytes_of_type(c.ret);
    let mut bits = [0u8; 8];
    bits[..n].copy_from_slice(&out[..n]);
    Ok(u64::from_le_bytes(bits))
}

fn check(cases: &[Case]) {
    let mut failures = Vec::new();
    for c in cases {
        let n = bytes_of_type(c.ret);
        let expect = if n == 8 {
            c.expect
        } else {
            c.expect & ((1u64 << (8 * n)) - 1)
        };
        match run(c) {
            Ok(got) if got == expect => {}
            Ok(got) => failures.push(format!("{}: got {got:#x}, expected {expect:#x}", c.name)),
            Err(e) => failures.push(format!("{}: {e}", c.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// nvvm float intrinsics: every rounding, ftz and approx variant maps to
/// the round-to-nearest, non-flushing, exact operation.
#[test]
fn nvvm_float_math() {
    let third = 1.0f32 / 3.0;
    let cases = vec![
        case("llvm.nvvm.fabs.f", "float", vec![f(-2.5)], ef(2.5)),
        case("llvm.nvvm.fabs.ftz.f", "float", vec![f(-0.0)], ef(0.0)),
        case("llvm.nvvm.fabs.d", "double", vec![d(-3.25)], ed(3.25)),
        case("llvm.nvvm.fmin.f", "float", vec![f(1.0), f(-2.0)], ef(-2.0)),
        case(
            "llvm.nvvm.fmin.ftz.f",
            "float",
            vec![f(NAN), f(4.0)],
            ef(4.0),
        ),
        case("llvm.nvvm.fmin.d", "double", vec![d(1.0), d(2.0)], ed(1.0)),
        case("llvm.nvvm.fmax.f", "float", vec![f(1.0), f(NAN)], ef(1.0)),
        case(
            "llvm.nvvm.fmax.ftz.f",
            "float",
            vec![f(1.0), f(-2.0)],
            ef(1.0),
        ),
        case("llvm.nvvm.fmax.d", "double", vec![d(1.0), d(2.0)], ed(2.0)),
        case(
            "llvm.nvvm.fmin.nan.f",
            "float",
            vec![f(1.0), f(NAN)],
            ef(NAN),
        ),
        case(
            "llvm.nvvm.fmin.ftz.nan.f",
            "float",
            vec![f(3.0), f(2.0)],
            ef(2.0),
        ),
        case(
            "llvm.nvvm.fmax.nan.f",
            "float",
            vec![f(NAN), f(1.0)],
            ef(NAN),
        ),
        case(
            "llvm.nvvm.fmax.ftz.nan.f",
            "float",
            vec![f(3.0), f(2.0)],
            ef(3.0),
        ),
        case("llvm.nvvm.sqrt.f", "float", vec![f(2.0)], ef(2f32.sqrt())),
        case(
            "llvm.nvvm.sqrt.rn.f",
            "float",
            vec![f(2.0)],
            ef(2f32.sqrt()),
        ),
        case(
            "llvm.nvvm.sqrt.rz.f",
            "float",
            vec![f(3.0)],
            ef(3f32.sqrt()),
        ),
        case(
            "llvm.nvvm.sqrt.rm.ftz.f",
            "float",
            vec![f(5.0)],
            ef(5f32.sqrt()),
        ),
        case(
            "llvm.nvvm.sqrt.rp.f",
            "float",
            vec![f(7.0)],
            ef(7f32.sqrt()),
        ),
        case("llvm.nvvm.sqrt.approx.f", "float", vec![f(9.0)], ef(3.0)),
        case(
            "llvm.nvvm.sqrt.approx.ftz.f",
            "float",
            vec![f(10.0)],
            ef(10f32.sqrt()),
        ),
        case(
            "llvm.nvvm.sqrt.rn.d",
            "double",
            vec![d(2.0)],
            ed(2f64.sqrt()),
        ),
        case(
            "llvm.nvvm.sqrt.rz.d",
            "double",
            vec![d(3.0)],
            ed(3f64.sqrt()),
        ),
        case("llvm.nvvm.rcp.rn.f", "float", vec![f(3.0)], ef(third)),
        case("llvm.nvvm.rcp.rz.ftz.f", "float", vec![f(3.0)], ef(third)),
        case("llvm.nvvm.rcp.rm.d", "double", vec![d(4.0)], ed(0.25)),
        case(
            "llvm.nvvm.rcp.approx.ftz.d",
            "double",
            vec![d(3.0)],
            ed(1.0 / 3.0),
        ),
        case(
            "llvm.nvvm.div.rn.f",
            "float",
            vec![f(1.0), f(3.0)],
            ef(third),
        ),
        case(
            "llvm.nvvm.div.rz.ftz.f",
            "float",
            vec![f(2.0), f(3.0)],
            ef(2.0 / 3.0),
        ),
        case(
            "llvm.nvvm.div.approx.f",
            "float",
            vec![f(1.0), f(8.0)],
            ef(0.125),
        ),
        case(
            "llvm.nvvm.div.approx.ftz.f",
            "float",
            vec![f(6.0), f(3.0)],
            ef(2.0),
        ),
        case(
            "llvm.nvvm.div.full",
            "float",
            vec![f(1.0), f(3.0)],
            ef(third),
        ),
        case(
            "llvm.nvvm.div.full.ftz",
            "float",
            vec![f(5.0), f(2.0)],
            ef(2.5),
        ),
        case(
            "llvm.nvvm.div.rn.d",
            "double",
            vec![d(1.0), d(3.0)],
            ed(1.0 / 3.0),
        ),
        case(
            "llvm.nvvm.div.rp.d",
            "double",
            vec![d(1.0), d(7.0)],
            ed(1.0 / 7.0),
        ),
        case(
            "llvm.nvvm.add.rn.f",
            "float",
            vec![f(1.5), f(2.25)],
            ef(3.75),
        ),
        case(
            "llvm.nvvm.add.rz.ftz.f",
            "float",
            vec![f(1.0), f(1e-8)],
            ef(1.0),
        ),
        case(
            "llvm.nvvm.add.rm.d",
            "double",
            vec![d(0.1), d(0.2)],
            ed(0.1 + 0.2),
        ),
        case(
            "llvm.nvvm.mul.rn.f",
            "float",
            vec![f(1.5), f(-4.0)],
            ef(-6.0),
        ),
        case(
            "llvm.nvvm.mul.rp.d",
            "double",
            vec![d(0.1), d(3.0)],
            ed(0.1 * 3.0),
        ),
        case(
            "llvm.nvvm.fma.rn.f",
            "float",
            vec![f(2.0), f(3.0), f(4.0)],
            ef(10.0),
        ),
        case(
            "llvm.nvvm.fma.rz.ftz.f",
            "float",
            vec![f(0.1), f(10.0), f(-1.0)],
            ef(0.1f32.mul_add(10.0, -1.0)),
        ),
        case(
            "llvm.nvvm.fma.rn.d",
            "double",
            vec![d(0.1), d(10.0), d(-1.0)],
            ed(0.1f64.mul_add(10.0, -1.0)),
        ),
        case(
            "llvm.nvvm.fma.rm.d",
            "double",
            vec![d(2.0), d(3.0), d(1.0)],
            ed(7.0),
        ),
        case(
            "llvm.nvvm.sin.approx.f",
            "float",
            vec![f(1.0)],
            ef(1f32.sin()),
        ),
        case(
            "llvm.nvvm.sin.approx.ftz.f",
            "float",
            vec![f(2.0)],
            ef(2f32.sin()),
        ),
        case(
            "llvm.nvvm.cos.approx.f",
            "float",
            vec![f(1.0)],
            ef(1f32.cos()),
        ),
        case(
            "llvm.nvvm.cos.approx.ftz.f",
            "float",
            vec![f(2.0)],
            ef(2f32.cos()),
        ),
        case("llvm.nvvm.ex2.approx.f", "float", vec![f(3.0)], ef(8.0)),
        case(
            "llvm.nvvm.ex2.approx.ftz.f",
            "float",
            vec![f(0.5)],
            ef(0.5f32.exp2()),
        ),
        case("llvm.nvvm.ex2.approx.d", "double", vec![d(-2.0)], ed(0.25)),
        case("llvm.nvvm.lg2.approx.f", "float", vec![f(8.0)], ef(3.0)),
        case(
            "llvm.nvvm.lg2.approx.ftz.f",
            "float",
            vec![f(10.0)],
            ef(10f32.log2()),
        ),
        case(
            "llvm.nvvm.lg2.approx.d",
            "double",
            vec![d(10.0)],
            ed(10f64.log2()),
        ),
        case("llvm.nvvm.rsqrt.approx.f", "float", vec![f(4.0)], ef(0.5)),
        case(
            "llvm.nvvm.rsqrt.approx.ftz.f",
            "float",
            vec![f(2.0)],
            ef(1.0 / 2f32.sqrt()),
        ),
        case(
            "llvm.nvvm.rsqrt.approx.d",
            "double",
            vec![d(2.0)],
            ed(1.0 / 2f64.sqrt()),
        ),
        case("llvm.nvvm.floor.f", "float", vec![f(-1.5)], ef(-2.0)),
        case("llvm.nvvm.floor.ftz.f", "float", vec![f(1.5)], ef(1.0)),
        case("llvm.nvvm.floor.d", "double", vec![d(-0.5)], ed(-1.0)),
        case("llvm.nvvm.ceil.f", "float", vec![f(-1.5)], ef(-1.0)),
        case("llvm.nvvm.ceil.ftz.f", "float", vec![f(1.25)], ef(2.0)),
        case("llvm.nvvm.ceil.d", "double", vec![d(0.5)], ed(1.0)),
        case("llvm.nvvm.trunc.f", "float", vec![f(-1.75)], ef(-1.0)),
        case("llvm.nvvm.trunc.ftz.f", "float", vec![f(1.75)], ef(1.0)),
        case("llvm.nvvm.trunc.d", "double", vec![d(-2.5)], ed(-2.0)),
        // cvt.rni: ties to even.
        case("llvm.nvvm.round.f", "float", vec![f(2.5)], ef(2.0)),
        case("llvm.nvvm.round.ftz.f", "float", vec![f(3.5)], ef(4.0)),
        case("llvm.nvvm.round.d", "double", vec![d(-2.5)], ed(-2.0)),
        case("llvm.nvvm.saturate.f", "float", vec![f(1.5)], ef(1.0)),
        case("llvm.nvvm.saturate.f", "float", vec![f(NAN)], ef(0.0)),
        case("llvm.nvvm.saturate.ftz.f", "float", vec![f(-0.5)], ef(0.0)),
        case("llvm.nvvm.saturate.ftz.f", "float", vec![f(0.25)], ef(0.25)),
        case("llvm.nvvm.saturate.d", "double", vec![d(2.0)], ed(1.0)),
    ];
    check(&cases);
}

/// nvvm conversions: the rounding modifier picks the integer of a
/// float-to-integer conversion, which saturates (NaN gives 0).
#[test]
fn nvvm_conversions_and_bits() {
    let cases = vec![
        case("llvm.nvvm.d2i.rn", "i32", vec![d(2.5)], ei(2)),
        case("llvm.nvvm.d2i.rz", "i32", vec![d(-2.7)], ei(-2)),
        case("llvm.nvvm.d2i.rm", "i32", vec![d(-2.2)], ei(-3)),
        case("llvm.nvvm.d2i.rp", "i32", vec![d(2.2)], ei(3)),
        case("llvm.nvvm.d2ui.rn", "i32", vec![d(3.5)], ei(4)),
        case("llvm.nvvm.d2ui.rz", "i32", vec![d(-1.0)], ei(0)),
        case("llvm.nvvm.d2ui.rm", "i32", vec![d(5.9)], ei(5)),
        case("llvm.nvvm.d2ui.rp", "i32", vec![d(5.1)], ei(6)),
        case("llvm.nvvm.f2i.rn", "i32", vec![f(1e10)], ei(i32::MAX)),
        case("llvm.nvvm.f2i.rz", "i32", vec![f(NAN)], ei(0)),
        case("llvm.nvvm.f2i.rm.ftz", "i32", vec![f(-0.5)], ei(-1)),
        case("llvm.nvvm.f2i.rp", "i32", vec![f(-0.5)], ei(0)),
        case("llvm.nvvm.f2ui.rn", "i32", vec![f(-3.0)], ei(0)),
        case("llvm.nvvm.f2ui.rp.ftz", "i32", vec![f(0.1)], ei(1)),
        case("llvm.nvvm.f2ll.rz", "i64", vec![f(3.9)], el(3)),
        case("llvm.nvvm.f2ll.rp.ftz", "i64", vec![f(3.1)], el(4)),
        case("llvm.nvvm.f2ull.rm", "i64", vec![f(5.9)], el(5)),
        case("llvm.nvvm.f2ull.rn", "i64", vec![f(-5.0)], el(0)),
        case("llvm.nvvm.d2ll.rn", "i64", vec![d(-1e19)], el(i64::MIN)),
        case("llvm.nvvm.d2ll.rm", "i64", vec![d(-0.5)], el(-1)),
        case("llvm.nvvm.d2ull.rp", "i64", vec![d(5.1)], el(6)),
        case("llvm.nvvm.d2ull.rz", "i64", vec![d(1e30)], el(-1)),
        case("llvm.nvvm.i2d.rn", "double", vec![i(-7)], ed(-7.0)),
        case(
            "llvm.nvvm.i2d.rz",
            "double",
            vec![i(i32::MIN)],
            ed(-2147483648.0),
        ),
        case("llvm.nvvm.ui2d.rn", "double", vec![i(-1)], ed(4294967295.0)),
        case(
            "llvm.nvvm.i2f.rn",
            "float",
            vec![i(16777217)],
            ef(16777216.0),
        ),
        case("llvm.nvvm.i2f.rz", "float", vec![i(-3)], ef(-3.0)),
        case("llvm.nvvm.ui2f.rn", "float", vec![i(-1)], ef(4294967296.0)),
        case("llvm.nvvm.ll2d.rn", "double", vec![l(-5)], ed(-5.0)),
        case(
            "llvm.nvvm.ull2d.rn",
            "double",
            vec![l(-1)],
            ed(u64::MAX as f64),
        ),
        case(
            "llvm.nvvm.ll2f.rm",
            "float",
            vec![l(1 << 40)],
            ef((1u64 << 40) as f32),
        ),
        case(
            "llvm.nvvm.ull2f.rz",
            "float",
            vec![l(-1)],
            ef(u64::MAX as f32),
        ),
        case(
            "llvm.nvvm.d2f.rn",
            "float",
            vec![d(1.0 / 3.0)],
            ef((1.0f64 / 3.0) as f32),
        ),
        case("llvm.nvvm.d2f.rz.ftz", "float", vec![d(0.5)], ef(0.5)),
        case(
            "llvm.nvvm.lohi.i2d",
            "double",
            vec![i(0), i(0x3ff0_0000)],
            ed(1.0),
        ),
        case(
            "llvm.nvvm.d2i.lo",
            "i32",
            vec![d(f64::from_bits(0x1234_5678_9abc_def0))],
            0x9abc_def0,
        ),
        case("llvm.nvvm.d2i.hi", "i32", vec![d(-2.0)], 0xc000_0000),
        case("llvm.nvvm.bitcast.f2i", "i32", vec![f(1.0)], 0x3f80_0000),
        case(
            "llvm.nvvm.bitcast.i2f",
            "float",
            vec![i(0x4000_0000)],
            ef(2.0),
        ),
        case(
            "llvm.nvvm.bitcast.ll2d",
            "double",
            vec![l(0x3ff8_0000_0000_0000)],
            ed(1.5),
        ),
        case(
            "llvm.nvvm.bitcast.d2ll",
            "i64",
            vec![d(-1.0)],
            0xbff0_0000_0000_0000,
        ),
    ];
    check(&cases);
}

/// nvvm integer intrinsics (LLVM 19 rewrites clz, popc, brev, abs, min and
/// max into generic intrinsics on load; those run through the same table).
#[test]
fn nvvm_integer_ops() {
    let cases = vec![
        case("llvm.nvvm.clz.i", "i32", vec![i(1)], 31),
        case("llvm.nvvm.clz.i", "i32", vec![i(0)], 32),
        case("llvm.nvvm.clz.ll", "i32", vec![l(1)], 63),
        case("llvm.nvvm.popc.i", "i32", vec![i(0xf0f0)], 8),
        case("llvm.nvvm.popc.ll", "i32", vec![l(-1)], 64),
        case("llvm.nvvm.brev32", "i32", vec![i(1)], 0x8000_0000),
        case("llvm.nvvm.brev64", "i64", vec![l(6)], 0x6000_0000_0000_0000),
        case(
            "llvm.nvvm.mulhi.i",
            "i32",
            vec![i(-2), i(0x4000_0000)],
            ei(-1),
        ),
        case("llvm.nvvm.mulhi.ui", "i32", vec![i(-1), i(2)], 1),
        case("llvm.nvvm.mulhi.ll", "i64", vec![l(-1), l(5)], el(-1)),
        case("llvm.nvvm.mulhi.ull", "i64", vec![l(-1), l(3)], 2),
        case("llvm.nvvm.mul24.i", "i32", vec![i(-3), i(5)], ei(-15)),
        case("llvm.nvvm.mul24.i", "i32", vec![i(0x0100_0003), i(2)], 6),
        case(
            "llvm.nvvm.mul24.ui",
            "i32",
            vec![i(0xff_ffff), i(0xff_ffff)],
            (0xff_ffffu64 * 0xff_ffff) & 0xffff_ffff,
        ),
        case("llvm.nvvm.min.i", "i32", vec![i(-1), i(1)], ei(-1)),
        case("llvm.nvvm.min.ui", "i32", vec![i(-1), i(1)], 1),
        case("llvm.nvvm.min.ll", "i64", vec![l(-1), l(1)], el(-1)),
        case("llvm.nvvm.min.ull", "i64", vec![l(-1), l(1)], 1),
        case("llvm.nvvm.max.i", "i32", vec![i(-1), i(1)], 1),
        case("llvm.nvvm.max.ui", "i32", vec![i(-1), i(1)], ei(-1)),
        case("llvm.nvvm.max.ll", "i64", vec![l(-1), l(1)], 1),
        case("llvm.nvvm.max.ull", "i64", vec![l(-1), l(1)], el(-1)),
        case("llvm.nvvm.abs.i", "i32", vec![i(-5)], 5),
        case("llvm.nvvm.abs.ll", "i64", vec![l(i64::MIN)], el(i64::MIN)),
        case("llvm.nvvm.sad.i", "i32", vec![i(3), i(10), i(100)], 107),
        case("llvm.nvvm.sad.i", "i32", vec![i(-3), i(4), i(0)], 7),
        case("llvm.nvvm.sad.ui", "i32", vec![i(3), i(10), i(1)], 8),
        case(
            "llvm.nvvm.prmt",
            "i32",
            vec![i(0x3322_1100), i(0x7766_5544), i(0x5410)],
            0x5544_1100,
        ),
        case(
            "llvm.nvvm.prmt",
            "i32",
            vec![i(0x8022_1100_u32 as i32), i(0), i(0x321b)],
            0x8022_11ff,
        ),
        case(
            "llvm.nvvm.rotate.b32",
            "i32",
            vec![i(0x8000_0001_u32 as i32), i(1)],
            3,
        ),
        case(
            "llvm.nvvm.rotate.b32",
            "i32",
            vec![i(0x1234_5678), i(32)],
            0x1234_5678,
        ),
        case(
            "llvm.nvvm.rotate.b64",
            "i64",
            vec![l(i64::MIN | 1), i(4)],
            0x18,
        ),
        case(
            "llvm.nvvm.rotate.right.b64",
            "i64",
            vec![l(1), i(1)],
            el(i64::MIN),
        ),
    ];
    check(&cases);
}

/// Plain LLVM intrinsics (type suffixes are dropped when matching).
#[test]
fn llvm_intrinsics() {
    let cases = vec![
        case("llvm.sin.f32", "float", vec![f(0.5)], ef(0.5f32.sin())),
        case("llvm.cos.f64", "double", vec![d(0.5)], ed(0.5f64.cos())),
        case("llvm.tan.f32", "float", vec![f(0.5)], ef(0.5f32.tan())),
        case("llvm.exp.f32", "float", vec![f(1.5)], ef(1.5f32.exp())),
        case("llvm.exp2.f64", "double", vec![d(-3.0)], ed(0.125)),
        case("llvm.exp10.f32", "float", vec![f(2.0)], ef(100.0)),
        case("llvm.log.f32", "float", vec![f(2.0)], ef(2f32.ln())),
        case("llvm.log2.f64", "double", vec![d(1024.0)], ed(10.0)),
        case(
            "llvm.log10.f32",
            "float",
            vec![f(1000.0)],
            ef(1000f32.log10()),
        ),
        case("llvm.pow.f32", "float", vec![f(2.0), f(10.0)], ef(1024.0)),
        case("llvm.powi.f32.i32", "float", vec![f(2.0), i(-2)], ef(0.25)),
        case(
            "llvm.powi.f64.i32",
            "double",
            vec![d(1.5), i(3)],
            ed(1.5f64.powi(3)),
        ),
        case("llvm.sqrt.f32", "float", vec![f(2.0)], ef(2f32.sqrt())),
        case("llvm.fabs.f64", "double", vec![d(-0.5)], ed(0.5)),
        case("llvm.floor.f32", "float", vec![f(-0.5)], ef(-1.0)),
        case("llvm.ceil.f64", "double", vec![d(-0.5)], ed(-0.0)),
        case("llvm.trunc.f32", "float", vec![f(2.9)], ef(2.0)),
        case("llvm.rint.f32", "float", vec![f(2.5)], ef(2.0)),
        case("llvm.nearbyint.f64", "double", vec![d(3.5)], ed(4.0)),
        case("llvm.round.f32", "float", vec![f(2.5)], ef(3.0)),
        case("llvm.roundeven.f64", "double", vec![d(2.5)], ed(2.0)),
        case(
            "llvm.copysign.f32",
            "float",
            vec![f(3.0), f(-0.0)],
            ef(-3.0),
        ),
        case("llvm.minnum.f32", "float", vec![f(NAN), f(1.0)], ef(1.0)),
        case("llvm.maxnum.f64", "double", vec![d(-1.0), d(2.0)], ed(2.0)),
        case("llvm.minimum.f32", "float", vec![f(-0.0), f(0.0)], ef(-0.0)),
        case("llvm.minimum.f32", "float", vec![f(NAN), f(1.0)], ef(NAN)),
        case("llvm.maximum.f32", "float", vec![f(-0.0), f(0.0)], ef(0.0)),
        case("llvm.maximum.f64", "double", vec![d(1.0), d(-1.0)], ed(1.0)),
        case(
            "llvm.fma.f32",
            "float",
            vec![f(2.0), f(3.0), f(1.0)],
            ef(7.0),
        ),
        case(
            "llvm.fmuladd.f64",
            "double",
            vec![d(0.1), d(0.2), d(0.3)],
            ed(0.1f64.mul_add(0.2, 0.3)),
        ),
        case("llvm.canonicalize.f32", "float", vec![f(1.5)], ef(1.5)),
        case("llvm.ctpop.i64", "i64", vec![l(0xff00_ff00)], 16),
        case("llvm.ctlz.i32", "i32", vec![i(0), flag("false")], 32),
        case("llvm.ctlz.i16", "i16", vec![h(1), flag("false")], 15),
        case("llvm.cttz.i32", "i32", vec![i(0x100), flag("true")], 8),
        case("llvm.cttz.i64", "i64", vec![l(0), flag("false")], 64),
        case("llvm.bswap.i32", "i32", vec![i(0x1122_3344)], 0x4433_2211),
        case("llvm.bswap.i16", "i16", vec![h(0x1122)], 0x2211),
        case("llvm.bitreverse.i8", "i8", vec![b(1)], 0x80),
        case("llvm.abs.i32", "i32", vec![i(-7), flag("false")], 7),
        case("llvm.smin.i64", "i64", vec![l(-2), l(3)], el(-2)),
        case("llvm.umax.i8", "i8", vec![b(-1), b(3)], 0xff),
        case(
            "llvm.fshl.i32",
            "i32",
            vec![i(0x1234_5678), i(0x9abc_def0_u32 as i32), i(8)],
            0x3456_789a,
        ),
        case(
            "llvm.fshr.i32",
            "i32",
            vec![i(0x1234_5678), i(0x9abc_def0_u32 as i32), i(8)],
            0x789a_bcde,
        ),
        case("llvm.fshl.i32", "i32", vec![i(7), i(9), i(0)], 7),
        case("llvm.fshr.i32", "i32", vec![i(7), i(9), i(32)], 9),
        case(
            "llvm.fshl.i8",
            "i8",
            vec![b(0x81_u8 as i8), b(0), b(11)],
            0x08,
        ),
        case("llvm.sadd.sat.i8", "i8", vec![b(100), b(100)], 127),
        case("llvm.uadd.sat.i32", "i32", vec![i(-2), i(5)], ei(-1)),
        case(
            "llvm.ssub.sat.i16",
            "i16",
            vec![h(-30000), h(10000)],
            0x8000,
        ),
        case("llvm.usub.sat.i32", "i32", vec![i(3), i(5)], 0),
        case("llvm.expect.i64", "i64", vec![l(7), l(1)], 7),
        // Vector forms run element by element.
        case(
            "llvm.fma.v2f32",
            "<2 x float>",
            vec![f2([1.0, 2.0]), f2([3.0, 4.0]), f2([0.5, -8.0])],
            pack_f32([3.5, 0.0]),
        ),
        case(
            "llvm.smax.v2i32",
            "<2 x i32>",
            vec![i2([-1, 5]), i2([2, -7])],
            pack_i32([2, 5]),
        ),
        case(
            "llvm.ctpop.v2i32",
            "<2 x i32>",
            vec![i2([7, -1])],
            pack_i32([3, 32]),
        ),
        case(
            "llvm.powi.v2f32.i32",
            "<2 x float>",
            vec![f2([2.0, 3.0]), i(2)],
            pack_f32([4.0, 9.0]),
        ),
    ];
    check(&cases);
}

/// libdevice functions computed natively.
#[test]
fn libdevice_functions() {
    let cases = vec![
        case("__nv_float2int_rn", "i32", vec![f(2.5)], 2),
        case("__nv_float2int_rd", "i32", vec![f(-2.5)], ei(-3)),
        case("__nv_double2ll_ru", "i64", vec![d(1.1)], 2),
        case("__nv_double2uint_rz", "i32", vec![d(7.9)], 7),
        case("__nv_ll2double_rn", "double", vec![l(-3)], ed(-3.0)),
        case(
            "__nv_double2float_rn",
            "float",
            vec![d(0.1)],
            ef(0.1f64 as f32),
        ),
        case("__nv_fdiv_rz", "float", vec![f(1.0), f(4.0)], ef(0.25)),
        case(
            "__nv_fmaf_rn",
            "float",
            vec![f(2.0), f(3.0), f(1.0)],
            ef(7.0),
        ),
        case("__nv_dsqrt_rn", "double", vec![d(2.0)], ed(2f64.sqrt())),
        case("__nv_frcp_rn", "float", vec![f(8.0)], ef(0.125)),
        case("__nv_expf", "float", vec![f(1.0)], ef(1f32.exp())),
        case("__nv_tanf", "float", vec![f(1.0)], ef(1f32.tan())),
        case(
            "__nv_atan2f",
            "float",
            vec![f(1.0), f(-1.0)],
            ef(1f32.atan2(-1.0)),
        ),
        case("__nv_hypot", "double", vec![d(3.0), d(4.0)], ed(5.0)),
        case("__nv_powif", "float", vec![f(3.0), i(3)], ef(27.0)),
        case("__nv_fmodf", "float", vec![f(7.5), f(2.0)], ef(1.5)),
        case("__nv_rintf", "float", vec![f(0.5)], ef(0.0)),
        case("__nv_saturatef", "float", vec![f(3.0)], ef(1.0)),
        case("__nv_cbrt", "double", vec![d(27.0)], ed(27f64.cbrt())),
        case("__nv_expm1f", "float", vec![f(1e-3)], ef(1e-3f32.exp_m1())),
        case("__nv_log1p", "double", vec![d(1e-3)], ed(1e-3f64.ln_1p())),
        case("__nv_popc", "i32", vec![i(0xff)], 8),
        case("__nv_clzll", "i32", vec![l(1 << 40)], 23),
        case("__nv_brev", "i32", vec![i(2)], 0x4000_0000),
        case("__nv_umulhi", "i32", vec![i(-1), i(-1)], 0xffff_fffe),
        case("__nv_mul64hi", "i64", vec![l(i64::MIN), l(2)], el(-1)),
        case("__nv_umul24", "i32", vec![i(0x0100_0002), i(3)], 6),
        case("__nv_llabs", "i64", vec![l(-9)], 9),
        case("__nv_umin", "i32", vec![i(-1), i(4)], 4),
        case("__nv_usad", "i32", vec![i(10), i(3), i(2)], 9),
        case(
            "__nv_byte_perm",
            "i32",
            vec![i(0x0403_0201), i(0), i(0x0123)],
            0x0102_0304,
        ),
        case("__nv_float_as_int", "i32", vec![f(-0.0)], 0x8000_0000),
        case(
            "__nv_longlong_as_double",
            "double",
            vec![l(0x4000_0000_0000_0000)],
            ed(2.0),
        ),
        case("__nv_double2hiint", "i32", vec![d(1.0)], 0x3ff0_0000),
        case(
            "__nv_hiloint2double",
            "double",
            vec![i(0x4008_0000), i(0)],
            ed(3.0),
        ),
    ];
    check(&cases);
}

/// A function the simulator does not know is an `unsupported` verdict
/// naming it, when reached.
#[test]
fn unknown_functions_are_named() {
    let c = case("llvm.nvvm.fns", "i32", vec![i(0xff), i(0), i(1)], 0);
    assert_eq!(
        run(&c).unwrap_err(),
        "unsupported: call to @llvm.nvvm.fns (instruction i6 in block bb0, block [0, 0, 0], thread [0, 0, 0])"
    );
    let c = case("__nv_j0f", "float", vec![f(1.0)], 0);
    assert!(run(&c)
        .unwrap_err()
        .starts_with("unsupported: call to @__nv_j0f"));
}
