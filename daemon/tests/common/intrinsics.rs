//! The intrinsics tables' machinery: each case calls one function in a
//! one-thread kernel whose arguments are loaded from memory at run time (so
//! nothing is folded before the simulator sees it) and compares the stored
//! result bit for bit.

use gevo_ir::KernelIr;
use gevo_model::sim::{self, pointer, GlobalMemory, LaunchDims, Limits};

/// A call argument: a value loaded from memory, or an immediate (`immarg`
/// flags must be constants).
pub enum Arg {
    Value(&'static str, u64),
    Imm(&'static str, &'static str),
}

pub fn f(x: f32) -> Arg {
    Arg::Value("float", u64::from(x.to_bits()))
}
pub fn d(x: f64) -> Arg {
    Arg::Value("double", x.to_bits())
}
pub fn i(x: i32) -> Arg {
    Arg::Value("i32", u64::from(x as u32))
}
pub fn l(x: i64) -> Arg {
    Arg::Value("i64", x as u64)
}
pub fn h(x: i16) -> Arg {
    Arg::Value("i16", u64::from(x as u16))
}
pub fn b(x: i8) -> Arg {
    Arg::Value("i8", u64::from(x as u8))
}
pub fn flag(value: &'static str) -> Arg {
    Arg::Imm("i1", value)
}
pub fn f2(x: [f32; 2]) -> Arg {
    Arg::Value("<2 x float>", pack_f32(x))
}
pub fn i2(x: [i32; 2]) -> Arg {
    Arg::Value("<2 x i32>", pack_i32(x))
}

pub fn ef(x: f32) -> u64 {
    u64::from(x.to_bits())
}
pub fn ed(x: f64) -> u64 {
    x.to_bits()
}
pub fn ei(x: i32) -> u64 {
    u64::from(x as u32)
}
pub fn el(x: i64) -> u64 {
    x as u64
}
pub fn pack_f32(x: [f32; 2]) -> u64 {
    u64::from(x[0].to_bits()) | (u64::from(x[1].to_bits()) << 32)
}
pub fn pack_i32(x: [i32; 2]) -> u64 {
    u64::from(x[0] as u32) | (u64::from(x[1] as u32) << 32)
}

pub const NAN: f32 = f32::NAN; // 0x7fc00000, the canonical quiet NaN

pub struct Case {
    pub name: &'static str,
    pub ret: &'static str,
    pub args: Vec<Arg>,
    pub expect: u64,
}

pub fn case(name: &'static str, ret: &'static str, args: Vec<Arg>, expect: u64) -> Case {
    Case {
        name,
        ret,
        args,
        expect,
    }
}

pub fn bytes_of_type(ty: &str) -> usize {
    match ty {
        "i8" => 1,
        "i16" => 2,
        "float" | "i32" => 4,
        _ => 8,
    }
}

pub fn kernel(c: &Case) -> String {
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
pub fn run(c: &Case) -> Result<u64, String> {
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

pub fn check(cases: &[Case]) {
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
