//! `gevod evolve` and its hidden worker, `gevod eval-worker`: wiring of the
//! engine, the worker pool and the store, progress on stderr, the report.

use crate::gpu_cli::Evaluators;
use anyhow::{bail, Context as _, Result};
use gevod::cuda::DeviceInfo;
use gevod::evolve::{Backend, Config, Engine, GenerationReport, Scope, Validated};
use gevod::harness::Runner;
use gevod::ir::{content_hash, CodegenOptions, KernelIr};
use gevod::spec::{self, Spec};
use gevod::store::{JobRecord, Store};
use gevod::worker::pool::WorkerPool;
use gevod::worker::{self, Fault, Handler, InProcess};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Exit status after Ctrl-C or SIGTERM: the checkpoint is safe, the run is
/// not finished (128 + SIGINT, as shells report an interrupted command).
pub const INTERRUPTED_EXIT: i32 = 130;

pub struct EvolveArgs {
    pub spec: PathBuf,
    pub seed: u64,
    pub budget: Budget,
    pub state: PathBuf,
    pub resume: bool,
    pub json: bool,
    pub config: Option<PathBuf>,
    pub workers: Option<usize>,
    pub libdevice: Option<PathBuf>,
    pub arch: Option<String>,
    pub worker_timeout: Duration,
    /// The GPU to evaluate on; the simulator when `None`.
    pub device: Option<DeviceInfo>,
    /// GPU only: screen variants on the simulator first.
    pub prescreen: bool,
}

/// When the search stops. Generations and evaluations count the whole job,
/// so a resumed run continues toward the same goal.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// Generations after the initial population.
    Generations(u64),
    /// Evaluations (cache hits included), checked between generations.
    Evaluations(u64),
    /// Wall time of this process, checked between generations.
    Time(Duration),
}

/// `--config FILE`: an `[evolve]` table with the search parameters.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    evolve: Config,
}

fn read_config(path: Option<&Path>) -> Result<Config> {
    let Some(path) = path else {
        return Ok(Config::default());
    };
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let file: ConfigFile = gevod::serve::config::parse_toml(path, &text)?;
    file.evolve
        .validate()
        .map_err(|e| anyhow::anyhow!("{}: [evolve] {e}", path.display()))?;
    Ok(file.evolve)
}

/// The hidden worker: loads the spec, greets, answers requests on stdio.
/// Where a harness program's kernel launches run.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HarnessTarget {
    Sim,
    Gpu,
}

/// `UID:GID`.
pub fn parse_uid_gid(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("expected UID:GID, not {s:?}");
    let (u, g) = s.split_once(':').ok_or_else(bad)?;
    Ok((u.parse().map_err(|_| bad())?, g.parse().map_err(|_| bad())?))
}

/// How an eval-worker runs a harness spec's command.
pub struct HarnessWorker {
    pub target: HarnessTarget,
    /// The GPU's UUID (`--harness gpu`).
    pub device: Option<String>,
    /// UID and GID the command runs as.
    pub run_as: Option<(u32, u32)>,
}

/// The harness runner of a worker: the simulator runs launches through this
/// very binary (`gevod sim-launch`).
pub fn harness_runner(target: HarnessTarget, device: Option<String>) -> Result<Runner, String> {
    Ok(match target {
        HarnessTarget::Sim => Runner::Simulate {
            gevod: std::env::current_exe()
                .map_err(|e| format!("locating the gevod binary: {e}"))?,
        },
        HarnessTarget::Gpu => Runner::Gpu { device },
    })
}

pub fn eval_worker(
    spec: &Path,
    ir: Option<&Path>,
    arch: Option<String>,
    libdevice: Option<PathBuf>,
    harness: Option<HarnessWorker>,
) -> Result<()> {
    let fault = match std::env::var("GEVOD_WORKER_FAULT") {
        Ok(v) => Some(
            v.parse::<Fault>()
                .map_err(|e| anyhow::anyhow!("GEVOD_WORKER_FAULT: {e}"))?,
        ),
        Err(_) => None,
    };
    let mut backend = crate::gpu_cli::load_worker_spec(spec, ir)
        .map_err(|e| e.to_string())
        .and_then(|spec| {
            let arch = crate::gpu_cli::arch_for(&spec, arch, None);
            let codegen = CodegenOptions { arch, libdevice };
            match harness {
                None => InProcess::new(spec, codegen).map_err(|e| e.to_string()),
                Some(h) => {
                    let runner = harness_runner(h.target, h.device)?;
                    InProcess::harness(spec, codegen, runner, h.run_as).map_err(|e| e.to_string())
                }
            }
        });
    let handler: Result<&mut dyn Handler, String> = match &mut backend {
        Ok(b) => Ok(b),
        Err(e) => Err(e.clone()),
    };
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    worker::serve(handler, fault, stdin, stdout).context("worker I/O")
}

/// Runs the search; returns the process exit status.
pub fn evolve(args: EvolveArgs) -> Result<i32> {
    let spec = spec::load(&args.spec)?;
    let config = read_config(args.config.as_deref())?;
    let ir = KernelIr::load(&spec.ir, Some(&spec.kernel))
        .with_context(|| args.spec.display().to_string())?;
    let arch = crate::gpu_cli::arch_for(&spec, args.arch.clone(), args.device.as_ref());
    let setup = crate::gpu_cli::WorkerSetup {
        spec_path: &args.spec,
        ir: None,
        arch: &arch,
        libdevice: args.libdevice.as_deref(),
        workers: args.workers.unwrap_or_else(crate::default_workers),
        timeout: args.worker_timeout,
    };
    // Harness commands run as the invoking user: it is their own spec.
    let evaluators = setup.evaluators(&spec, args.device.as_ref(), None)?;
    let scope = evaluators.scope();
    let job = job_record(&args, &spec, &ir, &scope, &config);

    let store = Store::open(&args.state)?;
    let mut engine = match (store.job(&job.id)?, args.resume) {
        (Some(_), true) => store.checkpoint(&job.id)?.with_context(|| {
            format!(
                "{}: job {} has no checkpoint",
                store.path().display(),
                job.id
            )
        })?,
        (Some(_), false) => bail!(
            "{}: job {} already has a checkpoint; pass --resume to continue it, or another --state",
            store.path().display(),
            job.id
        ),
        (None, _) => {
            let engine = Engine::new(config, args.seed)?;
            store.create_job(&job, &engine)?;
            engine
        }
    };

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).context("installing signal handlers")?;
    }
    let started = Instant::now();
    let mut backend: Box<dyn Backend> = match evaluators {
        Evaluators::Pool(options, scope) => Box::new(
            WorkerPool::start(options, &spec, scope, stop.clone())
                .with_context(|| args.spec.display().to_string())?,
        ),
        Evaluators::Gpu(device) => {
            Box::new(setup.cuda_backend(&spec, device, args.prescreen, stop.clone())?)
        }
    };
    let mut progress = Progress::new(started, engine.counters().evaluations);
    let mut interrupted = false;
    while !budget_met(&engine, args.budget, started) {
        match engine.step(&ir, backend.as_mut()) {
            Ok(report) => {
                store.commit_generation(&job.id, &engine, &report)?;
                progress.generation(&engine, &report);
            }
            Err(gevod::evolve::EvolveError::Backend(gevod::evolve::BackendError::Interrupted)) => {
                interrupted = true;
                break;
            }
            Err(e) => return Err(e).with_context(|| args.spec.display().to_string()),
        }
    }
    let respawns = backend.respawns();
    drop(backend);
    progress.finish();
    let out_dir = args.state.join(&job.id);
    let exported = export_best(&engine, &out_dir)?;
    let report = Report {
        job: &job,
        engine: &engine,
        exported: exported.as_ref(),
        state: &args.state,
        rate: progress.rate(),
        respawns,
        interrupted,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.json())?);
    } else {
        print!("{}", report.text());
    }
    Ok(if interrupted { INTERRUPTED_EXIT } else { 0 })
}

fn job_record(
    args: &EvolveArgs,
    spec: &Spec,
    ir: &KernelIr,
    scope: &Scope,
    config: &Config,
) -> JobRecord {
    let spec_hash = spec.content_hash();
    let identity = serde_json::json!({
        "spec": spec_hash, "ir": ir.ir_hash(), "scope": scope,
        "seed": args.seed, "config": config,
    });
    let stem = args
        .spec
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| n.trim_end_matches(".toml").trim_end_matches(".gevo"))
        .unwrap_or("kernel");
    let id = format!(
        "{stem}-{}",
        &content_hash(identity.to_string().as_bytes())[..12]
    );
    JobRecord {
        id,
        spec_path: args.spec.clone(),
        spec_hash,
        spec_text: spec.text().to_string(),
        ir_hash: ir.ir_hash().to_string(),
        ir_text: ir.text().to_string(),
        backend: scope.backend.clone(),
        target: scope.target.clone(),
        seed: args.seed,
    }
}

fn budget_met(engine: &Engine, budget: Budget, started: Instant) -> bool {
    match budget {
        // Generation 0 is the initial population.
        Budget::Generations(n) => engine.generations() > n,
        Budget::Evaluations(n) => engine.counters().evaluations >= n,
        Budget::Time(t) => started.elapsed() >= t,
    }
}

struct Exported {
    ptx: PathBuf,
    patch: PathBuf,
    minimized: PathBuf,
}

/// Writes the best validated variant's PTX and patches (atomically).
fn export_best(engine: &Engine, dir: &Path) -> Result<Option<Exported>> {
    let Some(best) = engine.best_validated() else {
        return Ok(None);
    };
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    let files = Exported {
        ptx: dir.join("best.ptx"),
        patch: dir.join("best.patch.json"),
        minimized: dir.join("best.min.patch.json"),
    };
    crate::write_output(Some(&files.ptx), &best.ptx)?;
    crate::write_output(Some(&files.patch), &(best.patch.to_json() + "\n"))?;
    crate::write_output(Some(&files.minimized), &(best.minimized.to_json() + "\n"))?;
    Ok(Some(files))
}

/// One line per generation on stderr; redrawn in place on a terminal.
struct Progress {
    started: Instant,
    evaluations_at_start: u64,
    evaluations: u64,
    terminal: bool,
    drawn: bool,
}

impl Progress {
    fn new(started: Instant, evaluations_at_start: u64) -> Self {
        Progress {
            started,
            evaluations_at_start,
            evaluations: evaluations_at_start,
            terminal: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    fn rate(&self) -> f64 {
        (self.evaluations - self.evaluations_at_start) as f64
            / self.started.elapsed().as_secs_f64().max(1e-9)
    }

    fn generation(&mut self, engine: &Engine, report: &GenerationReport) {
        let c = engine.counters();
        self.evaluations = c.evaluations;
        let best = report
            .best_cost
            .map_or("-".to_string(), |b| format!("{b:.4}"));
        let line = format!(
            "generation {:>3} | evaluations {:>6} | valid {:>5.1}% | best cost {best} | cache hits {:>5.1}% | {:.1} eval/s | validated {}",
            report.generation,
            c.evaluations,
            100.0 * c.valid_share(),
            100.0 * c.cache_hit_rate(),
            self.rate(),
            engine.validated().len(),
        );
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{line}");
            self.drawn = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    fn finish(&self) {
        if self.drawn {
            eprintln!();
        }
    }
}

struct Report<'a> {
    job: &'a JobRecord,
    engine: &'a Engine,
    exported: Option<&'a Exported>,
    state: &'a Path,
    rate: f64,
    /// Worker processes replaced in this run.
    respawns: u64,
    interrupted: bool,
}

impl Report<'_> {
    fn best(&self) -> Option<&Validated> {
        self.engine.best_validated()
    }

    fn text(&self) -> String {
        let e = self.engine;
        let c = e.counters();
        let mut out = format!(
            "job {} ({} on {}, seed {}), state {}\n",
            self.job.id,
            self.job.backend,
            self.job.target,
            self.job.seed,
            self.state.display()
        );
        if self.interrupted {
            out += &format!(
                "interrupted: the checkpoint holds {} generations; continue with --resume\n",
                e.generations()
            );
        }
        out += &format!(
            "generations {}, evaluations {} ({:.1}% from the cache), valid {:.1}%, {:.1} evaluations/s, {} worker respawns\n\n",
            e.generations().saturating_sub(1),
            c.evaluations,
            100.0 * c.cache_hit_rate(),
            100.0 * c.valid_share(),
            self.rate,
            self.respawns
        );
        match (self.best(), self.exported) {
            (Some(v), Some(files)) => {
                out += &format!(
                    "best validated variant (generation {}): speedup {:.4}x, interval [{:.4}, {:.4}]\n",
                    v.generation, v.speedup, v.interval.0, v.interval.1
                );
                out += &format!(
                    "  edits: {} as found, {} after minimization\n  held-out tests:\n",
                    v.patch.edits.len(),
                    v.minimized.edits.len()
                );
                for t in &v.heldout {
                    let ratio = t.cost.map_or("-".into(), |c| {
                        format!("{:.4}", c as f64 / t.original_cost.max(1) as f64)
                    });
                    let verdict = t.failure.as_ref().map_or("pass", |f| f.0.as_str());
                    out += &format!("    {:<12} {verdict:<8} cost ratio {ratio}\n", t.test);
                }
                for e in &v.minimized.edits {
                    out += &format!("  edit: {e}\n");
                }
                out += &format!(
                    "  PTX:             {}\n  patch:           {}\n  minimized patch: {}\n",
                    files.ptx.display(),
                    files.patch.display(),
                    files.minimized.display()
                );
            }
            _ => out += "no validated variant yet\n",
        }
        let failures = e.promotion_failures();
        if !failures.is_empty() {
            out += &format!(
                "\nheld-out rejections: {} (train-best variants that failed the held-out tests)\n",
                failures.len()
            );
            for f in failures.iter().rev().take(3) {
                out += &format!(
                    "  generation {}, train cost {:.4}: {}\n",
                    f.generation, f.train_cost, f.reason
                );
            }
        }
        out += "\nPareto front (train cost ratio vs error):\n  cost ratio        error  edits\n";
        for m in e.archive() {
            if let Some((cost, error)) = m.outcome.objectives() {
                out += &format!(
                    "  {cost:>10.4}  {error:>11.3e}  {:>5}\n",
                    m.patch.edits.len()
                );
            }
        }
        out
    }

    fn json(&self) -> serde_json::Value {
        let e = self.engine;
        let c = e.counters();
        let best = self.best().zip(self.exported).map(|(v, files)| {
            serde_json::json!({
                "generation": v.generation,
                "speedup": v.speedup,
                "interval": [v.interval.0, v.interval.1],
                "train_cost": v.train_cost,
                "edits_before": v.patch.edits.len(),
                "edits_after": v.minimized.edits.len(),
                "heldout": v.heldout,
                "ptx_hash": v.ptx_hash,
                "ptx": files.ptx,
                "patch": files.patch,
                "minimized_patch": files.minimized,
            })
        });
        let pareto: Vec<_> = e
            .archive()
            .iter()
            .filter_map(|m| {
                m.outcome.objectives().map(|(cost, error)| {
                    serde_json::json!({"cost": cost, "error": error, "edits": m.patch.edits.len()})
                })
            })
            .collect();
        serde_json::json!({
            "job": self.job.id,
            "spec": self.job.spec_path,
            "backend": self.job.backend,
            "target": self.job.target,
            "seed": self.job.seed,
            "state": self.state,
            "interrupted": self.interrupted,
            "generations": e.generations().saturating_sub(1),
            "evaluations": c.evaluations,
            "cache_hits": c.cache_hits,
            "cache_hit_rate": c.cache_hit_rate(),
            "valid_share": c.valid_share(),
            "evaluations_per_second": self.rate,
            "worker_respawns": self.respawns,
            "best_cost": e.best_cost(),
            "validated": e.validated().len(),
            "best": best,
            "promotion_failures": e.promotion_failures().iter().map(|f| serde_json::json!({
                "generation": f.generation, "train_cost": f.train_cost, "reason": f.reason,
            })).collect::<Vec<_>>(),
            "pareto": pareto,
            "counters": c,
        })
    }
}
