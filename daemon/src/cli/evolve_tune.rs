//! `gevod evolve` on a spec with `[tune]` and no configuration chosen: the
//! sweep first (every configuration's original timed on the search's
//! backend, `gevod::tune`), then the search on the fastest configuration.
//! The sweep is kept in the state directory, so that `--resume` continues
//! the same configuration's job instead of timing them all again.

use anyhow::{Context as _, Result};
use gevo_ir::{KernelIr, Patch};
use gevo_model::access::Reader;
use gevo_model::device::DeviceInfo;
use gevo_model::spec::tune::describe;
use gevo_model::spec::{self, Spec, TestSet};
use gevo_search::store::Store;
use gevod::cuda::measure::Measurement;
use gevod::tune::{sweep, sweep_key, Carried, Configurations, Files, Sweep, Timer};
use gevod::worker::sanitize::SanitizeMode;
use gevod::worker::setup::WorkerSetup;
use std::path::{Path, PathBuf};

/// The configuration the search runs on: its spec, the file holding its
/// text (the workers read it), and the sweep that chose it.
pub(super) struct Chosen {
    pub spec: Spec,
    pub text_file: PathBuf,
    pub sweep: Sweep,
}

/// Sweeps `tuned` on `timer` (train tests) unless `store` has its sweep on
/// this backend, and writes the fastest configuration's spec text under
/// `state/tune/`.
pub(super) fn choose(
    spec_path: &Path,
    tuned: &Spec,
    timer: &Timer,
    store: &Store,
    state: &Path,
) -> Result<Chosen> {
    let key = sweep_key(&tuned.content_hash(), timer.backend());
    let dir = state.join("tune");
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let swept = match store.setting::<Sweep>(&key)? {
        Some(s) => {
            eprintln!(
                "configurations: the sweep of this spec stored in {}",
                state.display()
            );
            s
        }
        None => {
            let scratch = tempfile::tempdir_in(&dir).context("a scratch directory")?;
            let files = Files {
                reader: &Reader::Caller,
                scratch: scratch.path(),
            };
            let s = sweep(spec_path, tuned, timer, TestSet::Train, &files)?;
            store.put_setting(&key, &s)?;
            s
        }
    };
    let Some(best) = &swept.best else {
        anyhow::bail!(
            "{}: no configuration could be measured",
            spec_path.display()
        );
    };
    eprintln!(
        "configurations: {} of {} measured; searching on {}, {:.3}x over the source's ({})",
        swept.measured(),
        swept.configurations.len(),
        describe(&best.configuration),
        best.speedup,
        describe(&swept.source)
    );
    let text = swept.best_text(tuned).expect("a tuned spec");
    let spec = spec::parse(spec_path, &text)?;
    let text_file = dir.join(format!("{}.gevo.toml", spec.content_hash()));
    gevo_client::export::write_atomic(&text_file, text.as_bytes())?;
    Ok(Chosen {
        spec,
        text_file,
        sweep: swept,
    })
}

/// Where the sweep and the carried patches are timed: the search's GPU
/// with fixed rounds and no safety gate, or the simulator.
pub(super) fn timer<'a>(setup: &WorkerSetup<'a>, device: Option<&DeviceInfo>) -> Timer<'a> {
    match device {
        None => Timer::Simulator {
            workers: setup.workers,
        },
        Some(d) => Timer::Gpu {
            setup: WorkerSetup {
                measurement: Measurement::Fixed,
                sanitize: SanitizeMode::Off,
                ..setup.clone()
            },
            device: d.clone(),
        },
    }
}

/// The best variant's edits (`patch`, of `ir`) carried to the `limit`
/// next-fastest configurations of the sweep; a failure to make the scratch
/// directory leaves none, with a warning.
pub(super) fn carry(
    spec_path: &Path,
    tuned: &Spec,
    chosen: &Chosen,
    ir: &KernelIr,
    patch: &Patch,
    timer: &Timer,
    limit: usize,
) -> Vec<Carried> {
    let scratch = match tempfile::tempdir() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "edits not carried to other configurations");
            return Vec::new();
        }
    };
    let files = Files {
        reader: &Reader::Caller,
        scratch: scratch.path(),
    };
    let at = Configurations {
        spec_path,
        tuned,
        timer,
        files: &files,
    };
    gevod::tune::carry(&at, &chosen.sweep, ir, patch, limit)
}
