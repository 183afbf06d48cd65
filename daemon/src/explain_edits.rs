//! A job's edit contributions measured on the simulator, in this process,
//! from the job's own spec and IR snapshots (the files may have changed
//! since): each edit alone, without it and the pairs (`contrib::analyze`),
//! then what each edit relies on (`contrib::relies`). `gevod explain-edits`
//! and the daemon's idle work (`serve::explain`) share it; the caller picks
//! the variant and stores the result (`Store::put_contributions`).
//!
//! Only spec launches: a harness spec's variants run the user's program,
//! which this does not (`ExplainError::Harness`). The simulator runs here,
//! not in worker processes: it compiles nothing (no LLVM code generation),
//! and its step budget bounds every run.

use crate::worker::InProcess;
use gevo_ir::{CodegenOptions, IrError, KernelIr, Patch};
use gevo_model::access::Reader;
use gevo_model::assessment::Assessment;
use gevo_model::spec::{self, Spec, SpecError, TestSet, TestTarget};
use gevo_search::contrib::{self, ContribError, Contributions, Options, ReliesOn};
use gevo_search::evolve::{Backend, BackendError, Build, Scope};
use gevo_search::store::JobRecord;
use std::path::PathBuf;

/// Why a job's contributions could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("a temporary directory for the IR snapshot")]
    TempDir(#[source] std::io::Error),
    #[error("writing the IR snapshot")]
    Snapshot(#[source] std::io::Error),
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("job {job}: a harness spec; explain-edits runs spec launches on the simulator only")]
    Harness { job: String },
    #[error(transparent)]
    Ir(#[from] IrError),
    /// The simulator could not be set up for the job's spec.
    #[error("job {job}: the simulator")]
    Simulator {
        job: String,
        #[source]
        source: Box<ContribError>,
    },
    #[error(transparent)]
    Contrib(Box<ContribError>),
    /// The caller's stop was asked between two measured subsets.
    #[error("interrupted")]
    Interrupted,
}

impl From<ContribError> for ExplainError {
    fn from(e: ContribError) -> Self {
        match e {
            ContribError::Backend(BackendError::Interrupted) => ExplainError::Interrupted,
            e => ExplainError::Contrib(Box::new(e)),
        }
    }
}

/// The job's spec and IR from its snapshots, for the simulator.
pub struct Simulated {
    /// Holds the IR snapshot the spec names.
    _dir: tempfile::TempDir,
    job: String,
    spec: Spec,
    ir: KernelIr,
}

impl Simulated {
    /// The job's snapshots, for `patch`'s kernels; the files the spec
    /// names are read for `reader` (the spec's owner, in the daemon).
    pub fn new(job: &JobRecord, reader: &Reader, patch: &Patch) -> Result<Self, ExplainError> {
        let dir = tempfile::tempdir().map_err(ExplainError::TempDir)?;
        let ir_path = dir.path().join("kernel.ll");
        std::fs::write(&ir_path, &job.ir_text).map_err(ExplainError::Snapshot)?;
        let mut spec =
            spec::parse_as(&job.spec_path, &job.spec_text, reader)?.for_backend(TestTarget::Sim);
        if spec.harness.is_some() {
            return Err(ExplainError::Harness {
                job: job.id.clone(),
            });
        }
        spec.ir = ir_path;
        let ir = KernelIr::parse_for_patch(&job.id, job.ir_text.as_bytes(), patch)?;
        Ok(Simulated {
            _dir: dir,
            job: job.id.clone(),
            spec,
            ir,
        })
    }

    /// Each edit alone, without it, and the pairs (`contrib::analyze`).
    /// `stop` is asked before each subset runs: true abandons the
    /// measurement (`ExplainError::Interrupted`).
    pub fn contributions(
        &self,
        patch: &Patch,
        options: &Options,
        libdevice: Option<PathBuf>,
        stop: &dyn Fn() -> bool,
    ) -> Result<Contributions, ExplainError> {
        let codegen = CodegenOptions {
            arch: crate::worker::setup::arch_for(&self.spec, None, None),
            libdevice,
        };
        let inner =
            InProcess::new(self.spec.clone(), codegen).map_err(|e| ExplainError::Simulator {
                job: self.job.clone(),
                source: Box::new(e.into()),
            })?;
        let mut backend = Stoppable { inner, stop };
        Ok(contrib::analyze(&self.ir, &mut backend, patch, options)?)
    }

    /// What each edit relies on (`contrib::relies`).
    pub fn relies_on(&self, patch: &Patch) -> Result<ReliesOn, ExplainError> {
        let evaluator = contrib::relies::evaluator(self.spec.clone(), 1).map_err(|e| {
            ExplainError::Simulator {
                job: self.job.clone(),
                source: Box::new(e),
            }
        })?;
        Ok(contrib::relies::analyze(&self.ir, &evaluator, patch)?)
    }
}

/// The contributions of `patch` (a validated variant's minimized patch)
/// with the relies-on lines attached; `stop` is asked before each measured
/// subset and before the relies-on lines (which run to their end).
pub fn measure(
    job: &JobRecord,
    reader: &Reader,
    patch: &Patch,
    options: &Options,
    libdevice: Option<PathBuf>,
    stop: &dyn Fn() -> bool,
) -> Result<Contributions, ExplainError> {
    let sim = Simulated::new(job, reader, patch)?;
    let mut c = sim.contributions(patch, options, libdevice, stop)?;
    if stop() {
        return Err(ExplainError::Interrupted);
    }
    c.attach_relies(sim.relies_on(&c.patch)?);
    Ok(c)
}

/// How contributions are measured on `backend`: every subset on the
/// simulator (exact and cheap), [`Options::on_gpu`] where each is timed.
pub fn options_for(backend: &dyn Backend) -> Options {
    if backend.scope().backend == "sim" {
        Options::default()
    } else {
        Options::on_gpu()
    }
}

/// The contributions of `patch` measured on `backend`, the one whose search
/// found the variant (`gevod evolve` at the end of its search: a GPU job's
/// on its GPU), with the relies-on lines attached from the simulator (they
/// are correctness facts, not timings).
pub fn on_backend(
    job: &JobRecord,
    ir: &KernelIr,
    backend: &mut dyn Backend,
    patch: &Patch,
    options: &Options,
) -> Result<Contributions, ExplainError> {
    let mut c = contrib::analyze(ir, backend, patch, options)?;
    attach_relies(job, &Reader::Caller, &mut c)?;
    Ok(c)
}

/// Attaches the relies-on lines of `c`'s patch, from the simulator, to
/// contributions measured elsewhere (a GPU's); the files the spec names are
/// read for `reader`.
pub fn attach_relies(
    job: &JobRecord,
    reader: &Reader,
    c: &mut Contributions,
) -> Result<(), ExplainError> {
    let sim = Simulated::new(job, reader, &c.patch)?;
    c.attach_relies(sim.relies_on(&c.patch)?);
    Ok(())
}

/// The in-process simulator, asking `stop` before each variant.
struct Stoppable<'s> {
    inner: InProcess,
    stop: &'s dyn Fn() -> bool,
}

impl Backend for Stoppable<'_> {
    fn scope(&self) -> Scope {
        Backend::scope(&self.inner)
    }

    fn test_set_hash(&self, set: TestSet) -> String {
        self.inner.test_set_hash(set)
    }

    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        self.inner.compile(patches)
    }

    fn stopping(&self) -> bool {
        (self.stop)()
    }

    fn runs_generated(&self) -> bool {
        self.inner.runs_generated()
    }

    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError> {
        patches
            .iter()
            .map(|p| {
                if (self.stop)() {
                    return Err(BackendError::Interrupted);
                }
                self.inner.assess_one(p, set)
            })
            .collect()
    }
}
