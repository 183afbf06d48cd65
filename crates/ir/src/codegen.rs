//! PTX emission through LLVM's NVPTX target, with libdevice linked in when the
//! kernel calls `__nv_*` functions.

mod libdevice;

use super::error::IrError;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Once;

pub const DEFAULT_ARCH: &str = "sm_90";
const NVPTX_TRIPLE: &str = "nvptx64-nvidia-cuda";
const LIBDEVICE_FILE: &str = "libdevice.10.bc";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodegenOptions {
    /// Target GPU architecture, e.g. `sm_90`.
    pub arch: String,
    /// libdevice to link; when `None` it is searched for (see `libdevice_candidates`).
    pub libdevice: Option<PathBuf>,
}

impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            arch: DEFAULT_ARCH.to_string(),
            libdevice: None,
        }
    }
}

/// Where libdevice is looked for, in order: the configured path, `$CUDA_HOME`,
/// `$CUDA_PATH`, the default CUDA install, and Debian's nvidia-cuda-toolkit.
pub fn libdevice_candidates(configured: Option<&Path>) -> Vec<PathBuf> {
    if let Some(path) = configured {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var) {
            out.push(
                PathBuf::from(home)
                    .join("nvvm/libdevice")
                    .join(LIBDEVICE_FILE),
            );
        }
    }
    out.push(PathBuf::from("/usr/local/cuda/nvvm/libdevice").join(LIBDEVICE_FILE));
    out.push(PathBuf::from("/usr/lib/nvidia-cuda-toolkit/libdevice").join(LIBDEVICE_FILE));
    out
}

fn target() -> Result<Target, IrError> {
    static INIT: Once = Once::new();
    INIT.call_once(|| Target::initialize_nvptx(&InitializationConfig::default()));
    Target::from_triple(&TargetTriple::create(NVPTX_TRIPLE)).map_err(|e| IrError::Codegen {
        message: e.to_string(),
    })
}

/// One target machine per thread, arch and feature string: creating one
/// costs more than emitting a small kernel.
fn with_target_machine<T>(
    arch: &str,
    f: impl FnOnce(&TargetMachine) -> Result<T, IrError>,
) -> Result<T, IrError> {
    with_target_machine_features(arch, "", f)
}

fn with_target_machine_features<T>(
    arch: &str,
    features: &str,
    f: impl FnOnce(&TargetMachine) -> Result<T, IrError>,
) -> Result<T, IrError> {
    thread_local! {
        static MACHINES: std::cell::RefCell<HashMap<String, TargetMachine>> = Default::default();
    }
    if !arch.starts_with("sm_")
        || arch.len() < 5
        || !arch[3..].chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(IrError::Codegen {
            message: format!("{arch:?} is not an sm_XX architecture"),
        });
    }
    let key = format!("{arch}{features}");
    MACHINES.with(|cell| {
        let mut machines = cell.borrow_mut();
        if !machines.contains_key(&key) {
            let tm = target()?
                .create_target_machine(
                    &TargetTriple::create(NVPTX_TRIPLE),
                    arch,
                    features,
                    OptimizationLevel::Default,
                    RelocMode::Default,
                    CodeModel::Default,
                )
                .ok_or_else(|| IrError::Codegen {
                    message: format!("LLVM has no NVPTX target machine for {arch}"),
                })?;
            machines.insert(key.clone(), tm);
        }
        f(&machines[&key])
    })
}

/// Runs the LLVM pass pipeline `passes` (new pass manager syntax) on
/// `module`, with the target machine for `arch`.
pub(super) fn run_passes(module: &Module<'_>, arch: &str, passes: &str) -> Result<(), IrError> {
    with_target_machine(arch, |tm| {
        module
            .run_passes(passes, tm, PassBuilderOptions::create())
            .map_err(|e| IrError::Codegen {
                message: format!("{passes}: {e}"),
            })
    })
}

/// Emits PTX for a verified module. The module is consumed in spirit: linking
/// and code generation change it, so callers print the IR first.
pub fn emit_ptx<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    kernels: &[String],
    options: &CodegenOptions,
) -> Result<String, IrError> {
    emit_ptx_with_features(context, module, kernels, options, "")
}

/// `emit_ptx` with LLVM target `features` (`+ptx63`, say) beyond the
/// arch's own.
pub(super) fn emit_ptx_with_features<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    kernels: &[String],
    options: &CodegenOptions,
    features: &str,
) -> Result<String, IrError> {
    with_target_machine_features(&options.arch, features, |tm| {
        // Line tables serve explanations, not the GPU: stripped, the PTX
        // (and its hash, the fitness cache's key) is the same as for IR
        // compiled without them, and no `.loc` makes two variants differ.
        module.strip_debug_info();
        libdevice::link(context, module, options, kernels, tm)?;
        let buffer = tm
            .write_to_memory_buffer(module, FileType::Assembly)
            .map_err(|e| IrError::Codegen {
                message: e.to_string(),
            })?;
        let ptx = String::from_utf8(buffer.as_slice().to_vec()).map_err(|e| IrError::Codegen {
            message: e.to_string(),
        })?;
        Ok(renumber_call_sites(&ptx))
    })
}

/// LLVM's NVPTX backend numbers call sites (`// callseq N` comments,
/// `prototype_N` labels) from a process-wide counter, so the same module
/// printed twice differs. Renumbering them in order of appearance makes PTX
/// a function of the IR alone (replay must give byte-identical PTX).
fn renumber_call_sites(ptx: &str) -> String {
    const MARKERS: [&str; 2] = ["callseq ", "prototype_"];
    let mut numbers: HashMap<&str, usize> = HashMap::new();
    let mut out = String::with_capacity(ptx.len());
    let mut rest = ptx;
    loop {
        let next = MARKERS
            .iter()
            .filter_map(|m| rest.find(m).map(|i| (i, m.len())))
            .min();
        let Some((at, len)) = next else {
            out.push_str(rest);
            return out;
        };
        let digits_start = at + len;
        let digits_len = rest[digits_start..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        out.push_str(&rest[..digits_start]);
        if digits_len > 0 {
            let original = &rest[digits_start..digits_start + digits_len];
            let fresh = numbers.len();
            let n = *numbers.entry(original).or_insert(fresh);
            out.push_str(&n.to_string());
        }
        rest = &rest[digits_start + digits_len..];
    }
}

#[cfg(test)]
mod call_site_tests {
    use super::renumber_call_sites;

    #[test]
    fn call_sites_are_numbered_from_zero_in_order() {
        let ptx = "{ // callseq 7, 0\nprototype_7 : .callprototype\n} // callseq 7\n{ // callseq 9, 0\n} // callseq 9\n";
        assert_eq!(
            renumber_call_sites(ptx),
            "{ // callseq 0, 0\nprototype_0 : .callprototype\n} // callseq 0\n{ // callseq 1, 0\n} // callseq 1\n"
        );
        assert_eq!(renumber_call_sites("no calls"), "no calls");
    }
}
