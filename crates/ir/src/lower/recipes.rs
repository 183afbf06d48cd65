//! Known functions: the table of recipes by name (LLVM intrinsics with
//! their type suffixes dropped, nvvm intrinsics, libdevice's `__nv_*`),
//! and the instructions each recipe emits.

use super::calls::intrinsic_base;
use super::types::scalar_type;
use super::Lowering;
use crate::error::IrError;
use crate::llvm::{self, Value};
use gevo_model::sim::code::*;

impl Lowering {
    /// A call to `name` (element `lane` of a vectorized one), through its
    /// recipe; one the table does not know, or with too few arguments or no
    /// result, is unsupported.
    pub(super) fn lower_known_call(
        &mut self,
        call: Value,
        name: &str,
        count: u32,
        lane: Option<u32>,
        dst: Reg,
    ) -> Result<(), IrError> {
        let unknown = Op::Unsupported(format!("call to @{name}"));
        let Some(recipe) = recipe(name) else {
            self.emit(unknown, dst);
            return Ok(());
        };
        let mut args = Vec::new();
        let mut types = Vec::new();
        for i in 0..count {
            let v = llvm::operand(call, i);
            args.push(self.lane_reg(v, lane)?);
            types.push(scalar_type(llvm::type_of(v)));
        }
        let ty = scalar_type(llvm::type_of(call));
        if args.len() < recipe.arity() || llvm::is_void(ty) {
            self.emit(unknown, dst);
            return Ok(());
        }
        self.emit_recipe(recipe, &args, &types, ty, dst)
    }

    /// Emits a known function's computation on scalar `args` (of scalar
    /// `types`) into `dst`, of scalar type `ty`.
    fn emit_recipe(
        &mut self,
        recipe: Recipe,
        args: &[Reg],
        types: &[llvm::Type],
        ty: llvm::Type,
        dst: Reg,
    ) -> Result<(), IrError> {
        let a = args[0];
        let op = match recipe {
            Recipe::FloatFn(f) => Op::FloatUnary {
                f,
                width: self.float_width(ty)?,
                a,
            },
            Recipe::FloatOp(op) => Op::Float {
                op,
                width: self.float_width(ty)?,
                a,
                b: args[1],
            },
            Recipe::Fma => Op::Fma {
                width: self.float_width(ty)?,
                a,
                b: args[1],
                c: args[2],
            },
            Recipe::Rcp => self.reciprocal(ty, a)?,
            Recipe::Int(op) => Op::Int {
                op,
                bits: self.bits_of(ty)?,
                a,
                b: args[1],
            },
            Recipe::IntFn(f) => {
                let bits = self.bits_of(types[0])?;
                if f == IntFn::Bswap && bits % 16 != 0 {
                    Op::Unsupported(format!("byte swap of i{bits}"))
                } else {
                    Op::IntUnary { f, bits, a }
                }
            }
            Recipe::IntAbs => Op::IntAbs {
                bits: self.bits_of(ty)?,
                a,
            },
            Recipe::ToInt { signed, rounding } => {
                self.float_to_int(signed, rounding, types[0], ty, a)?
            }
            Recipe::ToFloat { signed } => Op::Cast {
                cast: if signed { Cast::SiToFp } else { Cast::UiToFp },
                from_bits: self.bits_of(types[0])?,
                to_bits: self.bits_of(ty)?,
                a,
            },
            Recipe::FloatResize => self.float_resize(types[0], ty, a)?,
            Recipe::Copy => Op::Cast {
                cast: Cast::Bits,
                from_bits: 64,
                to_bits: self.bits_of(ty)?,
                a,
            },
            Recipe::HalvesToDouble { high_first } => self.halves_to_double(high_first, a, args[1]),
            Recipe::DoubleLo => Op::Cast {
                cast: Cast::Trunc,
                from_bits: 64,
                to_bits: 32,
                a,
            },
            Recipe::DoubleHi => Op::Int {
                op: IntOp::LShr,
                bits: 64,
                a,
                b: self.const_reg(32),
            },
            Recipe::Sad { signed } => self.sad(signed, ty, a, args[1], args[2])?,
            Recipe::Prmt => Op::Prmt {
                a,
                b: args[1],
                c: args[2],
            },
            Recipe::Funnel { left } => {
                let bits = self.bits_of(ty)?;
                return self.funnel(left, bits, a, args[1], args[2], dst);
            }
            Recipe::Rotate { left } => {
                let bits = self.bits_of(ty)?;
                return self.funnel(left, bits, a, a, args[1], dst);
            }
        };
        self.emit(op, dst);
        Ok(())
    }

    /// `1 / a`, at the float width of `ty`.
    fn reciprocal(&mut self, ty: llvm::Type, a: Reg) -> Result<Op, IrError> {
        let width = self.float_width(ty)?;
        let one = self.const_reg(match width {
            FloatWidth::F32 => u64::from(1f32.to_bits()),
            FloatWidth::F64 => 1f64.to_bits(),
        });
        Ok(Op::Float {
            op: FloatOp::Div,
            width,
            a: one,
            b: a,
        })
    }

    /// A float-to-integer conversion of `a` (of type `from`) to `ty`,
    /// rounded first as `rounding` says.
    fn float_to_int(
        &mut self,
        signed: bool,
        rounding: Rounding,
        from: llvm::Type,
        ty: llvm::Type,
        a: Reg,
    ) -> Result<Op, IrError> {
        let width = self.float_width(from)?;
        let round = match rounding {
            Rounding::Zero => None, // the conversion truncates
            Rounding::Nearest => Some(FloatFn::RoundEven),
            Rounding::Down => Some(FloatFn::Floor),
            Rounding::Up => Some(FloatFn::Ceil),
        };
        let a = match round {
            Some(f) => {
                let t = self.fresh();
                self.emit(Op::FloatUnary { f, width, a }, t);
                t
            }
            None => a,
        };
        Ok(Op::Cast {
            cast: if signed { Cast::FpToSi } else { Cast::FpToUi },
            from_bits: self.bits_of(from)?,
            to_bits: self.bits_of(ty)?,
            a,
        })
    }

    /// A float conversion of `a` (of type `from`) to the float type `ty`.
    fn float_resize(&mut self, from: llvm::Type, ty: llvm::Type, a: Reg) -> Result<Op, IrError> {
        let (from_bits, to_bits) = (self.bits_of(from)?, self.bits_of(ty)?);
        Ok(Op::Cast {
            cast: if to_bits < from_bits {
                Cast::FpTrunc
            } else {
                Cast::FpExt
            },
            from_bits,
            to_bits,
            a,
        })
    }

    /// The 64 bits whose halves are `a` and `b` (the high one first when
    /// `high_first`).
    fn halves_to_double(&mut self, high_first: bool, a: Reg, b: Reg) -> Op {
        let (low, high) = if high_first { (b, a) } else { (a, b) };
        let (shifted, amount) = (self.fresh(), self.const_reg(32));
        self.int(IntOp::Shl, 64, high, amount, shifted);
        Op::Int {
            op: IntOp::Or,
            bits: 64,
            a: shifted,
            b: low,
        }
    }

    /// `|a - b| + c`, the difference taken as max - min, which cannot
    /// overflow.
    fn sad(&mut self, signed: bool, ty: llvm::Type, a: Reg, b: Reg, c: Reg) -> Result<Op, IrError> {
        let bits = self.bits_of(ty)?;
        let (high, low, diff) = (self.fresh(), self.fresh(), self.fresh());
        let (max, min) = if signed {
            (IntOp::SMax, IntOp::SMin)
        } else {
            (IntOp::UMax, IntOp::UMin)
        };
        self.int(max, bits, a, b, high);
        self.int(min, bits, a, b, low);
        self.int(IntOp::Sub, bits, high, low, diff);
        Ok(Op::Int {
            op: IntOp::Add,
            bits,
            a: diff,
            b: c,
        })
    }

    /// `fshl`/`fshr` of `hi:lo` by `amount` modulo the width, with shifts
    /// and an or: a shift by the full width gives 0 (`sim::exec`'s rule),
    /// which makes a zero amount come out right.
    fn funnel(
        &mut self,
        left: bool,
        bits: u32,
        hi: Reg,
        lo: Reg,
        amount: Reg,
        dst: Reg,
    ) -> Result<(), IrError> {
        let (n, width) = (self.fresh(), self.const_reg(u64::from(bits)));
        if bits.is_power_of_two() {
            let m = self.const_reg(u64::from(bits - 1));
            self.int(IntOp::And, bits, amount, m, n);
        } else {
            self.int(IntOp::URem, bits, amount, width, n);
        }
        let (rest, high, low) = (self.fresh(), self.fresh(), self.fresh());
        self.int(IntOp::Sub, bits, width, n, rest);
        let (high_shift, low_shift) = if left { (n, rest) } else { (rest, n) };
        self.int(IntOp::Shl, bits, hi, high_shift, high);
        self.int(IntOp::LShr, bits, lo, low_shift, low);
        self.int(IntOp::Or, bits, high, low, dst);
        Ok(())
    }
}

/// Rounding of a float-to-integer conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounding {
    Nearest,
    Zero,
    Down,
    Up,
}

/// How a call to a known intrinsic or libdevice function is simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recipe {
    FloatFn(FloatFn),
    FloatOp(FloatOp),
    Fma,
    /// 1 / x.
    Rcp,
    Int(IntOp),
    /// Of the first argument's width (`clz.ll` counts 64 bits).
    IntFn(IntFn),
    IntAbs,
    /// Float to integer: rounded to an integral value first, then the
    /// saturating conversion.
    ToInt {
        signed: bool,
        rounding: Rounding,
    },
    ToFloat {
        signed: bool,
    },
    /// fptrunc or fpext, by the types.
    FloatResize,
    /// The same bits (bitcast intrinsics, `llvm.expect`, canonicalize).
    Copy,
    /// A double from its 32-bit halves: (low, high), or (high, low) for
    /// libdevice's `hiloint2double`.
    HalvesToDouble {
        high_first: bool,
    },
    DoubleLo,
    DoubleHi,
    /// |a - b| + c.
    Sad {
        signed: bool,
    },
    Prmt,
    /// `fshl`/`fshr` (hi, lo, amount).
    Funnel {
        left: bool,
    },
    /// A funnel shift of a value with itself (value, amount).
    Rotate {
        left: bool,
    },
}

impl Recipe {
    fn arity(self) -> usize {
        match self {
            Recipe::FloatOp(_)
            | Recipe::Int(_)
            | Recipe::HalvesToDouble { .. }
            | Recipe::Rotate { .. } => 2,
            Recipe::Fma | Recipe::Sad { .. } | Recipe::Prmt | Recipe::Funnel { .. } => 3,
            _ => 1,
        }
    }
}

/// The recipe for a called function, by name: LLVM intrinsics (type
/// suffixes dropped), nvvm intrinsics and libdevice's `__nv_*` functions.
fn recipe(name: &str) -> Option<Recipe> {
    if let Some(rest) = name.strip_prefix("llvm.nvvm.") {
        nvvm_recipe(rest)
    } else if let Some(rest) = name.strip_prefix("__nv_") {
        libdevice_recipe(rest)
    } else {
        llvm_recipe(intrinsic_base(name))
    }
}

fn llvm_recipe(base: &str) -> Option<Recipe> {
    use gevo_model::sim::code::{FloatFn as F, FloatOp as B, IntFn as I};
    use Recipe::*;
    Some(match base {
        "llvm.smax" => Int(IntOp::SMax),
        "llvm.smin" => Int(IntOp::SMin),
        "llvm.umax" => Int(IntOp::UMax),
        "llvm.umin" => Int(IntOp::UMin),
        "llvm.sadd.sat" => Int(IntOp::SAddSat),
        "llvm.uadd.sat" => Int(IntOp::UAddSat),
        "llvm.ssub.sat" => Int(IntOp::SSubSat),
        "llvm.usub.sat" => Int(IntOp::USubSat),
        "llvm.abs" => IntAbs,
        "llvm.ctpop" => IntFn(I::Popcount),
        "llvm.ctlz" => IntFn(I::Clz),
        "llvm.cttz" => IntFn(I::Ctz),
        "llvm.bswap" => IntFn(I::Bswap),
        "llvm.bitreverse" => IntFn(I::BitReverse),
        "llvm.fshl" => Funnel { left: true },
        "llvm.fshr" => Funnel { left: false },
        "llvm.fma" | "llvm.fmuladd" => Fma,
        "llvm.fabs" => FloatFn(F::Abs),
        "llvm.sqrt" => FloatFn(F::Sqrt),
        "llvm.exp" => FloatFn(F::Exp),
        "llvm.exp2" => FloatFn(F::Exp2),
        "llvm.exp10" => FloatFn(F::Exp10),
        "llvm.log" => FloatFn(F::Log),
        "llvm.log2" => FloatFn(F::Log2),
        "llvm.log10" => FloatFn(F::Log10),
        "llvm.sin" => FloatFn(F::Sin),
        "llvm.cos" => FloatFn(F::Cos),
        "llvm.tan" => FloatFn(F::Tan),
        "llvm.asin" => FloatFn(F::Asin),
        "llvm.acos" => FloatFn(F::Acos),
        "llvm.atan" => FloatFn(F::Atan),
        "llvm.sinh" => FloatFn(F::Sinh),
        "llvm.cosh" => FloatFn(F::Cosh),
        "llvm.tanh" => FloatFn(F::Tanh),
        "llvm.floor" => FloatFn(F::Floor),
        "llvm.ceil" => FloatFn(F::Ceil),
        "llvm.trunc" => FloatFn(F::Trunc),
        "llvm.round" => FloatFn(F::Round),
        // No floating-point exceptions are modelled, so rint = nearbyint.
        "llvm.rint" | "llvm.nearbyint" | "llvm.roundeven" => FloatFn(F::RoundEven),
        "llvm.minnum" => FloatOp(B::Min),
        "llvm.maxnum" => FloatOp(B::Max),
        "llvm.minimum" => FloatOp(B::Minimum),
        "llvm.maximum" => FloatOp(B::Maximum),
        "llvm.copysign" => FloatOp(B::CopySign),
        "llvm.pow" => FloatOp(B::Pow),
        "llvm.powi" => FloatOp(B::PowI),
        "llvm.atan2" => FloatOp(B::Atan2),
        "llvm.canonicalize"
        | "llvm.expect"
        | "llvm.expect.with.probability"
        | "llvm.arithmetic.fence"
        | "llvm.ssa.copy" => Copy,
        _ => return None,
    })
}

/// nvvm intrinsics, after `nvvm_name` drops the modifiers that do not change
/// what the simulator computes. Rounding modifiers matter only where they
/// pick the integer of a float-to-integer conversion; `.rz`/`.rm`/`.rp`
/// arithmetic (add, mul, div, fma, sqrt, rcp, int-to-float, d2f) rounds to
/// nearest instead, `.ftz` keeps subnormals (as plain float instructions
/// do here), and `.approx` functions are computed exactly.
fn nvvm_recipe(rest: &str) -> Option<Recipe> {
    use gevo_model::sim::code::{FloatFn as F, FloatOp as B, IntFn as I};
    use Recipe::*;
    let (name, rounding) = nvvm_name(rest);
    let to_int = |signed| ToInt {
        signed,
        rounding: rounding.unwrap_or(Rounding::Zero),
    };
    Some(match name.as_str() {
        "fabs.f" | "fabs.d" => FloatFn(F::Abs),
        "fmin.f" | "fmin.d" => FloatOp(B::Min),
        "fmax.f" | "fmax.d" => FloatOp(B::Max),
        "fmin.nan.f" => FloatOp(B::Minimum),
        "fmax.nan.f" => FloatOp(B::Maximum),
        "sqrt.f" | "sqrt.d" => FloatFn(F::Sqrt),
        "rsqrt.f" | "rsqrt.d" => FloatFn(F::Rsqrt),
        "rcp.f" | "rcp.d" => Rcp,
        "div.f" | "div.d" | "div.full" => FloatOp(B::Div),
        "add.f" | "add.d" => FloatOp(B::Add),
        "mul.f" | "mul.d" => FloatOp(B::Mul),
        "fma.f" | "fma.d" => Fma,
        "sin.f" => FloatFn(F::Sin),
        "cos.f" => FloatFn(F::Cos),
        "ex2.f" | "ex2.d" => FloatFn(F::Exp2),
        "lg2.f" | "lg2.d" => FloatFn(F::Log2),
        "floor.f" | "floor.d" => FloatFn(F::Floor),
        "ceil.f" | "ceil.d" => FloatFn(F::Ceil),
        "trunc.f" | "trunc.d" => FloatFn(F::Trunc),
        // PTX `cvt.rni`: nearest, ties to even (unlike llvm.round).
        "round.f" | "round.d" => FloatFn(F::RoundEven),
        "saturate.f" | "saturate.d" => FloatFn(F::Saturate),
        "f2i" | "d2i" | "f2ll" | "d2ll" => to_int(true),
        "f2ui" | "d2ui" | "f2ull" | "d2ull" => to_int(false),
        "i2f" | "i2d" | "ll2f" | "ll2d" => ToFloat { signed: true },
        "ui2f" | "ui2d" | "ull2f" | "ull2d" => ToFloat { signed: false },
        "d2f" => FloatResize,
        "lohi.i2d" => HalvesToDouble { high_first: false },
        "d2i.lo" => DoubleLo,
        "d2i.hi" => DoubleHi,
        "bitcast.f2i" | "bitcast.i2f" | "bitcast.ll2d" | "bitcast.d2ll" => Copy,
        // LLVM 19 rewrites these on load into generic intrinsics; kept for
        // IR that reaches here another way.
        "clz.i" | "clz.ll" => IntFn(I::Clz),
        "popc.i" | "popc.ll" => IntFn(I::Popcount),
        "brev32" | "brev64" => IntFn(I::BitReverse),
        "abs.i" | "abs.ll" => IntAbs,
        "min.i" | "min.ll" | "min.s" => Int(IntOp::SMin),
        "min.ui" | "min.ull" | "min.us" => Int(IntOp::UMin),
        "max.i" | "max.ll" | "max.s" => Int(IntOp::SMax),
        "max.ui" | "max.ull" | "max.us" => Int(IntOp::UMax),
        "mulhi.i" | "mulhi.ll" | "mulhi.s" => Int(IntOp::MulHiS),
        "mulhi.ui" | "mulhi.ull" | "mulhi.us" => Int(IntOp::MulHiU),
        "mul24.i" => Int(IntOp::Mul24S),
        "mul24.ui" => Int(IntOp::Mul24U),
        "sad.i" | "sad.s" | "sad.ll" => Sad { signed: true },
        "sad.ui" | "sad.us" | "sad.ull" => Sad { signed: false },
        "prmt" => Prmt,
        "rotate.b32" | "rotate.b64" => Rotate { left: true },
        "rotate.right.b64" => Rotate { left: false },
        _ => return None,
    })
}

/// An nvvm intrinsic name (after `llvm.nvvm.`) without its `.ftz` and
/// `.approx` modifiers, and its rounding modifier.
fn nvvm_name(rest: &str) -> (String, Option<Rounding>) {
    let mut rounding = None;
    let mut parts = Vec::new();
    for part in rest.split('.') {
        match part {
            "ftz" | "approx" => {}
            "rn" => rounding = Some(Rounding::Nearest),
            "rz" => rounding = Some(Rounding::Zero),
            "rm" => rounding = Some(Rounding::Down),
            "rp" => rounding = Some(Rounding::Up),
            _ => parts.push(part),
        }
    }
    (parts.join("."), rounding)
}

/// libdevice functions the simulator computes natively (after `__nv_`).
fn libdevice_recipe(rest: &str) -> Option<Recipe> {
    use gevo_model::sim::code::{FloatFn as F, FloatOp as B, IntFn as I};
    use Recipe::*;
    // Conversions and correctly rounded arithmetic: `<operation>_<rounding>`.
    if let Some((op, mode)) = rest.rsplit_once('_') {
        let rounding = match mode {
            "rn" => Some(Rounding::Nearest),
            "rz" => Some(Rounding::Zero),
            "rd" => Some(Rounding::Down),
            "ru" => Some(Rounding::Up),
            _ => None,
        };
        if let Some(rounding) = rounding {
            return Some(match op {
                "float2int" | "float2ll" | "double2int" | "double2ll" => ToInt {
                    signed: true,
                    rounding,
                },
                "float2uint" | "float2ull" | "double2uint" | "double2ull" => ToInt {
                    signed: false,
                    rounding,
                },
                "int2float" | "ll2float" | "int2double" | "ll2double" => ToFloat { signed: true },
                "uint2float" | "ull2float" | "uint2double" | "ull2double" => {
                    ToFloat { signed: false }
                }
                "double2float" => FloatResize,
                "fadd" | "dadd" => FloatOp(B::Add),
                "fsub" | "dsub" => FloatOp(B::Sub),
                "fmul" | "dmul" => FloatOp(B::Mul),
                "fdiv" | "ddiv" => FloatOp(B::Div),
                "fsqrt" | "dsqrt" => FloatFn(F::Sqrt),
                "frcp" | "drcp" => Rcp,
                "fmaf" | "fma" => Fma,
                _ => return None,
            });
        }
    }
    Some(match rest {
        "fabsf" | "fabs" => FloatFn(F::Abs),
        "sqrtf" | "sqrt" => FloatFn(F::Sqrt),
        "rsqrtf" | "rsqrt" => FloatFn(F::Rsqrt),
        "cbrtf" | "cbrt" => FloatFn(F::Cbrt),
        "expf" | "exp" => FloatFn(F::Exp),
        "exp2f" | "exp2" => FloatFn(F::Exp2),
        "exp10f" | "exp10" => FloatFn(F::Exp10),
        "expm1f" | "expm1" => FloatFn(F::Expm1),
        "logf" | "log" => FloatFn(F::Log),
        "log2f" | "log2" => FloatFn(F::Log2),
        "log10f" | "log10" => FloatFn(F::Log10),
        "log1pf" | "log1p" => FloatFn(F::Log1p),
        "sinf" | "sin" => FloatFn(F::Sin),
        "cosf" | "cos" => FloatFn(F::Cos),
        "tanf" | "tan" => FloatFn(F::Tan),
        "asinf" | "asin" => FloatFn(F::Asin),
        "acosf" | "acos" => FloatFn(F::Acos),
        "atanf" | "atan" => FloatFn(F::Atan),
        "sinhf" | "sinh" => FloatFn(F::Sinh),
        "coshf" | "cosh" => FloatFn(F::Cosh),
        "tanhf" | "tanh" => FloatFn(F::Tanh),
        "floorf" | "floor" => FloatFn(F::Floor),
        "ceilf" | "ceil" => FloatFn(F::Ceil),
        "truncf" | "trunc" => FloatFn(F::Trunc),
        "roundf" | "round" => FloatFn(F::Round),
        "rintf" | "rint" | "nearbyintf" | "nearbyint" => FloatFn(F::RoundEven),
        "saturatef" => FloatFn(F::Saturate),
        "fminf" | "fmin" => FloatOp(B::Min),
        "fmaxf" | "fmax" => FloatOp(B::Max),
        "copysignf" | "copysign" => FloatOp(B::CopySign),
        "powf" | "pow" => FloatOp(B::Pow),
        "powif" | "powi" => FloatOp(B::PowI),
        "atan2f" | "atan2" => FloatOp(B::Atan2),
        "hypotf" | "hypot" => FloatOp(B::Hypot),
        "fmodf" | "fmod" => FloatOp(B::Rem),
        "fdividef" => FloatOp(B::Div),
        "fmaf" | "fma" => Fma,
        "popc" | "popcll" => IntFn(I::Popcount),
        "clz" | "clzll" => IntFn(I::Clz),
        "brev" | "brevll" => IntFn(I::BitReverse),
        "mulhi" | "mul64hi" => Int(IntOp::MulHiS),
        "umulhi" | "umul64hi" => Int(IntOp::MulHiU),
        "mul24" => Int(IntOp::Mul24S),
        "umul24" => Int(IntOp::Mul24U),
        "abs" | "llabs" => IntAbs,
        "min" | "llmin" => Int(IntOp::SMin),
        "umin" | "ullmin" => Int(IntOp::UMin),
        "max" | "llmax" => Int(IntOp::SMax),
        "umax" | "ullmax" => Int(IntOp::UMax),
        "sad" => Sad { signed: true },
        "usad" => Sad { signed: false },
        "byte_perm" => Prmt,
        "float_as_int" | "int_as_float" | "double_as_longlong" | "longlong_as_double" => Copy,
        "double2hiint" => DoubleHi,
        "double2loint" => DoubleLo,
        "hiloint2double" => HalvesToDouble { high_first: true },
        _ => return None,
    })
}
