//! What `gevod run` does on a GPU: a few variants (a patch, or ready-made
//! PTX files) measured on the GPU workers with the safety gate's verdict on
//! each, and the original's outputs on the GPU compared with the
//! simulator's. The command line prints what these return.

use super::setup::{start_measurer, SetupError, WorkerSetup};
use gevo_client::files::FileError;
use gevo_ir::Patch;
use gevo_model::device::{DeviceInfo, DeviceSelector};
use gevo_model::spec::{self, Acceptance, ArgKind, Metric, Spec, SpecError, TestSet, TestTarget};
use gevo_search::eval::{Assessment, EvalError, Evaluator};
use gevo_search::evolve::{Backend as _, BackendError, Build};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum GpuRunError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Eval(#[from] EvalError),
}

/// What to measure.
pub enum Variants {
    /// A label and the patch.
    Patch(String, Patch),
    /// PTX files, each labelled by its path.
    Ptx(Vec<PathBuf>),
}

/// Each variant's results, and the safety gate's verdict on each (when on).
pub struct GpuRun {
    pub results: Vec<(String, Assessment)>,
    pub gate: Vec<(String, Option<String>)>,
    /// GPU worker restarts the run cost.
    pub restarts: u64,
}

/// The patch (or each PTX file, in order, on the same workers) measured on
/// the GPU, and checked by the safety gate where `setup` turns it on.
pub fn measure_on_gpu(
    setup: &WorkerSetup,
    spec: &Spec,
    device: DeviceInfo,
    variants: Variants,
    set: TestSet,
) -> Result<GpuRun, GpuRunError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut backend = setup.cuda_backend(spec, device, setup.prescreen, stop)?;
    // Only the safety gate needs each variant's PTX.
    let gated = backend.safety_gate().is_some();
    let (results, builds): (Vec<_>, Vec<Option<Build>>) = match variants {
        Variants::Patch(name, patch) => {
            let patches = std::slice::from_ref(&patch);
            let a = backend.assess(patches, set)?;
            let result = (name, a.into_iter().next().expect("one in, one out"));
            let builds = match gated {
                true => vec![backend.compile(patches)?.remove(0).ok()],
                false => Vec::new(),
            };
            (vec![result], builds)
        }
        Variants::Ptx(files) => {
            let mut texts = Vec::with_capacity(files.len());
            for f in &files {
                texts.push(gevo_client::files::read_text_capped(
                    f,
                    gevo_client::files::PTX_CAP,
                )?);
            }
            let results = backend.measure_ptx(&texts, set)?;
            let labels = files.iter().map(|f| f.display().to_string());
            let builds = match gated {
                true => texts.into_iter().map(|ptx| Some(ptx_build(ptx))).collect(),
                false => Vec::new(),
            };
            (labels.zip(results).collect(), builds)
        }
    };
    let mut gate = Vec::new();
    for ((name, _), build) in results.iter().zip(builds) {
        if let Some(build) = build {
            gate.push((name.clone(), backend.safety_check(&build)?));
        }
    }
    Ok(GpuRun {
        results,
        gate,
        restarts: backend.gpu_restarts(),
    })
}

fn ptx_build(ptx: String) -> Build {
    Build {
        ptx_hash: gevo_ir::content_hash(ptx.as_bytes()),
        ptx,
    }
}

/// One output of one test, on the GPU against the simulator.
pub struct Agreement {
    pub test: String,
    pub output: String,
    pub comparison: spec::Comparison,
    pub acceptance: Acceptance,
}

/// The original kernel's outputs on the GPU against the simulator's, test by
/// test: bit for bit for integer outputs, within the spec's acceptance for
/// floats; on the simulator's tests (`[tests.sim]` over `[tests]`), which
/// both can run.
pub fn compare_with_simulator(
    spec_path: &Path,
    device: &DeviceInfo,
    arch: &str,
    libdevice: Option<PathBuf>,
    set: TestSet,
    workers: usize,
) -> Result<Vec<Agreement>, GpuRunError> {
    let selector = DeviceSelector::Uuid(device.uuid.clone());
    let spec = spec::load(spec_path)?.for_backend(TestTarget::Sim);
    let evaluator = Evaluator::new(spec.clone(), workers)?;
    let measurer = start_measurer(
        spec.clone(),
        spec_path,
        &selector,
        Some(arch.to_string()),
        libdevice,
    )?;
    let mut out = Vec::new();
    for test in spec.tests(set) {
        let simulated = evaluator.reference_outputs(test)?;
        let on_gpu = measurer.reference(&test.name).expect("every test measured");
        for i in spec.outputs() {
            let ArgKind::Buffer { elem, .. } = &spec.args[i].kind else {
                continue;
            };
            let acceptance = match elem.is_float() {
                true => spec.acceptance,
                false => Acceptance {
                    metric: Metric::Exact,
                    tolerance: 0.0,
                },
            };
            out.push(Agreement {
                test: test.name.clone(),
                output: spec.args[i].name.clone(),
                comparison: spec::compare(&acceptance, *elem, &simulated[i], &on_gpu[i]),
                acceptance,
            });
        }
    }
    Ok(out)
}
