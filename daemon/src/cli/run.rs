//! `gevod run`: a spec's tests on the simulator, on the GPU (a patch, or
//! ready-made PTX, or the original against the simulator), or through a
//! harness spec's program; results as tables or JSON.

use super::output::{default_workers, read_patch, write_output};
use super::tables::{gpu_table, results_json, results_table};
use super::{resolve, BackendChoice};
use anyhow::{bail, Result};
use gevo_ir::{CodegenOptions, KernelIr};
use gevo_model::device::{DeviceInfo, DeviceSelector};
use gevo_model::spec::{self, Spec, TestSet, TestTarget};
use gevo_search::eval::{Assessment, Evaluator, GeneratedTests, TestResult};
use gevod::config::Prescreen;
use gevod::worker::gpu_run::{compare_with_simulator, measure_on_gpu, Agreement, GpuRun, Variants};
use gevod::worker::sanitize::SanitizeMode;
use gevod::worker::setup::{arch_for, harness_runner, measuring_setup, HarnessTarget, WorkerSetup};
use std::path::PathBuf;

#[derive(Clone, Copy, clap::ValueEnum)]
enum Tests {
    Train,
    Heldout,
    All,
    /// The generated held-out tests (simulator only): which are kept and
    /// dropped and why, then the variant on the kept ones.
    Generated,
}

#[derive(clap::Args)]
pub struct RunArgs {
    spec: PathBuf,
    #[arg(long)]
    patch: Option<PathBuf>,
    /// GPU only: measure this PTX instead of a patch (repeat for several,
    /// measured in order on the same workers).
    #[arg(long, conflicts_with = "patch")]
    ptx: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "all")]
    tests: Tests,
    /// auto: the GPU when one is present, else the simulator.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendChoice,
    /// GPU by ordinal or UUID (GPU-...).
    #[arg(long, default_value = "0")]
    device: DeviceSelector,
    /// GPU only: instead of a variant, check the original kernel's outputs
    /// on the GPU against the simulator's.
    #[arg(long, conflicts_with_all = ["patch", "ptx"])]
    compare_sim: bool,
    /// Simulator threads, or compile workers on the GPU (default: all cores).
    #[arg(long)]
    workers: Option<usize>,
    #[arg(long)]
    arch: Option<String>,
    #[arg(long, env = "GEVO_LIBDEVICE")]
    libdevice: Option<PathBuf>,
    /// GPU only: also run each variant once under compute-sanitizer
    /// (memcheck, racecheck, synccheck) on the smallest held-out test, as
    /// the safety gate does before validating one; a report fails it.
    #[arg(long, value_enum, default_value = "off")]
    sanitize: SanitizeMode,
    /// GPU only: the pre-screen on the simulator (all, smallest or off).
    /// The variants given are judged as promotion's are: all and smallest
    /// both run every train test; off: every variant reaches the GPU
    /// (checked through its guarded build).
    #[arg(
        long,
        value_enum,
        value_name = "PLACEMENT",
        default_value = "all",
        hide_possible_values = true
    )]
    prescreen: Prescreen,
    /// GPU only: `--prescreen off`.
    #[arg(long, conflicts_with = "prescreen")]
    no_prescreen: bool,
    #[arg(long)]
    json: bool,
}

impl RunArgs {
    pub fn run(self) -> Result<()> {
        let spec = spec::load(&self.spec)?;
        let device = resolve(self.backend, &self.device)?;
        // The tests of where the kernel runs: `[tests.gpu]` or `[tests.sim]`
        // over `[tests]` (the GPU backend's pre-screen still takes the sim ones).
        let spec = spec.for_backend(match device {
            Some(_) => TestTarget::Gpu,
            None => TestTarget::Sim,
        });
        let set = match self.tests {
            Tests::Train => TestSet::Train,
            Tests::Heldout => TestSet::Heldout,
            Tests::All => TestSet::All,
            Tests::Generated => TestSet::Generated,
        };
        if set == TestSet::Generated && (device.is_some() || spec.harness.is_some()) {
            bail!("--tests generated: the generated tests run on the simulator, with a kernel spec (--backend sim)");
        }
        if self.compare_sim || !self.ptx.is_empty() {
            let what = if self.compare_sim {
                "--compare-sim"
            } else {
                "--ptx"
            };
            require_gpu(device.as_ref(), what)?;
        }
        if spec.harness.is_some() {
            if !self.ptx.is_empty() {
                bail!("--ptx: not for harness specs (pass --patch)");
            }
            return self.on_harness(spec, device, set);
        }
        let Some(device) = device else {
            return self.on_simulator(spec, set);
        };
        let arch = arch_for(&spec, self.arch.clone(), Some(&device));
        if self.compare_sim {
            let agreements = compare_with_simulator(
                &self.spec,
                &device,
                &arch,
                self.libdevice.clone(),
                set,
                default_workers(),
            )?;
            let (text, agree) = agreement_lines(&agreements);
            write_output(None, &text)?;
            if !agree {
                bail!(
                    "{}: the GPU and the simulator disagree",
                    self.spec.display()
                );
            }
            return Ok(());
        }
        let variants = if self.ptx.is_empty() {
            let (label, patch) = match &self.patch {
                Some(p) => (p.display().to_string(), read_patch(p)?),
                None => {
                    let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels)?;
                    ("original".to_string(), ir.empty_patch())
                }
            };
            Variants::Patch(label, patch)
        } else {
            Variants::Ptx(self.ptx.clone())
        };
        let setup = WorkerSetup {
            sanitize: self.sanitize,
            prescreen: match self.no_prescreen {
                true => Prescreen::Off,
                false => self.prescreen,
            },
            ..measuring_setup(
                &self.spec,
                &arch,
                self.libdevice.as_deref(),
                self.workers.unwrap_or_else(default_workers),
            )
        };
        let GpuRun {
            results,
            gate,
            restarts,
        } = measure_on_gpu(&setup, &spec, device, variants, set)?;
        // A variant's fault costs no restart where it was checked guarded.
        eprintln!("gevod: GPU worker restarts: {restarts}");
        write_assessments(&results, self.json)?;
        for (name, verdict) in &gate {
            let line = match verdict {
                None => format!("{name}: GPU safety gate: no report\n"),
                Some(r) => format!("{name}: GPU safety gate rejects it: {r}\n"),
            };
            eprint!("{}", gevo_client::text::escape_terminal(&line));
        }
        let failed = results.iter().filter(|(_, a)| !a.passed()).count()
            + gate.iter().filter(|(_, v)| v.is_some()).count();
        if failed > 0 {
            bail!(
                "{}: {failed} of {} variants failed",
                self.spec.display(),
                results.len()
            );
        }
        Ok(())
    }

    fn on_simulator(&self, spec: Spec, set: TestSet) -> Result<()> {
        let evaluator = Evaluator::new(spec, self.workers.unwrap_or_else(default_workers))?;
        let patch = match &self.patch {
            Some(p) => read_patch(p)?,
            None => evaluator.ir().empty_patch(),
        };
        let results = evaluator.evaluate(&patch, set)?;
        let text = match (set, self.json) {
            (TestSet::Generated, json) => generated_text(&*evaluator.generated()?, &results, json),
            (_, true) => results_json(&results),
            (_, false) => results_table(&results),
        };
        write_output(None, &text)?;
        if set != TestSet::Generated {
            // What validation adds to the user's tests, and what they miss:
            // on stderr, so that stdout (the table, or `--json`'s array) is
            // the variant's results alone.
            let summary = match evaluator.generated() {
                Ok(g) => generated_summary(&g),
                Err(e) => format!("generated tests: none made: {e}\n"),
            };
            eprint!("{}", gevo_client::text::escape_terminal(&summary));
        }
        let failed = results.iter().filter(|r| !r.passed()).count();
        if failed > 0 {
            bail!(
                "{}: {failed} of {} tests failed",
                self.spec.display(),
                results.len()
            );
        }
        Ok(())
    }

    /// A harness spec: the application runs the original, then the patched
    /// kernel, on every test of the set (as this user).
    fn on_harness(&self, spec: Spec, device: Option<DeviceInfo>, set: TestSet) -> Result<()> {
        let arch = arch_for(&spec, self.arch.clone(), device.as_ref());
        let codegen = CodegenOptions {
            arch,
            libdevice: self.libdevice.clone(),
        };
        let runner = match &device {
            Some(d) => harness_runner(HarnessTarget::Gpu, Some(d.uuid.clone())),
            None => harness_runner(HarnessTarget::Sim, None),
        }?;
        let evaluator = gevod::harness::HarnessEvaluator::new(spec, codegen, runner, None)?;
        let (label, patch) = match &self.patch {
            Some(p) => (p.display().to_string(), read_patch(p)?),
            None => ("original".to_string(), evaluator.ir().empty_patch()),
        };
        let mut assessment = evaluator.assess(&patch, set)?;
        assessment.device = device;
        let results = vec![(label, assessment)];
        write_assessments(&results, self.json)?;
        if let Some(failure) = results[0].1.first_failure() {
            bail!("{}: {failure}", self.spec.display());
        }
        Ok(())
    }
}

/// Refuses GPU-only options on the simulator.
fn require_gpu(device: Option<&DeviceInfo>, what: &str) -> Result<()> {
    if device.is_none() {
        bail!(
            "{what} needs the GPU backend (no GPU is in use: --backend sim, or auto without a GPU)"
        );
    }
    Ok(())
}

/// `--compare-sim`'s lines, one per test and output, and whether all agree.
fn agreement_lines(agreements: &[Agreement]) -> (String, bool) {
    let mut out = String::new();
    for a in agreements {
        let c = &a.comparison;
        out += &format!(
            "{:<12} {:<8} gpu vs sim: {} ({} {:.3e}{})\n",
            a.test,
            a.output,
            if c.passed { "agree" } else { "DIFFER" },
            a.acceptance.metric.name(),
            c.error,
            c.first_mismatch
                .map_or(String::new(), |e| format!(", first at element {e}"))
        );
    }
    (out, agreements.iter().all(|a| a.comparison.passed))
}

/// Labelled assessments as tables (or JSON) on stdout.
fn write_assessments(results: &[(String, Assessment)], json: bool) -> Result<()> {
    let text = if json {
        serde_json::to_string_pretty(&results_by_label(results))? + "\n"
    } else {
        results.iter().map(|(l, a)| gpu_table(l, a)).collect()
    };
    write_output(None, &text)
}

/// GPU results as JSON: per variant its label, whether it passed, the
/// cost ratio with its interval, and the tests (with their timing rounds).
fn results_by_label(results: &[(String, Assessment)]) -> serde_json::Value {
    results
        .iter()
        .map(|(label, a)| {
            serde_json::json!({
                "variant": label,
                "passed": a.passed(),
                "failure": a.first_failure(),
                "cost_ratio": a.cost_interval(),
                "device": a.device,
                "tests": a.tests,
            })
        })
        .collect()
}

/// `--tests generated`: the generated tests kept (with the original's cost)
/// and dropped (with why), the lint lines, then the variant's results on
/// the kept ones.
fn generated_text(g: &GeneratedTests, results: &[TestResult], json: bool) -> String {
    if json {
        let kept: Vec<_> = g
            .kept
            .iter()
            .map(|k| serde_json::json!({"test": k.test.name, "why": k.why, "seed": k.test.seed, "params": k.test.params, "original_cost": k.cost}))
            .collect();
        let dropped: Vec<_> = g
            .dropped
            .iter()
            .map(|d| serde_json::json!({"test": d.test.name, "why": d.why, "params": d.test.params, "reason": d.reason}))
            .collect();
        let rows: serde_json::Value =
            serde_json::from_str(&results_json(results)).expect("our own JSON");
        let v = serde_json::json!({
            "kept": kept,
            "dropped": dropped,
            "lints": g.lints,
            "cost_per_validation": g.cost(),
            "cost_cap": g.cost_cap,
            "results": rows,
        });
        return serde_json::to_string_pretty(&v).expect("JSON of plain values") + "\n";
    }
    generated_summary(g) + &results_table(results)
}

/// The generated tests kept (with the original's cost) and dropped (with
/// why), then the lint lines: what `--tests generated` lists first and
/// every other run on the simulator says on stderr.
fn generated_summary(g: &GeneratedTests) -> String {
    let mut out = format!(
        "generated tests: {} kept, {} dropped; the original costs {} on the kept ones (cap {} each)\n",
        g.kept.len(),
        g.dropped.len(),
        g.cost(),
        g.cost_cap
    );
    for k in &g.kept {
        out += &format!("kept     {:<14} {} (cost {})\n", k.test.name, k.why, k.cost);
    }
    for d in &g.dropped {
        out += &format!("dropped  {:<14} {}: {}\n", d.test.name, d.why, d.reason);
    }
    for l in &g.lints {
        out += &format!("lint: {l}\n");
    }
    out
}
