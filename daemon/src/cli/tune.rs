//! `gevod tune`: every configuration of a spec's `[tune]` constants timed
//! (Kernel Tuner's brute force), the table or JSON printed, and the fastest
//! configuration's spec written for `gevod evolve` to search on.

use super::output::{default_workers, write_output};
use super::{resolve, BackendChoice};
use anyhow::{bail, Context as _, Result};
use gevo_model::access::Reader;
use gevo_model::device::DeviceSelector;
use gevo_model::spec::tune::describe;
use gevo_model::spec::{self, TestSet};
use gevod::tune::{sweep_in_scratch, Sweep, Timer};
use gevod::worker::setup::arch_for;
use gevod::worker::setup::measuring_setup;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, clap::ValueEnum)]
enum Tests {
    Train,
    Heldout,
}

#[derive(clap::Args)]
pub struct TuneArgs {
    spec: PathBuf,
    /// auto: the GPU when one is present, else the simulator.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendChoice,
    /// GPU by ordinal or UUID (GPU-...).
    #[arg(long, default_value = "0")]
    device: DeviceSelector,
    /// The tests each configuration is timed on.
    #[arg(long, value_enum, default_value = "train")]
    tests: Tests,
    /// Writes the fastest configuration's spec (the spec with `[tune.chosen]`)
    /// to this file, beside the spec (its paths are relative to that
    /// directory).
    #[arg(long)]
    write: Option<PathBuf>,
    /// Simulator threads, or compile workers on the GPU (default: all cores).
    #[arg(long)]
    workers: Option<usize>,
    #[arg(long)]
    arch: Option<String>,
    #[arg(long, env = "GEVO_LIBDEVICE")]
    libdevice: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

impl TuneArgs {
    pub fn run(self) -> Result<()> {
        let tuned = spec::load(&self.spec)?;
        if let Some(w) = &self.write {
            check_beside(&self.spec, w)?;
        }
        let device = resolve(self.backend, &self.device)?;
        let workers = self.workers.unwrap_or_else(default_workers);
        let arch = arch_for(&tuned, self.arch.clone(), device.as_ref());
        let timer = match device {
            None => Timer::Simulator { workers },
            Some(device) => Timer::Gpu {
                setup: measuring_setup(&self.spec, &arch, self.libdevice.as_deref(), workers),
                device,
            },
        };
        let set = match self.tests {
            Tests::Train => TestSet::Train,
            Tests::Heldout => TestSet::Heldout,
        };
        let result = sweep_in_scratch(&self.spec, &tuned, &timer, set, &Reader::Caller)?;
        if let (Some(w), Some(text)) = (&self.write, result.best_text(&tuned)) {
            write_output(Some(w), &text)?;
        }
        let text = match self.json {
            true => {
                let mut v = serde_json::to_value(&result)?;
                v["written"] = serde_json::json!(self.write);
                serde_json::to_string_pretty(&v)? + "\n"
            }
            false => table(&result, self.write.as_deref()),
        };
        write_output(None, &text)?;
        if result.best.is_none() {
            bail!(
                "{}: no configuration could be measured",
                self.spec.display()
            );
        }
        Ok(())
    }
}

/// A configured spec's relative paths are the tuned spec's: it must be
/// written in the same directory.
fn check_beside(spec: &Path, write: &Path) -> Result<()> {
    let dir = |p: &Path| {
        let d = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::canonicalize(d).with_context(|| d.display().to_string())
    };
    if dir(spec)? != dir(write)? {
        bail!(
            "--write {}: write it beside {} (the spec's paths are relative to its directory)",
            write.display(),
            spec.display()
        );
    }
    Ok(())
}

/// One line per configuration, the fastest marked, the dropped with why.
fn table(sweep: &Sweep, written: Option<&Path>) -> String {
    let unit = match sweep.backend.as_str() {
        "cuda" => "GPU time, us",
        _ => "simulator cost",
    };
    let mut out = format!(
        "{} configurations of {} on the {} tests ({unit} per test; ratio: over the source's, geometric mean)\n",
        sweep.configurations.len(),
        sweep.spec.display(),
        sweep.tests
    );
    let best = sweep.best.as_ref().map(|b| &b.configuration);
    for m in &sweep.configurations {
        let mark = match (
            Some(&m.configuration) == best,
            m.configuration == sweep.source,
        ) {
            (true, _) => "* ",
            (false, true) => "s ",
            _ => "  ",
        };
        let _ = write!(out, "{mark}{:<28}", describe(&m.configuration));
        match (&m.why, m.mean_ratio) {
            (Some(why), _) => {
                let _ = writeln!(out, " dropped: {why}");
            }
            (None, ratio) => {
                for t in &m.tests {
                    let shown = match sweep.backend.as_str() {
                        "cuda" => format!("{:.1}", t.cost / 1e3),
                        _ => format!("{}", t.cost),
                    };
                    let _ = write!(out, " {shown:>12}");
                }
                let _ = writeln!(out, "  ratio {:.3}", ratio.unwrap_or(f64::NAN));
            }
        }
    }
    out.push_str("(s: the source's configuration, *: the fastest)\n");
    if let Some(b) = &sweep.best {
        let _ = writeln!(
            out,
            "fastest: {}, {:.3}x [{:.3}, {:.3}] over the source's configuration ({})",
            describe(&b.configuration),
            b.speedup,
            b.interval.0,
            b.interval.1,
            describe(&sweep.source)
        );
    }
    if let Some(w) = written {
        let _ = writeln!(
            out,
            "wrote {}: `gevod evolve {}` searches edits on that configuration",
            w.display(),
            w.display()
        );
    }
    out
}
