//! The simulator's NVVM intrinsics, table-driven (tests/common/intrinsics.rs
//! runs each row): float math, conversions and bit operations, integer
//! operations.

use crate::common;

use common::intrinsics::*;

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
