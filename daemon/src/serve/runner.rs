//! A slot's runner thread: takes the job the scheduler picks, starts its
//! backend (worker processes), drives it (`gevo_search::drive`: a generation at a
//! time, each committed) for one slice, publishing each generation to the
//! registry and exporting each new best, and gives the slot back.
//! Consecutive slices of the same job reuse the driver and the workers.
//! Between slices, and while it has no job to run, it queues best
//! variants for the explainer thread (`super::explain`).

use super::explain;
use super::registry::JobEntry;
use super::scan::{best_record, unix_now};
use super::{BackendFactory, ServeConfig, Shared};
use crate::worker::setup::WorkerSetup;
use gevo_client::proto::Best;
use gevo_ir::KernelIr;
use gevo_model::access::Reader;
use gevo_search::drive::{Driver, Ended, Limits, Publish};
use gevo_search::evolve::{Backend, Engine, GenerationReport, Validated};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The job a runner holds between slices.
struct Current {
    driver: Driver,
    backend: Box<dyn Backend>,
}

pub fn run(shared: &Shared, slot: usize, factory: &dyn BackendFactory) {
    let mut current: Option<Current> = None;
    loop {
        let Some(id) = next_job(shared, slot, &mut current) else {
            return;
        };
        shared.slots[slot].stop.store(false, Ordering::Relaxed);
        let started = Instant::now();
        let span = tracing::info_span!("job", id = %id);
        let _enter = span.enter();
        if current.as_ref().is_none_or(|c| c.driver.id() != id) {
            current = None; // stops the previous job's workers
            let workers = job_workers(&shared.config());
            if super::tuned::sweep_first(shared, slot, &id, factory, workers) {
                release(shared, slot, &id, started.elapsed());
                continue;
            }
            match start(shared, slot, &id, factory) {
                Ok(c) => current = Some(c),
                Err(message) => {
                    // Told to stop while starting (busy GPU, pause, shutdown)
                    // is not the job's fault.
                    let stopped = shared.slots[slot].stop.load(Ordering::Relaxed);
                    if !stopped {
                        tracing::error!(%message, "job cannot start");
                    }
                    let mut registry = shared.registry();
                    registry.slots[slot].release(Instant::now());
                    if let Some(job) = registry.jobs.get_mut(&id) {
                        if !stopped {
                            job.error = Some(message);
                        }
                        job.running_on = None;
                    }
                    continue;
                }
            }
        }
        let best_before = best_hash(shared, &id);
        let held = current.as_mut().expect("started above");
        let ended = slice(shared, slot, held);
        // A GPU job's best explained on its GPU, in its own time.
        if matches!(ended, Some(Ended::TimeUp | Ended::Done)) {
            super::explain_slot::measure(shared, &id, held.driver.ir(), held.backend.as_mut());
        }
        if !matches!(ended, Some(Ended::TimeUp | Ended::Stopped)) {
            current = None;
        }
        release(shared, slot, &id, started.elapsed());
        // The job's low-priority work, for the explainer thread.
        let why = match ended {
            Some(Ended::Done) => Some(explain::Why::Ended),
            Some(Ended::TimeUp)
                if best_before.is_some() && best_hash(shared, &id) == best_before =>
            {
                Some(explain::Why::Settled)
            }
            _ => None,
        };
        if let Some(why) = why.filter(|_| shared.config().jobs.explain_edits) {
            explain::enqueue(shared, &id, why);
        }
    }
}

/// The job's best validated variant's PTX hash, in the registry.
fn best_hash(shared: &Shared, id: &str) -> Option<String> {
    let registry = shared.registry();
    let (v, _) = registry.jobs.get(id)?.best.as_ref()?;
    Some(v.ptx_hash.clone())
}

/// The runner gives the slot and the job back, the job charged `took`.
fn release(shared: &Shared, slot: usize, id: &str, took: Duration) {
    let config = shared.config();
    let mut registry = shared.registry();
    registry.slots[slot].release(Instant::now());
    if let Some(job) = registry.jobs.get_mut(id) {
        job.running_on = None;
        charge_entry(job, took, &config);
    }
}

/// A job's virtual time advances by `took` over its weight, from its
/// progress as of the slice's end (`sched::share`).
fn charge_entry(job: &mut JobEntry, took: Duration, config: &ServeConfig) {
    let weight = job.share(&config.schedule).weight;
    job.vtime = crate::sched::charge(job.vtime, took, weight);
}

/// Waits for a job to run on `slot`; `None` at shutdown. Drops the held
/// job's workers while there is nothing to run, so an idle daemon holds no
/// GPU memory.
fn next_job(shared: &Shared, slot: usize, current: &mut Option<Current>) -> Option<String> {
    let mut registry = shared.registry();
    loop {
        if shared.shutdown.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(id) = registry.pick(slot) {
            registry.jobs.get_mut(&id).expect("picked").running_on = Some(slot);
            registry.slots[slot].hold(Instant::now());
            return Some(id);
        }
        if current.is_some() {
            drop(registry);
            *current = None;
            registry = shared.registry();
            continue;
        }
        // Nothing to run: a best not explained yet goes to the explainer.
        if registry.slots[slot].open && shared.config().jobs.explain_edits {
            drop(registry);
            if let Some(id) = explain::idle_candidate(shared) {
                explain::enqueue(shared, &id, explain::Why::Idle);
            }
            registry = shared.registry();
        }
        registry = shared
            .wake
            .wait_timeout(registry, Duration::from_millis(500))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

fn start(
    shared: &Shared,
    slot: usize,
    id: &str,
    factory: &dyn BackendFactory,
) -> Result<Current, String> {
    let (record, snapshot, root) = {
        let registry = shared.registry();
        let job = registry.jobs.get(id).ok_or("the job is gone")?;
        (
            job.record.clone(),
            job.ir_snapshot.clone(),
            job.daemon.root.clone(),
        )
    };
    let reader = Reader::for_spec(&record.spec_path, &root).map_err(|e| e.to_string())?;
    let mut spec = gevo_model::spec::parse_as(&record.spec_path, &record.spec_text, &reader)
        .map_err(|e| e.to_string())?;
    spec.ir = snapshot.clone();
    // The workers read the spec text the daemon checked, never the path.
    super::scan::write_spec_snapshot(&snapshot, &record.spec_text, shared.readers)?;
    let config = shared.config();
    let workers = job_workers(&config);
    // Once per job, for the job view: promotion's workers derive the same.
    let derived = shared
        .registry()
        .jobs
        .get(id)
        .is_some_and(|j| j.generated.is_some());
    if !derived && spec.harness.is_none() {
        let generated = super::generated::derive(&spec, workers);
        if let Some(job) = shared.registry().jobs.get_mut(id) {
            job.generated = generated;
        }
    }
    let ir = KernelIr::load_kernels(&snapshot, &spec.kernels).map_err(|e| e.to_string())?;
    let mut driver = Driver::resume(&shared.store, id, ir).map_err(|e| e.to_string())?;
    // Before the workers start: they would hold the GPU while it is built.
    let stop = shared.slots[slot].stop.clone();
    if !driver
        .prepare(&|| stop.load(Ordering::Relaxed))
        .map_err(|e| e.to_string())?
    {
        return Err("stopped while building the initial population".into());
    }
    let launcher = crate::worker::launch::Launcher::from(&config.cluster);
    let spec_text = super::scan::spec_snapshot_path(&snapshot);
    let setup = WorkerSetup {
        spec_path: &record.spec_path,
        spec_text: Some(&spec_text),
        ir: Some(&snapshot),
        arch: &record.target,
        // The factory's.
        libdevice: None,
        workers,
        timeout: config.workers.timeout,
        prescreen: config.gpu.prescreen,
        sanitize: config.gpu.sanitize,
        measurement: config.gpu.measurement,
        harness_user: match spec.harness {
            Some(_) => crate::harness::run_as(&config.harness.user)?,
            None => None,
        },
        reader: &reader,
        launcher: &launcher,
        more_devices: &shared.slots[slot].more_devices,
        cpu: config.workers.cpu,
    };
    let backend = factory.start(&setup, &spec, shared.slots[slot].device.as_ref(), stop)?;
    tracing::info!(generation = driver.engine().generations(), "job started");
    Ok(Current { driver, backend })
}

/// Worker processes per job: `[workers] count`, 0 for one per core.
fn job_workers(config: &ServeConfig) -> usize {
    match config.workers.count {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Drives the job until the slice is used or the runner is told to stop.
/// Returns how the driver's run ended (`None`: the job failed); the driver
/// and workers may be kept for the next slice after `TimeUp` or `Stopped`.
fn slice(shared: &Shared, slot: usize, current: &mut Current) -> Option<Ended> {
    let config = shared.config();
    let limits = Limits {
        generations: (config.jobs.max_generations > 0).then_some(config.jobs.max_generations),
        evaluations: None,
        deadline: Some(Instant::now() + config.schedule.slice),
    };
    let id = current.driver.id().to_string();
    let mut publish = ToRegistry { shared, id: &id };
    let ended = current.driver.run(
        &shared.store,
        current.backend.as_mut(),
        &limits,
        &shared.slots[slot].stop,
        &mut publish,
    );
    match ended {
        Ok(ended) => {
            if matches!(ended, Ended::Done) {
                // Also where the goal was reached before this run (a
                // restart): no generation was committed to say so.
                if let Some(job) = shared.registry().jobs.get_mut(&id) {
                    job.finished = true;
                }
            }
            Some(ended)
        }
        Err(e) => {
            fail(shared, &id, e.to_string());
            None
        }
    }
}

fn fail(shared: &Shared, id: &str, message: String) {
    tracing::error!(%message, "job failed");
    if let Some(job) = shared.registry().jobs.get_mut(id) {
        job.error = Some(message);
    }
}

/// Publishes each committed generation to the job's registry entry, and
/// each new best to the export directory with its report.
struct ToRegistry<'a> {
    shared: &'a Shared,
    id: &'a str,
}

impl Publish for ToRegistry<'_> {
    fn committed(&mut self, engine: &Engine, report: &GenerationReport, done: bool) {
        if let Some(job) = self.shared.registry().jobs.get_mut(self.id) {
            job.progress.committed(report.generation, report.best_cost);
            job.absorb(engine);
            job.finished = done;
        }
        tracing::debug!(generation = report.generation, best = ?report.best_cost, "generation committed");
    }

    fn new_best(&mut self, engine: &Engine, best: &Validated) {
        let shared = self.shared;
        let mut registry = shared.registry();
        let Some(job) = registry.jobs.get_mut(self.id) else {
            return;
        };
        // Also where a search's last verdicts validated it, after its
        // last generation.
        job.progress
            .validated(engine.best_validated().map(|v| v.generation));
        // The registry's best survives restarts: a driver's first best may
        // be the one it published already.
        if job
            .best
            .as_ref()
            .is_some_and(|(old, _)| old.ptx_hash == best.ptx_hash)
        {
            return;
        }
        job.best = best_record(job, engine, unix_now());
        let (validated, record) = job.best.clone().expect("just set");
        let (spec_path, root) = (job.record.spec_path.clone(), job.daemon.root.clone());
        let generated = job.generated.clone();
        drop(registry);
        tracing::info!(
            speedup = validated.speedup,
            generation = validated.generation,
            "new best validated variant"
        );
        let (kernel, at) = (record.kernel.clone(), record.validated_at);
        // This kernel's record, then those of other build directories'
        // kernels sharing this search, each serving it under its own.
        let mut records = vec![record];
        records.extend(
            shared
                .registry()
                .followers_of(self.id)
                .into_iter()
                .map(|f| super::scan::record_for(f, &validated, at)),
        );
        for record in records {
            let best = Best {
                record,
                ptx: validated.ptx.clone(),
            };
            if let Err(e) = gevo_client::export::write(&shared.state_dir, &best, shared.readers) {
                tracing::error!(error = %e, kernel = %best.record.kernel, "exporting the best variant");
            }
        }
        // The report beside it answers `gevo-client report` while the daemon is
        // down; it is as of this best.
        let report = super::handler::report_html(
            &shared.store,
            self.id,
            &spec_path,
            &root,
            generated.as_ref(),
        )
        .and_then(|html| {
            gevo_client::export::write_report(&shared.state_dir, &kernel, &html, shared.readers)
                .map_err(|e| e.to_string())
        });
        if let Err(e) = report {
            tracing::error!(error = %e, "exporting the report");
        }
    }
}
