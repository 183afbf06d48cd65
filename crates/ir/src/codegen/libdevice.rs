//! libdevice linked into a module that calls `__nv_*` functions. libdevice
//! is about 500 KB of bitcode defining hundreds of functions, and a compile
//! worker builds thousands of variants with the same few calls: parsing all
//! of it for each one cost about 90 ms a compile. So it is cut, once per set
//! of functions called, down to those functions and what they reach, and
//! that slice (a few KB) is what each compile parses and links. What the
//! kernels reach is the same either way, and so is the PTX.

use super::super::error::IrError;
use super::libdevice_candidates;
use super::CodegenOptions;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::TargetMachine;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Slices kept per process; a search meets a handful of sets of calls, so
/// this bound is only there for a daemon's long life.
const SLICES_KEPT: usize = 64;

/// Links the libdevice functions `module` calls into it, and keeps only
/// what `kernels` reach.
pub(super) fn link<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    options: &CodegenOptions,
    kernels: &[String],
    tm: &TargetMachine,
) -> Result<(), IrError> {
    let needed = calls(module);
    let Some(first) = needed.first() else {
        return Ok(());
    };
    let candidates = libdevice_candidates(options.libdevice.as_deref());
    let Some(path) = candidates.iter().find(|p| p.is_file()) else {
        return Err(IrError::LibdeviceNotFound {
            function: first.clone(),
            searched: candidates.iter().map(|p| p.display().to_string()).collect(),
        });
    };
    let link_error = |message: String| IrError::LibdeviceLink {
        path: path.display().to_string(),
        message: crate::one_line(&message),
    };
    let target = KernelTarget {
        triple: module.get_triple().as_str().to_string_lossy().into_owned(),
        layout: module
            .get_data_layout()
            .as_str()
            .to_string_lossy()
            .into_owned(),
    };
    let bytes = slice(path, &needed, &target, tm).map_err(link_error)?;
    let buffer = MemoryBuffer::create_from_memory_range_copy(&bytes, &path.display().to_string());
    let libdevice = context
        .create_module_from_ir(buffer)
        .map_err(|e| link_error(e.to_string()))?;
    module
        .link_in_module(libdevice)
        .map_err(|e| link_error(e.to_string()))?;
    for name in &needed {
        if module
            .get_function(name)
            .is_none_or(|f| f.count_basic_blocks() == 0)
        {
            return Err(IrError::UnresolvedFunction {
                function: name.clone(),
            });
        }
    }
    keep_what_kernels_reach(module, kernels, tm).map_err(link_error)
}

/// libdevice's `__nvvm_reflect` queries answered, and every function
/// `kernels` do not reach dropped.
fn keep_what_kernels_reach(
    module: &Module,
    kernels: &[String],
    tm: &TargetMachine,
) -> Result<(), String> {
    internalize_all_but(module, kernels);
    module
        .run_passes(
            "function(nvvm-reflect),globaldce",
            tm,
            PassBuilderOptions::create(),
        )
        .map_err(|e| e.to_string())
}

/// The kernel module's triple and data layout, which libdevice adopts (it
/// ships with generic ones, and the linker would warn).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct KernelTarget {
    triple: String,
    layout: String,
}

/// Names of `__nv_*` functions the module declares and uses, sorted.
fn calls(module: &Module) -> Vec<String> {
    let mut names: Vec<String> = module
        .get_functions()
        .filter(|f| f.count_basic_blocks() == 0)
        .map(|f| f.get_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("__nv_"))
        .collect();
    names.sort();
    names
}

/// Every function `module` defines, but `kept`, made internal: global
/// dead-code elimination then drops what none of `kept` reaches.
fn internalize_all_but(module: &Module, kept: &[String]) {
    for f in module.get_functions() {
        let name = f.get_name().to_string_lossy();
        if f.count_basic_blocks() > 0 && !kept.iter().any(|k| *k == name) {
            f.set_linkage(Linkage::Internal);
        }
    }
}

/// libdevice at `path` cut down to `needed` and what they reach, as
/// bitcode for `target`, made on first use.
fn slice(
    path: &Path,
    needed: &[String],
    target: &KernelTarget,
    tm: &TargetMachine,
) -> Result<Arc<Vec<u8>>, String> {
    type Key = (PathBuf, Vec<String>, KernelTarget);
    static SLICES: OnceLock<Mutex<HashMap<Key, Arc<Vec<u8>>>>> = OnceLock::new();
    let slices = SLICES.get_or_init(Default::default);
    let key = (path.to_path_buf(), needed.to_vec(), target.clone());
    if let Some(bytes) = slices.lock().expect("libdevice slices").get(&key) {
        return Ok(bytes.clone());
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let context = Context::create();
    let buffer = MemoryBuffer::create_from_memory_range_copy(&bytes, &path.display().to_string());
    let libdevice = context
        .create_module_from_ir(buffer)
        .map_err(|e| e.to_string())?;
    libdevice.set_triple(&inkwell::targets::TargetTriple::create(&target.triple));
    libdevice
        .set_data_layout(&inkwell::targets::TargetData::create(&target.layout).get_data_layout());
    internalize_all_but(&libdevice, needed);
    libdevice
        .run_passes("globaldce", tm, PassBuilderOptions::create())
        .map_err(|e| e.to_string())?;
    let sliced = Arc::new(libdevice.write_bitcode_to_memory().as_slice().to_vec());
    let mut slices = slices.lock().expect("libdevice slices");
    if slices.len() >= SLICES_KEPT {
        slices.clear();
    }
    slices.insert(key, sliced.clone());
    Ok(sliced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KernelIr;
    use rand::SeedableRng;

    /// libdevice linked whole, then cut to what the kernels reach: what
    /// every compile did before slices.
    fn link_whole<'ctx>(
        context: &'ctx Context,
        module: &Module<'ctx>,
        path: &Path,
        kernels: &[String],
        tm: &TargetMachine,
    ) {
        let bytes = std::fs::read(path).unwrap();
        let buffer = MemoryBuffer::create_from_memory_range_copy(&bytes, "libdevice");
        let libdevice = context.create_module_from_ir(buffer).unwrap();
        libdevice.set_triple(&module.get_triple());
        libdevice.set_data_layout(&module.get_data_layout());
        module.link_in_module(libdevice).unwrap();
        keep_what_kernels_reach(module, kernels, tm).unwrap();
    }

    /// A kernel calling libdevice functions that reach others and its
    /// constant tables (the sine's argument reduction).
    const MATH_CALLS: &str = r#"
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @math_calls(ptr %x, ptr %y) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %i = sext i32 %tid to i64
  %p = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %p, align 4
  %s = call float @__nv_sinf(float %v)
  %w = call float @__nv_powf(float %s, float %v)
  %l = call float @__nv_logf(float %w)
  %q = call float @__nv_sqrtf(float %l)
  %o = getelementptr inbounds float, ptr %y, i64 %i
  store float %q, ptr %o, align 4
  ret void
}

declare float @__nv_sinf(float)
declare float @__nv_powf(float, float)
declare float @__nv_logf(float)
declare float @__nv_sqrtf(float)
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

!nvvm.annotations = !{!0}
!0 = !{ptr @math_calls, !"kernel", i32 1}
"#;

    /// The expf fixture and random variants of it, with the team's stub and
    /// with the CUDA toolkit's libdevice where one is installed: the PTX of
    /// a module a slice was linked into is the PTX the whole of libdevice
    /// gives (the IR differs only in the order of intrinsic declarations
    /// and use lists, which bitcode does not keep).
    #[test]
    fn a_slice_links_what_the_whole_of_libdevice_links() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        let expf = KernelIr::load(&fixtures.join("kernels/expf.ll"), Some("scaled_exp")).unwrap();
        let math = KernelIr::parse("math_calls.ll", MATH_CALLS.as_bytes(), None).unwrap();
        let mut cases = vec![(&expf, fixtures.join("libdevice-stub.ll"))];
        match libdevice_candidates(None).into_iter().find(|p| p.is_file()) {
            Some(installed) => cases.extend([(&expf, installed.clone()), (&math, installed)]),
            None => eprintln!("no CUDA libdevice installed: checked with the stub only"),
        }
        for (ir, path) in cases {
            let compared = same_ptx_either_way(ir, &path);
            assert!(
                compared > 6,
                "{}: only {compared} variants linked",
                path.display()
            );
        }
    }

    /// Links the original and 12 random variants of `ir` both ways and
    /// asserts the same PTX (or the same failure); how many linked.
    fn same_ptx_either_way(ir: &KernelIr, path: &Path) -> usize {
        let kernels = ir.kernels().to_vec();
        let mut patches = vec![ir.empty_patch()];
        for seed in 1..=12 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            patches.extend(ir.mutate(&mut rng, 1 + seed as usize % 3));
        }
        let mut compared = 0;
        let options = CodegenOptions {
            libdevice: Some(path.to_path_buf()),
            ..CodegenOptions::default()
        };
        for patch in &patches {
            let linked = |whole: bool| {
                ir.with_patched(patch, |context, module, _| {
                    super::super::with_target_machine(&options.arch, |tm| {
                        module.strip_debug_info();
                        match whole {
                            true => link_whole(context, module, path, &kernels, tm),
                            false => link(context, module, &options, &kernels, tm)?,
                        }
                        let ptx = tm
                            .write_to_memory_buffer(module, inkwell::targets::FileType::Assembly)
                            .unwrap();
                        Ok(String::from_utf8_lossy(ptx.as_slice()).into_owned())
                    })
                })
            };
            let (sliced, whole) = (linked(false), linked(true));
            let renumbered =
                |r: Result<String, IrError>| r.ok().map(|p| super::super::renumber_call_sites(&p));
            let (sliced, whole) = (renumbered(sliced), renumbered(whole));
            compared += usize::from(whole.is_some());
            assert_eq!(sliced, whole, "{}: {patch:?}", path.display());
        }
        compared
    }
}
