//! `gevod explain-edits --backend cuda`: the edit contributions measured
//! on the GPU (each subset timed on the held-out tests like promotion, with
//! intervals), from the job's own spec and IR snapshots, through the same
//! compile and GPU workers as `gevod run`. The relies-on lines still come
//! from the simulator (`gevod::explain_edits`): they are correctness
//! questions, not timings.

use anyhow::{bail, Context as _, Result};
use gevo_ir::{KernelIr, Patch};
use gevo_model::access::Reader;
use gevo_model::device::DeviceInfo;
use gevo_model::spec::{self, TestTarget};
use gevo_search::contrib::{self, Contributions, Options};
use gevo_search::store::JobRecord;
use gevod::explain_edits::Simulated;
use gevod::worker::setup::{arch_for, WorkerSetup};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// `patch`'s contributions on `device`, with the relies-on lines attached.
pub fn measure(
    job: &JobRecord,
    patch: &Patch,
    device: DeviceInfo,
    workers: usize,
    libdevice: Option<&Path>,
    options: &Options,
) -> Result<Contributions> {
    let dir = tempfile::tempdir().context("a temporary directory for the job's snapshots")?;
    let (ir_path, spec_path) = (
        dir.path().join("kernel.ll"),
        dir.path().join("spec.gevo.toml"),
    );
    std::fs::write(&ir_path, &job.ir_text).context("writing the IR snapshot")?;
    std::fs::write(&spec_path, &job.spec_text).context("writing the spec snapshot")?;
    let mut spec = spec::parse_as(&job.spec_path, &job.spec_text, &Reader::Caller)?
        .for_backend(TestTarget::Gpu);
    if spec.harness.is_some() {
        bail!(
            "job {}: a harness spec; explain-edits measures spec launches only",
            job.id
        );
    }
    spec.ir = ir_path.clone();
    let arch = arch_for(&spec, None, Some(&device));
    // Every subset the same rounds, as `gevod run` measures; the workers
    // read the job's snapshots.
    let setup = WorkerSetup {
        spec_text: Some(&spec_path),
        ir: Some(&ir_path),
        ..gevod::worker::setup::measuring_setup(&job.spec_path, &arch, libdevice, workers)
    };
    let mut backend = setup.cuda_backend(
        &spec,
        device,
        gevod::config::Prescreen::All,
        Arc::new(AtomicBool::new(false)),
    )?;
    let ir = KernelIr::parse_for_patch(&job.id, job.ir_text.as_bytes(), patch)?;
    let mut c = contrib::analyze(&ir, &mut backend, patch, options)
        .with_context(|| format!("job {}: edit contributions on the GPU", job.id))?;
    eprintln!("gevod: GPU worker restarts: {}", backend.gpu_restarts());
    let sim = Simulated::new(job, &Reader::Caller, &c.patch)?;
    c.attach_relies(sim.relies_on(&c.patch)?);
    Ok(c)
}
