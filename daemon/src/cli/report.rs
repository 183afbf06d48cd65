//! `gevod evolve`'s output: a progress line per generation on stderr, and
//! the final report (text or JSON) on stdout.

use gevo_model::utilization::Utilization;
use gevo_search::drive::Exported;
use gevo_search::evolve::{Engine, GenerationReport, Validated};
use gevo_search::store::JobRecord;
use gevod::report::KeptTests;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

/// One line per generation on stderr; redrawn in place on a terminal.
/// Also keeps this run's course for the final report: utilization summed
/// over its generations, and where each generation ended.
pub struct Progress {
    started: Instant,
    evaluations_at_start: u64,
    evaluations: u64,
    terminal: bool,
    drawn: bool,
    utilization: Option<Utilization>,
    timeline: Vec<Milestone>,
}

/// The state of the search when a generation of this run ended.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Milestone {
    pub generation: u64,
    /// Seconds since this run started.
    pub seconds: f64,
    pub evaluations: u64,
    /// Evaluations the fitness cache did not answer.
    pub new_variants: u64,
    /// The best validated speedup so far (none yet: null).
    pub best_speedup: Option<f64>,
    /// The population's lowest train cost ratio (what selection sees),
    /// beside the validated best.
    pub train_best_cost: Option<f64>,
    /// Variants selection has run on the generated tests so far, and of
    /// all evaluations those rejected by one.
    pub generality_checks: u64,
    pub generality_rejections: u64,
    /// On the GPU: this generation's GPU busy share, and the seconds its
    /// GPU workers held no request (where in a search the GPUs wait).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_busy_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_idle_s: Option<f64>,
}

impl Progress {
    pub fn new(started: Instant, evaluations_at_start: u64) -> Self {
        Progress {
            started,
            evaluations_at_start,
            evaluations: evaluations_at_start,
            terminal: std::io::stderr().is_terminal(),
            drawn: false,
            utilization: None,
            timeline: Vec::new(),
        }
    }

    /// The backend's utilization over this run's generations.
    pub fn utilization(&self) -> Option<&Utilization> {
        self.utilization.as_ref()
    }

    pub fn rate(&self) -> f64 {
        (self.evaluations - self.evaluations_at_start) as f64
            / self.started.elapsed().as_secs_f64().max(1e-9)
    }

    pub fn generation(&mut self, engine: &Engine, report: &GenerationReport) {
        let c = engine.counters();
        self.evaluations = c.evaluations;
        let best = report
            .best_cost
            .map_or("-".to_string(), |b| format!("{b:.4}"));
        if let Some(u) = &report.utilization {
            self.utilization
                .get_or_insert_with(Utilization::default)
                .add(u);
        }
        self.timeline.push(Milestone {
            generation: report.generation,
            seconds: self.started.elapsed().as_secs_f64(),
            evaluations: c.evaluations,
            new_variants: c.evaluations - c.cache_hits,
            best_speedup: engine.best_validated().map(|v| v.speedup),
            train_best_cost: report.best_cost,
            generality_checks: c.generality_checks,
            generality_rejections: c.rejections.get("generated").copied().unwrap_or(0),
            gpu_busy_share: report.utilization.as_ref().map(Utilization::gpu_busy_share),
            gpu_idle_s: report.utilization.as_ref().map(|u| u.gpu_idle_s),
        });
        let mut line = format!(
            "generation {:>3} | evaluations {:>6} | valid {:>5.1}% | best cost {best} | cache hits {:>5.1}% | {:.1} eval/s | validated {} | distinct {}",
            report.generation,
            c.evaluations,
            100.0 * c.valid_share(),
            100.0 * c.cache_hit_rate(),
            self.rate(),
            engine.validated().len(),
            report.distinct_ptx,
        );
        if report.restarted > 0 {
            line += &format!(" | restarted {}", report.restarted);
        }
        if let Some(u) = &report.utilization {
            line += &format!(
                " | GPU busy {:.0}%, {:.1} s with no request | {:.1} rounds/variant",
                100.0 * u.gpu_busy_share(),
                u.gpu_idle_s,
                u.rounds_per_variant()
            );
        }
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{line}");
            self.drawn = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    pub fn finish(&self) {
        if self.drawn {
            eprintln!();
        }
    }
}

pub struct Report<'a> {
    pub job: &'a JobRecord,
    pub engine: &'a Engine,
    pub exported: Option<&'a Exported>,
    /// The best variant's edits in source terms, rendered.
    pub edits: Option<&'a str>,
    /// The HTML report written beside the checkpoint.
    pub html: &'a Path,
    pub state: &'a Path,
    pub progress: &'a Progress,
    /// Worker processes replaced in this run.
    pub respawns: u64,
    /// The backend's safety gate, in one line (GPU: compute-sanitizer).
    pub gate: Option<String>,
    pub interrupted: bool,
    /// The earlier version of the kernel this job was seeded from.
    pub origin: Option<&'a gevo_search::store::Origin>,
    /// What the HTML report shows, read back from the store: the train
    /// best against the validated best, the generated held-out tests.
    pub gathered: &'a gevod::report::ReportData,
    /// The best variant's edit contributions, measured at the end of the
    /// search on its backend (none with `--no-explain`).
    pub contributions: Option<&'a gevo_search::contrib::Contributions>,
    /// The configuration sweep that chose the spec's `[tune]` values.
    pub tuned: Option<&'a gevod::tune::Sweep>,
    /// The best variant's edits on the next-fastest configurations.
    pub carried: &'a [gevod::tune::Carried],
}

impl Report<'_> {
    fn best(&self) -> Option<&Validated> {
        self.engine.best_validated()
    }

    /// The final report as text, for stdout.
    pub fn text(&self) -> String {
        let mut out = self.summary_text();
        out += &self.best_text();
        out += &self.course_text();
        out += &self.failures_text();
        out += &format!("\nHTML report: {}\n", self.html.display());
        out += "\nPareto front (train cost ratio vs error):\n  cost ratio        error  edits\n";
        let points: Vec<(f64, f64, usize)> = self
            .engine
            .archive()
            .iter()
            .filter_map(|m| {
                let (cost, error) = m.outcome.objectives()?;
                Some((cost, error, m.patch.edits.len()))
            })
            .collect();
        out += &pareto_rows(&points);
        out
    }

    /// The report's head: the job, the search's counts, utilization, the
    /// safety gate, the seed job and restarts, each where there is one.
    fn summary_text(&self) -> String {
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
            self.progress.rate(),
            self.respawns
        );
        if let Some(u) = self.progress.utilization() {
            out += &format!("{}\n\n", utilization_text(u));
        }
        if let Some(gate) = &self.gate {
            out += &format!("{gate}\n\n");
        }
        if let Some(o) = self.origin {
            out += &format!(
                "seeded from job {} (this spec's kernel with other IR): {} patch(es) carried over, {} edit(s) kept, {} dropped\n\n",
                o.info.job, o.info.patches, o.info.kept, o.info.dropped
            );
        }
        if !e.restarts().is_empty() {
            out += &format!(
                "restarts (after stagnation or a stalled validated best): generations {:?}\n\n",
                e.restarts()
            );
        }
        if let Some(b) = self.tuned.and_then(|t| t.best.as_ref().map(|b| (t, b))) {
            out += &tuned_text(b.0, b.1, self.best().map(|v| v.speedup));
            out += &carried_text(self.carried, b.1, self.best().map(|v| v.train_cost));
        }
        out
    }

    /// The best validated variant: its speedup, held-out tests, edits and
    /// exported files; or that there is none yet.
    fn best_text(&self) -> String {
        let (Some(v), Some(files)) = (self.best(), self.exported) else {
            return "no validated variant yet\n".into();
        };
        let mut out = format!(
            "best validated variant (generation {}): speedup {:.4}x, interval [{:.4}, {:.4}]\n",
            v.generation, v.speedup, v.interval.0, v.interval.1
        );
        out += &format!(
            "  edits: {} as found, {} after minimization\n  held-out tests:\n",
            v.patch.edits.len(),
            v.minimized.edits.len()
        );
        for t in &v.heldout {
            let ratio = t.cost_interval().map_or("-".into(), |i| {
                if i.lo == i.hi {
                    format!("{:.4}", i.estimate)
                } else {
                    format!("{:.4} (95% interval {:.4}..{:.4})", i.estimate, i.lo, i.hi)
                }
            });
            let verdict = t.failure.as_ref().map_or("pass", |f| f.0.as_str());
            out += &format!("    {:<12} {verdict:<8} cost ratio {ratio}\n", t.test);
        }
        out += &self.generated_text();
        out += &self.edits_text(v);
        if let Some(c) = self.contributions {
            // Numbered as the edits above; their IR form.
            out += &super::explain_edits::contributions_text(&self.job.id, c, &[]);
        }
        out += &format!(
            "  PTX:             {}\n  patch:           {}\n  minimized patch: {}\n",
            files.ptx.display(),
            files.patch.display(),
            files.minimized.display()
        );
        out
    }

    /// The minimized edits of `v` (in source terms where rendered), with
    /// those carried over from the seed job marked.
    fn edits_text(&self, v: &Validated) -> String {
        let carried = |e: &gevo_ir::Edit| match self.origin {
            Some(o) if o.edits.contains(e) => format!("  (from job {})", o.info.job),
            _ => String::new(),
        };
        let mut out = String::new();
        match self.edits {
            Some(text) => {
                out += &format!("  edits:\n{text}");
                let from: Vec<String> = v
                    .minimized
                    .edits
                    .iter()
                    .filter(|e| !carried(e).is_empty())
                    .map(|e| e.to_string())
                    .collect();
                if let (Some(o), false) = (self.origin, from.is_empty()) {
                    out += &format!("  {} (from job {})\n", from.join("; "), o.info.job);
                }
            }
            None => {
                for e in &v.minimized.edits {
                    out += &format!("  edit: {e}{}\n", carried(e));
                }
            }
        }
        out
    }

    /// The generated held-out tests the best variant passed, one a line.
    fn generated_text(&self) -> String {
        match &self.gathered.generated.kept {
            KeptTests::Listed(tests) if !tests.is_empty() => {
                let mut out = "  generated held-out tests passed (on the simulator):\n".to_string();
                for t in tests {
                    out += &format!("    {} ({})\n", t.test, t.why);
                }
                out
            }
            KeptTests::NotDerived(why) => {
                format!("  generated held-out tests: not listed ({why})\n")
            }
            _ => String::new(),
        }
    }

    /// The train best against the validated best since the latter last
    /// changed, and selection's generated-test rejections.
    fn course_text(&self) -> String {
        let mut out = String::new();
        if let Some(since) = gevod::report::course::since(&self.gathered.generations) {
            out += &format!(
                "\ntrain best against validated best: {}\n",
                since.sentence()
            );
        }
        let g = &self.gathered.generated;
        if g.in_selection && g.checks > 0 {
            out += &format!(
                "generality in selection: {} variants ran the generated held-out tests, {} evaluations rejected for failing one\n",
                g.checks, g.rejected
            );
        }
        out
    }

    /// The held-out rejections: how many, how many by a generated test,
    /// and the last three; empty without any.
    fn failures_text(&self) -> String {
        let failures = self.engine.promotion_failures();
        if failures.is_empty() {
            return String::new();
        }
        let mut out = format!(
            "\nheld-out rejections: {} (train-best variants that failed the held-out tests)\n",
            failures.len()
        );
        let generated = failures.iter().filter(|f| f.kind == "generated").count();
        if generated > 0 {
            out +=
                &format!("  {generated} of them by a generated held-out test (docs/evolve.md)\n");
        }
        for f in failures.iter().rev().take(3) {
            out += &format!(
                "  generation {}, train cost {:.4}: {}\n",
                f.generation, f.train_cost, f.reason
            );
        }
        out
    }

    pub fn json(&self) -> serde_json::Value {
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
                "transplanted_edits": self.origin.map_or_else(Vec::new, |o| {
                    (0..v.minimized.edits.len())
                        .filter(|&i| o.edits.contains(&v.minimized.edits[i]))
                        .collect()
                }),
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
            "evaluations_per_second": self.progress.rate(),
            "utilization": self.progress.utilization().map(Utilization::to_json),
            "timeline": self.progress.timeline,
            "worker_respawns": self.respawns,
            "safety_gate": self.gate,
            "best_cost": e.best_cost(),
            "tune": self.tuned,
            "carried": self.carried,
            "distinct_ptx": e.distinct_ptx(),
            "restarts": e.restarts(),
            "validated": e.validated().len(),
            "best": best,
            "promotion_failures": e.promotion_failures().iter().map(|f| serde_json::json!({
                "generation": f.generation, "train_cost": f.train_cost, "reason": f.reason, "kind": f.kind,
            })).collect::<Vec<_>>(),
            "pareto": pareto,
            "report": self.html,
            "counters": c,
            "origin": self.origin.map(|o| &o.info),
            "since_validated": gevod::report::course::since(&self.gathered.generations).map(|s| s.sentence()),
            "generated_passed": match &self.gathered.generated.kept {
                KeptTests::Listed(tests) => tests.iter().map(|t| format!("{} ({})", t.test, t.why)).collect(),
                _ => Vec::new(),
            },
            "contributions": self.contributions,
        })
    }
}

/// The GPU backend's utilization in two lines: who was busy, and where the
/// time went.
pub fn utilization_text(u: &Utilization) -> String {
    let phases: Vec<String> = u
        .phases()
        .iter()
        .filter(|(_, s)| *s > 0.0)
        .map(|(name, s)| format!("{name} {s:.1} s"))
        .collect();
    let engine: Vec<String> = u
        .engine_parts()
        .iter()
        .map(|(name, s)| format!("{name} {s:.1} s"))
        .collect();
    let beside = match u.engine.promote_beside_s {
        s if s > 0.0 => format!("; promotion beside the batches {s:.1} s"),
        _ => String::new(),
    };
    // Phases are wall seconds; the CPU is what the compile workers' answers
    // counted (getrusage), and promotion's part is inside the phases.
    let shares: String = u
        .cpu_and_promotion()
        .iter()
        .map(|s| format!("; {s}"))
        .collect();
    format!(
        "{}\nworker time by phase: {}{shares}\nthe engine's time: {} ({:.1} s between batches{beside})",
        u.summary(),
        phases.join(", "),
        engine.join(", "),
        u.engine.between_batches_s()
    )
}

/// The Pareto front's rows, one per distinct printed point: variants whose
/// patches differ but whose cost, error and edit count print alike (an
/// archive may hold several) share a row that says how many they are.
fn pareto_rows(points: &[(f64, f64, usize)]) -> String {
    let mut rows: Vec<(String, usize)> = Vec::new();
    for (cost, error, edits) in points {
        let row = format!("  {cost:>10.4}  {error:>11.3e}  {edits:>5}");
        match rows.iter_mut().find(|(r, _)| *r == row) {
            Some((_, count)) => *count += 1,
            None => rows.push((row, 1)),
        }
    }
    rows.into_iter()
        .map(|(row, count)| match count {
            1 => format!("{row}\n"),
            n => format!("{row}  ({n} variants)\n"),
        })
        .collect()
}

/// The configuration the sweep chose, and what the search adds on top of
/// it: the speedups multiply (the sweep's on the train tests, the variant's
/// validated against that configuration's original).
fn tuned_text(
    sweep: &gevod::tune::Sweep,
    best: &gevod::tune::Best,
    validated: Option<f64>,
) -> String {
    use gevo_model::spec::tune::describe;
    let measured = sweep.measured();
    let mut out = format!(
        "configuration {} ({} of {} configurations measured on the {} tests, `gevod tune` shows them): {:.3}x [{:.3}, {:.3}] over the source's ({})\n",
        describe(&best.configuration),
        measured,
        sweep.configurations.len(),
        sweep.tests,
        best.speedup,
        best.interval.0,
        best.interval.1,
        describe(&sweep.source)
    );
    if let Some(v) = validated {
        out += &format!(
            "  with the validated variant's {v:.3}x over that configuration's original: about {:.3}x over the source's kernel and launch\n",
            v * best.speedup
        );
    }
    out + "\n"
}

/// The best variant's edits on other configurations, each one's train cost
/// over the source's against the chosen configuration's with the variant.
fn carried_text(
    carried: &[gevod::tune::Carried],
    best: &gevod::tune::Best,
    train_cost: Option<f64>,
) -> String {
    use gevo_model::spec::tune::describe;
    if carried.is_empty() {
        return String::new();
    }
    let mut out = String::from("the variant's edits carried to the next-fastest configurations (train tests, cost over the source's original):\n");
    if let Some(cost) = train_cost {
        out += &format!(
            "  {:<28} {:.3}  (the search's configuration with its variant)\n",
            describe(&best.configuration),
            cost / best.speedup
        );
    }
    for c in carried {
        let line = match (c.of_source, &c.why) {
            (Some(cost), _) => format!("{cost:.3}  ({} of {} edits carried)", c.kept, c.edits),
            (None, Some(why)) => format!("not measured: {why}"),
            (None, None) => "not measured".into(),
        };
        out += &format!("  {:<28} {line}\n", describe(&c.configuration));
    }
    out + "\n"
}

#[cfg(test)]
mod tests {
    use super::{pareto_rows, utilization_text, Progress};
    use gevo_model::utilization::{Spent, Utilization};
    use gevo_search::evolve::{Config, Engine, GenerationReport};
    use std::time::Instant;

    /// Each generation's milestone says where its GPUs waited (on the GPU
    /// backend); a simulator search's milestones say nothing of a GPU.
    #[test]
    fn milestones_carry_each_generations_gpu_busy_and_idle() {
        let engine = Engine::new(Config::default(), 1).unwrap();
        let mut progress = Progress::new(Instant::now(), 0);
        let gpu = Utilization {
            wall_s: 4.0,
            gpu_workers: 1,
            gpu_idle_s: 1.0,
            spent: Spent {
                timing_s: 3.0,
                ..Spent::default()
            },
            ..Utilization::default()
        };
        for utilization in [Some(gpu), None] {
            let report = GenerationReport {
                utilization,
                ..GenerationReport::default()
            };
            progress.generation(&engine, &report);
        }
        let timeline = serde_json::to_value(&progress.timeline).unwrap();
        assert_eq!(timeline[0]["gpu_busy_share"], 0.75);
        assert_eq!(timeline[0]["gpu_idle_s"], 1.0);
        assert!(timeline[1].get("gpu_idle_s").is_none(), "{timeline}");
    }

    /// The report's end showed `0.8848 0.000e0 4` twice: two archive
    /// members, one point.
    #[test]
    fn a_pareto_point_shared_by_variants_is_printed_once() {
        let text = pareto_rows(&[
            (0.88481, 0.0, 4),
            (0.5, 1e-6, 7),
            (0.884812, 0.0, 4),
            (0.88481, 0.0, 5),
        ]);
        assert_eq!(
            text.matches("0.8848      0.000e0      4").count(),
            1,
            "{text}"
        );
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(
            rows,
            [
                "      0.8848      0.000e0      4  (2 variants)",
                "      0.5000     1.000e-6      7",
                "      0.8848      0.000e0      5",
            ]
        );
    }

    /// The text report's phases line adds the compile workers' CPU and
    /// promotion's part where the workers counted them, and nothing where
    /// they did not (a build before them, or no promotion).
    #[test]
    fn the_phases_line_tells_cpu_and_promotions_part() {
        let mut u = Utilization {
            wall_s: 10.0,
            gpu_workers: 1,
            compile_workers: 4,
            spent: Spent {
                compile_s: 6.0,
                assemble_guarded_s: 2.0,
                timing_s: 5.0,
                compile_cpu_s: 4.5,
                ..Spent::default()
            },
            promotion: Spent {
                compile_s: 1.0,
                timing_s: 2.5,
                ..Spent::default()
            },
            promotion_measured: 3,
            ..Utilization::default()
        };
        let text = utilization_text(&u);
        assert!(
            text.contains("; compile workers' CPU 4.5 s; promotion 1.0 s of the compile workers' and 2.5 s of the GPU's (3 measured)\n"),
            "{text}"
        );
        u.spent.compile_cpu_s = 0.0;
        u.promotion = Spent::default();
        u.promotion_measured = 0;
        let text = utilization_text(&u);
        let phases = text.lines().nth(1).unwrap();
        assert_eq!(
            phases,
            "worker time by phase: compile 6.0 s, ptxas, guarded builds 2.0 s, timing 5.0 s"
        );
    }
}
