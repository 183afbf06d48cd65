//! The simulator's compact form of a kernel: plain data, decoded once from
//! LLVM IR by `ir::lower` and interpreted by `sim::exec`. Every operand is a
//! register; constants live in registers preloaded from `Program::constants`.

/// A register index into a thread's register file.
///
/// Values live in registers as `u64`: integers zero-extended from their
/// width, floats as IEEE bits, pointers tagged (`sim::pointer`). A vector
/// (or a struct returned by `cmpxchg` and the `*.with.overflow` intrinsics)
/// occupies one consecutive register per element, element 0 first.
pub type Reg = u32;

/// The mask of an integer of `bits` bits.
pub fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The signed value of the low `bits` bits of `v`.
pub fn sign_extend(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let shift = 64 - bits;
        ((v << shift) as i64) >> shift
    }
}

#[derive(Debug, Clone)]
pub struct Program {
    pub kernel: String,
    pub registers: u32,
    /// Registers that hold constants: (register, raw bits).
    pub constants: Vec<(Reg, u64)>,
    /// Registers that receive the kernel parameters, in order.
    pub params: Vec<ParamSlot>,
    pub blocks: Vec<Block>,
    /// Edges from a terminator to a block, with the phi copies they perform.
    pub edges: Vec<Edge>,
    /// Bytes of static shared memory (`addrspace(3)` globals, laid out in order).
    pub static_shared_bytes: u64,
    /// The static shared variables, by their source names, for verdicts.
    pub shared_vars: Vec<SharedVar>,
    /// Read-only `addrspace(4)`/constant globals, indexed by the constant-space id.
    pub constant_globals: Vec<Vec<u8>>,
    /// Bytes of `alloca` stack per thread.
    pub local_bytes: u64,
}

/// A static shared variable: its source name (`sdata` for the mangled
/// `_ZZ10reduce_sumPKfPfiE5sdata`) and its bytes in the block's shared memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedVar {
    pub name: String,
    pub offset: u64,
    pub size: u64,
    /// The array's dimensions as declared, outermost first (`tile[16][18]`
    /// is `[16, 18]`); empty for a variable that is not an array.
    pub dims: Vec<u64>,
}

impl Program {
    /// The shared variable holding shared byte `offset`, and the offset
    /// within it.
    pub fn shared_var_at(&self, offset: u64) -> Option<(&str, u64)> {
        self.shared_vars
            .iter()
            .find(|v| (v.offset..v.offset + v.size).contains(&offset))
            .map(|v| (v.name.as_str(), offset - v.offset))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamSlot {
    pub reg: Reg,
    pub is_pointer: bool,
    /// Bit width of an integer or float parameter.
    pub bits: u32,
    /// A `float` or `double` parameter (else an integer or a pointer).
    pub float: bool,
}

#[derive(Debug, Clone)]
pub struct Block {
    pub name: String,
    pub insts: Vec<Inst>,
}

#[derive(Debug, Clone)]
pub struct Edge {
    pub target: u32,
    /// Phi copies (destination, source), performed as one parallel copy.
    pub copies: Vec<(Reg, Reg)>,
}

#[derive(Debug, Clone)]
pub struct Inst {
    pub op: Op,
    pub dst: Reg,
    /// The edit engine's instruction id, for verdicts.
    pub id: u32,
    /// Cost weight (see `sim::cost`).
    pub cost: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOp {
    Add,
    Sub,
    Mul,
    UDiv,
    SDiv,
    URem,
    SRem,
    Shl,
    LShr,
    AShr,
    And,
    Or,
    Xor,
    SMax,
    SMin,
    UMax,
    UMin,
    /// High half of the double-width product (signed, unsigned).
    MulHiS,
    MulHiU,
    /// PTX `mul24.lo`: the low 24 bits of each operand (sign- or
    /// zero-extended) multiplied, low half of the product.
    Mul24S,
    Mul24U,
    /// Saturating add and subtract.
    SAddSat,
    UAddSat,
    SSubSat,
    USubSat,
}

/// Unary bit operations on integers of `bits` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntFn {
    Popcount,
    /// Leading zeros within the width (the width for zero).
    Clz,
    /// Trailing zeros (the width for zero).
    Ctz,
    Bswap,
    BitReverse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Max,
    /// `llvm.minimum`/`maximum`: NaN if either operand is NaN, -0 < +0.
    Minimum,
    Maximum,
    CopySign,
    Pow,
    /// `b` is a 32-bit integer exponent (`llvm.powi`).
    PowI,
    Atan2,
    Hypot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatFn {
    Neg,
    Abs,
    Sqrt,
    Exp,
    Exp2,
    Log,
    Log2,
    Sin,
    Cos,
    Floor,
    Ceil,
    Trunc,
    Round,
    /// Round to nearest, ties to even (`rint`, PTX `cvt.rni`).
    RoundEven,
    Rsqrt,
    /// Clamp to [0, 1], NaN to 0 (PTX `.sat`).
    Saturate,
    Log10,
    Exp10,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Cbrt,
    Expm1,
    Log1p,
}

/// LLVM's icmp predicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ICmp {
    Eq,
    Ne,
    Ugt,
    Uge,
    Ult,
    Ule,
    Sgt,
    Sge,
    Slt,
    Sle,
}

/// LLVM's fcmp predicates: `ordered` says NaN makes the result false
/// (true for unordered ones); `cond` is the comparison otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FCmp {
    pub cond: FCond,
    pub unordered_result: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FCond {
    False,
    True,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `ord`/`uno`: only the NaN test.
    Ord,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cast {
    Trunc,
    ZExt,
    SExt,
    FpToUi,
    FpToSi,
    UiToFp,
    SiToFp,
    FpTrunc,
    FpExt,
    /// Same bits (bitcast, ptrtoint/inttoptr of equal width, addrspacecast).
    Bits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialReg {
    TidX,
    TidY,
    TidZ,
    NtidX,
    NtidY,
    NtidZ,
    CtaidX,
    CtaidY,
    CtaidZ,
    NctaidX,
    NctaidY,
    NctaidZ,
    WarpSize,
    LaneId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmwOp {
    Xchg,
    Add,
    Sub,
    And,
    Or,
    Xor,
    Max,
    Min,
    UMax,
    UMin,
    FAdd,
}

/// Warp-collective operations: the threads of a warp (32 consecutive
/// threads of the block) that reach one execute it together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarpOp {
    /// `shfl.sync` modes; arguments: mask, value, lane or delta, clamp.
    ShflIdx,
    ShflUp,
    ShflDown,
    ShflBfly,
    /// `vote.sync` modes; arguments: mask, predicate.
    VoteAll,
    VoteAny,
    VoteUni,
    Ballot,
    /// No arguments.
    ActiveMask,
}

/// A float operation's width: f32 (`single`) or f64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatWidth {
    F32,
    F64,
}

/// A variable GEP index: (register, bit width, scale in bytes).
pub type GepTerm = (Reg, u32, i64);

#[derive(Debug, Clone)]
pub enum Op {
    Int {
        op: IntOp,
        bits: u32,
        a: Reg,
        b: Reg,
    },
    Float {
        op: FloatOp,
        width: FloatWidth,
        a: Reg,
        b: Reg,
    },
    FloatUnary {
        f: FloatFn,
        width: FloatWidth,
        a: Reg,
    },
    Fma {
        width: FloatWidth,
        a: Reg,
        b: Reg,
        c: Reg,
    },
    IntAbs {
        bits: u32,
        a: Reg,
    },
    IntUnary {
        f: IntFn,
        bits: u32,
        a: Reg,
    },
    /// PTX `prmt` (default mode): bytes of `b:a` picked by the nibbles of `c`.
    Prmt {
        a: Reg,
        b: Reg,
        c: Reg,
    },
    ICmp {
        pred: ICmp,
        bits: u32,
        a: Reg,
        b: Reg,
    },
    FCmp {
        pred: FCmp,
        width: FloatWidth,
        a: Reg,
        b: Reg,
    },
    Cast {
        cast: Cast,
        from_bits: u32,
        to_bits: u32,
        a: Reg,
    },
    Select {
        cond: Reg,
        a: Reg,
        b: Reg,
    },
    /// `base + offset + sum(index * scale)`, indices sign-extended from their width.
    Gep {
        base: Reg,
        offset: i64,
        terms: Vec<(Reg, u32, i64)>,
    },
    Load {
        ptr: Reg,
        bytes: u32,
    },
    Store {
        ptr: Reg,
        value: Reg,
        bytes: u32,
    },
    /// A vector load: `lanes` elements of `elem_bytes` bytes each into
    /// registers `dst..dst + lanes`, one access (one bounds check).
    VecLoad {
        ptr: Reg,
        elem_bytes: u32,
        lanes: u32,
    },
    /// A vector store of registers `value..value + lanes`, one access.
    VecStore {
        ptr: Reg,
        value: Reg,
        elem_bytes: u32,
        lanes: u32,
    },
    AtomicRmw {
        op: RmwOp,
        ptr: Reg,
        value: Reg,
        bytes: u32,
    },
    CmpXchg {
        ptr: Reg,
        expected: Reg,
        new: Reg,
        bytes: u32,
    },
    /// Frame offset of this alloca within the thread's local memory.
    Alloca {
        offset: u64,
    },
    Special(SpecialReg),
    Barrier,
    Warp {
        op: WarpOp,
        args: Vec<Reg>,
    },
    Fence,
    /// No effect (lifetime markers, assumes).
    Nop,
    Br {
        edge: u32,
    },
    CondBr {
        cond: Reg,
        if_true: u32,
        if_false: u32,
    },
    Switch {
        value: Reg,
        bits: u32,
        cases: Vec<(u64, u32)>,
        default: u32,
    },
    Ret,
    Unreachable,
    /// Decoded but not simulated; reaching it is a verdict naming it.
    Unsupported(String),
}
