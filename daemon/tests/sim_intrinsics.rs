//! The simulator's LLVM intrinsics and libdevice functions, table-driven
//! (tests/common/intrinsics.rs runs each row), and the error naming a
//! function it does not know. The NVVM intrinsics are in sim_nvvm.rs.

use crate::common;

use common::intrinsics::*;

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
