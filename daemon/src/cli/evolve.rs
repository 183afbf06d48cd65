//! `gevod evolve`: the engine, its workers and the store wired for one
//! spec, generation by generation until the budget is spent or a signal
//! stops it; the best validated variant exported; the report printed.

use super::output::{default_workers, read_patch, write_output};
use super::report::{Progress, Report};
use super::{evolve_tune, resolve, BackendChoice};
use anyhow::{bail, Context as _, Result};
use gevo_ir::{KernelIr, Patch};
use gevo_model::access::Reader;
use gevo_model::device::{DeviceInfo, DeviceSelector};
use gevo_model::ranges::Invalid;
use gevo_model::spec;
use gevo_search::contrib::Contributions;
use gevo_search::drive::{export_to, Driver, Ended, Identity, Limits, Publish, Start};
use gevo_search::evolve::{Backend, BackendError, Engine, GenerationReport, Validated};
use gevo_search::store::{JobRecord, Store};
use gevod::config::{parse_duration, ranges, EvolveFile, LauncherKind, Prescreen};
use gevod::cuda::driver;
use gevod::cuda::measure::Measurement;
use gevod::worker::sanitize::SanitizeMode;
use gevod::worker::setup::{arch_for, SetupError, WorkerSetup};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Exit status after Ctrl-C or SIGTERM: the checkpoint is safe, the run is
/// not finished (128 + SIGINT, as shells report an interrupted command).
const INTERRUPTED_EXIT: i32 = 130;

#[derive(clap::Args)]
pub struct EvolveArgs {
    spec: PathBuf,
    /// auto: the GPU when one is present, else the simulator.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendChoice,
    /// GPU by ordinal or UUID (GPU-...).
    #[arg(long, default_value = "0")]
    device: DeviceSelector,
    /// Several GPUs behind this one search, a GPU worker each: `all`, or
    /// ordinals and UUIDs separated by commas (`0,1`; `0,0`: two workers
    /// on one GPU). They must be the same model; held-out measurements for
    /// promotion run on the first.
    #[arg(long, conflicts_with = "device")]
    devices: Option<String>,
    /// GPU only: which of the simulator's train tests (least input first)
    /// each new variant runs on before it may cost GPU time; promotion's
    /// variants run on all of them unless off [default: all]
    #[arg(long, value_enum, value_name = "PLACEMENT")]
    prescreen: Option<Prescreen>,
    /// GPU only: `--prescreen off`.
    #[arg(long, conflicts_with = "prescreen")]
    no_prescreen: bool,
    /// GPU only: run each variant about to be validated once under
    /// compute-sanitizer (memcheck, racecheck, synccheck) on the smallest
    /// held-out test; auto: when compute-sanitizer is found.
    #[arg(long, value_enum, default_value = "auto")]
    sanitize: SanitizeMode,
    /// GPU only: how new variants are timed on the train tests. adaptive:
    /// in batches of rounds, stopping once a variant is confidently no
    /// better than the selection threshold; fixed: the full rounds each.
    #[arg(long, value_enum, default_value = "adaptive")]
    measurement: Measurement,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A patch the initial population starts with (repeatable): your own
    /// idea, or an earlier search's winner.
    #[arg(long, value_name = "PATCH")]
    start_from: Vec<PathBuf>,
    /// Stop after N generations past the initial population (for the whole job).
    #[arg(long, group = "budget")]
    generations: Option<u64>,
    /// Stop once N variants were evaluated (for the whole job; checked between generations).
    #[arg(long, group = "budget")]
    evaluations: Option<u64>,
    /// Stop after this much wall time in this run (90s, 10m, 2h).
    #[arg(long, group = "budget", value_parser = parse_duration)]
    time: Option<Duration>,
    /// State directory holding gevod.redb and the exported best variant.
    #[arg(long, default_value = ".gevo-state")]
    state: PathBuf,
    /// Continue the job's checkpoint (starts it when there is none).
    #[arg(long)]
    resume: bool,
    /// Start from random individuals even when the state holds a search
    /// of an earlier version of this spec's kernel (other IR), whose
    /// patches would otherwise be carried over as seeds.
    #[arg(long)]
    fresh: bool,
    #[arg(long)]
    json: bool,
    /// Skip measuring the best variant's edit contributions at the end of
    /// the search (on the search's own backend: the GPU for a GPU job).
    #[arg(long)]
    no_explain: bool,
    /// A spec with [tune]: after the search, carry the best variant's edits
    /// to this many of the next-fastest configurations and measure them
    /// there (0: none).
    #[arg(long, default_value_t = 3)]
    carry: usize,
    /// TOML file with an [evolve] table of search parameters.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Evaluation worker processes (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Target arch (default: the spec's, else sm_90).
    #[arg(long)]
    arch: Option<String>,
    #[arg(long, env = "GEVO_LIBDEVICE")]
    libdevice: Option<PathBuf>,
    /// Seconds one compile or one variant's test run may take before its worker is killed.
    #[arg(long, default_value_t = 120.0)]
    worker_timeout: f64,
    /// Run each worker as a Slurm job step (`srun`) in the allocation this
    /// command runs in (inside `salloc` or an `sbatch` script).
    #[arg(long)]
    slurm: bool,
    /// An extra argument for every worker's `srun` (repeatable), e.g.
    /// `--srun-arg=--partition=gpu`.
    #[arg(long = "srun-arg", allow_hyphen_values = true, requires = "slurm")]
    srun_args: Vec<String>,
    /// GPU backend under --slurm: this many GPU workers, each a step with
    /// one GPU.
    #[arg(long, requires = "slurm")]
    gpu_steps: Option<usize>,
}

impl EvolveArgs {
    /// When the search stops: generations and evaluations count the whole
    /// job, so that a resumed run continues toward the same goal; time
    /// counts this run from `started`. One of them (clap's `budget` group),
    /// 10 generations when none is given.
    fn limits(&self, started: Instant) -> Limits {
        let generations = match (self.evaluations, self.time) {
            (None, None) => Some(self.generations.unwrap_or(10)),
            _ => None,
        };
        Limits {
            generations,
            evaluations: self.evaluations,
            deadline: self.time.map(|t| started + t),
        }
    }

    /// The GPU the search measures on (none: the simulator), and the
    /// further GPUs `--devices` puts behind it.
    fn devices(&self) -> Result<(Option<DeviceInfo>, Vec<DeviceInfo>)> {
        let Some(list) = &self.devices else {
            return Ok((resolve(self.backend, &self.device)?, Vec::new()));
        };
        if self.backend == BackendChoice::Sim {
            bail!("--devices needs a GPU backend, not --backend sim");
        }
        let mut devices = if list.trim() == "all" {
            driver::probe_all().context("--devices all")?
        } else {
            list.split(',')
                .map(|d| {
                    let selector: DeviceSelector = d
                        .trim()
                        .parse()
                        .map_err(|e| anyhow::anyhow!("--devices: {d:?}: {e}"))?;
                    driver::probe(&selector).with_context(|| format!("--devices: {d}"))
                })
                .collect::<Result<Vec<_>>>()?
        };
        if devices.is_empty() {
            bail!("--devices {list}: no GPU found");
        }
        let first = devices.remove(0);
        Ok((Some(first), devices))
    }

    /// The flags that have a config key's range, checked against it.
    fn check_ranges(&self) -> Result<Duration, Invalid> {
        if let Some(n) = self.workers {
            ranges::WORKERS_FLAG.check(n)?;
        }
        if let Some(n) = self.gpu_steps {
            ranges::GPU_STEPS.check_as("--gpu-steps", n)?;
        }
        let seconds = self.worker_timeout;
        Duration::try_from_secs_f64(seconds)
            .ok()
            .and_then(|d| ranges::WORKER_TIMEOUT.check(d).ok())
            .ok_or_else(|| {
                let range = ranges::WORKER_TIMEOUT.text();
                Invalid::new(
                    "--worker-timeout",
                    format!("{seconds} s is out of range ({range})"),
                )
            })
    }

    /// Runs the search; returns the process exit status.
    pub fn run(self) -> Result<i32> {
        // From the start: building a large initial population takes
        // minutes, and a signal must end that too.
        let stop = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, stop.clone())
                .context("installing signal handlers")?;
        }
        let worker_timeout = self.check_ranges()?;
        let (device, more_devices) = self.devices()?;
        let tuned = spec::load(&self.spec)?;
        let file = match &self.config {
            Some(path) => EvolveFile::load(path)?,
            None => EvolveFile::default(),
        };
        let config = file.evolve;
        let mut cluster = file.cluster;
        if self.slurm {
            cluster.launcher = LauncherKind::Slurm;
            cluster.srun_args.extend(self.srun_args.iter().cloned());
        }
        if let Some(n) = self.gpu_steps {
            cluster.gpu_steps = n;
        }
        let launcher = gevod::worker::launch::Launcher::from(&cluster);
        let arch = arch_for(&tuned, self.arch.clone(), device.as_ref());
        let mut setup = WorkerSetup {
            spec_path: &self.spec,
            spec_text: None,
            ir: None,
            arch: &arch,
            libdevice: self.libdevice.as_deref(),
            workers: self
                .workers
                .unwrap_or_else(|| default_workers().min(ranges::WORKERS_FLAG.max)),
            reader: &Reader::Caller,
            timeout: worker_timeout,
            sanitize: self.sanitize,
            measurement: self.measurement,
            launcher: &launcher,
            cpu: gevod::config::CpuPriority::Normal,
            more_devices: &more_devices,
            prescreen: match self.no_prescreen {
                true => Prescreen::Off,
                false => self.prescreen.unwrap_or_default(),
            },
            // Harness commands run as the invoking user: it is their own spec.
            harness_user: None,
        };
        let store = Store::open(&self.state)?;
        // A spec with [tune] and no configuration chosen: the sweep picks one.
        let timer = evolve_tune::timer(&setup, device.as_ref());
        let chosen = match &tuned.tune {
            Some(t) if !t.chosen_written => Some(evolve_tune::choose(
                &self.spec,
                &tuned,
                &timer,
                &store,
                &self.state,
            )?),
            _ => None,
        };
        let spec = chosen
            .as_ref()
            .map_or_else(|| tuned.clone(), |c| c.spec.clone());
        setup.spec_text = chosen.as_ref().map(|c| c.text_file.as_path());
        let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels)
            .with_context(|| self.spec.display().to_string())?;
        let start: Vec<Patch> = self
            .start_from
            .iter()
            .map(|path| {
                let patch = read_patch(path)?;
                ir.check(&patch)
                    .with_context(|| format!("--start-from {}", path.display()))?;
                Ok(patch)
            })
            .collect::<Result<_>>()?;
        let evaluators = setup.evaluators(&spec, device.as_ref())?;
        let job = Identity {
            spec_path: &self.spec,
            spec: &spec,
            ir: &ir,
            scope: &evaluators.scope(),
            config: &config,
            seed: self.seed,
            start: &start,
        }
        .record();

        let mut driver = match (store.job(&job.id)?, self.resume) {
            (Some(_), true) => Driver::resume(&store, &job.id, ir)?,
            (Some(_), false) => bail!(
                "{}: job {} already has a checkpoint; pass --resume to continue it, or another --state",
                store.path().display(),
                job.id
            ),
            (None, _) => {
                let start = Start {
                    config,
                    seed: self.seed,
                    patches: start,
                    fresh: self.fresh,
                };
                let (driver, origin) = Driver::create(&store, &job, ir, start)?;
                if let Some(origin) = origin {
                    eprintln!(
                        "seeded from job {}: {} patch(es) carried over, {} edit(s) kept, {} dropped",
                        origin.info.job,
                        origin.info.patches,
                        origin.info.kept,
                        origin.info.dropped
                    );
                }
                driver
            }
        };
        if let Some(c) = &chosen {
            store.put_setting(&gevod::tune::job_sweep_key(&job.id), &c.sweep)?;
        }
        let origin: Option<gevo_search::store::Origin> =
            store.setting(&gevo_search::seed::origin_key(&job.id))?;

        let started = Instant::now();
        let limits = self.limits(started);
        let stopped = || stop.load(Ordering::Relaxed);
        // The initial population is built before the workers start, asking
        // the signal flag and the time budget between individuals.
        let built = driver
            .prepare(&|| stopped() || limits.time_up())
            .with_context(|| self.spec.display().to_string())?;
        let mut progress = Progress::new(started, driver.engine().counters().evaluations);
        let mut interrupted = !built && stopped();
        let mut backend = None;
        if built {
            match setup.start(evaluators, &spec, stop.clone()) {
                Ok(b) => backend = Some(b),
                Err(SetupError::Backend {
                    source: BackendError::Interrupted,
                    ..
                }) => interrupted = true,
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(backend) = backend.as_mut() {
            let ended = driver
                .run(&store, backend.as_mut(), &limits, &stop, &mut progress)
                .with_context(|| self.spec.display().to_string())?;
            interrupted = matches!(ended, Ended::Stopped | Ended::Interrupted);
        }
        let contributions = match (backend.as_mut(), driver.engine().best_validated()) {
            // A harness spec's subsets would each run the user's program.
            (Some(backend), Some(best))
                if !interrupted && !self.no_explain && spec.harness.is_none() =>
            {
                explain_best(&store, &job, driver.ir(), backend.as_mut(), best)
            }
            _ => None,
        };
        let respawns = backend.as_ref().map_or(0, |b| b.respawns());
        let gate = backend.as_ref().and_then(|b| b.safety_gate());
        drop(backend);
        // The best patch on the next-fastest configurations (their own
        // workers, once the search's are gone).
        let carried = match (&chosen, driver.engine().best_validated()) {
            (Some(c), Some(best)) if !interrupted && self.carry > 0 => evolve_tune::carry(
                &self.spec,
                &tuned,
                c,
                driver.ir(),
                &best.minimized,
                &timer,
                self.carry,
            ),
            _ => Vec::new(),
        };
        progress.finish();
        let engine = driver.engine();
        let job_dir = self.state.join(&job.id);
        let exported = match engine.best_validated() {
            Some(best) => Some(export_to(&job_dir, best)?),
            None => None,
        };
        let edits = match engine.best_validated() {
            Some(best) => {
                let mut files = gevod::report::edits::files_near(&self.spec, &spec.ir);
                Some(gevod::report::edits::text(
                    driver.ir(),
                    &best.minimized,
                    &mut files,
                    "    ",
                )?)
            }
            None => None,
        };
        std::fs::create_dir_all(&job_dir).with_context(|| job_dir.display().to_string())?;
        let html_path = job_dir.join("report.html");
        let data = gevod::report::gather(&store, &job.id, gevo_model::access::Reader::Caller)?;
        write_output(Some(&html_path), &gevod::report::render(&data))?;
        let report = Report {
            job: &job,
            engine,
            exported: exported.as_ref(),
            edits: edits.as_deref(),
            html: &html_path,
            state: &self.state,
            progress: &progress,
            respawns,
            gate,
            interrupted,
            origin: origin.as_ref(),
            gathered: &data,
            contributions: contributions.as_ref(),
            tuned: chosen.as_ref().map(|c| &c.sweep),
            carried: &carried,
        };
        if self.json {
            println!("{}", serde_json::to_string_pretty(&report.json())?);
        } else {
            print!("{}", gevo_client::text::escape_terminal(&report.text()));
        }
        Ok(if interrupted { INTERRUPTED_EXIT } else { 0 })
    }
}

/// The progress line per generation; the export and the report come once,
/// at the end.
impl Publish for Progress {
    fn committed(&mut self, engine: &Engine, report: &GenerationReport, _done: bool) {
        self.generation(engine, report);
    }
    fn new_best(&mut self, _engine: &Engine, _best: &Validated) {}
}

/// The best variant's edit contributions, measured on the search's own
/// backend and stored beside it (the report and `--json` show them); a
/// harness spec or a failed measurement leaves none, with a warning.
fn explain_best(
    store: &Store,
    job: &JobRecord,
    ir: &KernelIr,
    backend: &mut dyn Backend,
    best: &Validated,
) -> Option<Contributions> {
    let edits = best.minimized.edits.len();
    tracing::info!(job = %job.id, edits, backend = %backend.scope().backend, "measuring edit contributions");
    let options = gevod::explain_edits::options_for(backend);
    let measured = gevod::explain_edits::on_backend(job, ir, backend, &best.minimized, &options);
    let c = match measured {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(job = %job.id, error = %e, "edit contributions not measured");
            return None;
        }
    };
    if let Err(e) = store.put_contributions(&job.id, &best.ptx_hash, &c) {
        tracing::warn!(job = %job.id, error = %e, "edit contributions not stored");
    }
    Some(c)
}
