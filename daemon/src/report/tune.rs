//! A tuned job's launch configuration (docs/report.md, "Launch
//! configuration"): the sweep that chose the configuration its search ran on
//! (`crate::tune`, stored beside the job under `tune::job_sweep_key`), read
//! from the store, and the page's section: which configuration and its
//! speedup over the source's, a table of every configuration, and a plot of
//! their cost ratios with the served variant's on top. Untuned jobs, and
//! stores from before the sweep was kept, have no section.

use super::html::figure;
use super::{plots, BestVariant};
use crate::tune::{job_sweep_key, Measured, Sweep};
use gevo_model::spec::tune::{describe, Configuration};
use gevo_search::store::{JobRecord, Store};
use html_escape::encode_text as esc;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// The sweep that chose a tuned job's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub sweep: Sweep,
    /// The configuration the job's search ran on, its variants' (the job's
    /// spec's `[tune.chosen]`, else the sweep's fastest).
    pub chosen: Configuration,
}

impl Launch {
    fn row(&self, configuration: &Configuration) -> Option<&Measured> {
        self.sweep
            .configurations
            .iter()
            .find(|m| m.configuration == *configuration)
    }

    /// The chosen configuration's speedup over the source's with its 95%
    /// interval (the sweep's, where it chose this one; else the point of
    /// its mean ratio).
    pub fn speedup(&self) -> Option<(f64, (f64, f64))> {
        match &self.sweep.best {
            Some(b) if b.configuration == self.chosen => Some((b.speedup, b.interval)),
            _ => {
                let s = 1.0 / self.row(&self.chosen)?.mean_ratio?;
                Some((s, (s, s)))
            }
        }
    }

    /// The served variant's cost ratio to the source configuration's
    /// original: the chosen configuration's ratio (the sweep's tests) times
    /// the variant's over the chosen configuration's original (held-out).
    pub fn served_ratio(&self, best: Option<&BestVariant>) -> Option<f64> {
        Some(self.row(&self.chosen)?.mean_ratio? / best?.speedup)
    }

    fn measured(&self) -> usize {
        self.sweep.measured()
    }
}

/// The sweep stored for `job`, if any; one that does not read (a newer or
/// older gevod wrote it) is a note, not an error.
pub(super) fn gather(store: &Store, job: &JobRecord, notes: &mut Vec<String>) -> Option<Launch> {
    let sweep = match store.setting::<Sweep>(&job_sweep_key(&job.id)) {
        Ok(sweep) => sweep?,
        Err(e) => {
            notes.push(format!(
                "the configuration sweep stored for this job could not be read ({e}): no launch configuration section"
            ));
            return None;
        }
    };
    let chosen = chosen_in(&job.spec_text)
        .or_else(|| Some(sweep.best.as_ref()?.configuration.clone()))
        .unwrap_or_else(|| sweep.source.clone());
    Some(Launch { sweep, chosen })
}

/// The `[tune.chosen]` table of a spec's text, without loading the spec.
fn chosen_in(spec_text: &str) -> Option<Configuration> {
    let value: toml::Table = toml::from_str(spec_text).ok()?;
    let chosen = value.get("tune")?.get("chosen")?.as_table()?;
    chosen
        .iter()
        .map(|(k, v)| Some((k.clone(), v.as_integer()?)))
        .collect()
}

/// Where the sweep timed the configurations, and in what unit.
fn timed_on(backend: &str) -> &'static str {
    match backend {
        "cuda" => "on the GPU (microseconds per test: the lower quartile of the timed rounds)",
        "sim" => "on the simulator (cost-model units per test, not a time measured on a GPU)",
        _ => "(the sweep failed)",
    }
}

/// A test's cost as the table shows it: microseconds from the GPU's
/// nanoseconds, the simulator's units as they are.
fn cost(backend: &str, value: f64) -> String {
    if backend == "cuda" {
        format!("{:.2}", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

/// The section "Launch configuration": the sentence, the table, the plot.
pub(super) fn section(
    out: &mut String,
    launch: &Launch,
    best: Option<&BestVariant>,
    job_backend: &str,
) {
    let sweep = &launch.sweep;
    *out += "<h2 id=\"launch\">Launch configuration</h2>\n<p id=\"launch-summary\">";
    let _ = write!(out, "{}", summary(launch));
    let _ = writeln!(
        out,
        " Before the search gevo swept the spec's <code>[tune]</code> constants as Kernel Tuner's brute force does: every configuration's original kernel (no edits), checked against the source configuration's outputs on the simulator, then timed {}. {} of {} configurations measured, {} dropped.</p>",
        timed_on(&sweep.backend),
        launch.measured(),
        sweep.configurations.len(),
        sweep.configurations.len() - launch.measured()
    );
    match (best, launch.served_ratio(best)) {
        (Some(b), Some(served)) => {
            let _ = writeln!(
                out,
                "<p id=\"launch-total\">The served variant's edits add {:.3}x over the chosen configuration's original{} (held-out tests): about {:.3}x over the source's configuration in all (cost ratio {served:.4}, the configuration's ratio times the edits').</p>",
                b.speedup,
                gevo_client::proto::measured_on(job_backend),
                1.0 / served
            );
        }
        _ => *out += "<p>No variant of the chosen configuration is validated yet: the plot has no served variant.</p>\n",
    }
    table(out, launch);
    plot(out, launch, best, job_backend);
}

/// Which configuration the search ran on, and its speedup over the
/// source's.
fn summary(launch: &Launch) -> String {
    let sweep = &launch.sweep;
    let chosen = esc(&describe(&launch.chosen)).into_owned();
    let source = esc(&describe(&sweep.source)).into_owned();
    let on = gevo_client::proto::measured_on(&sweep.backend);
    match launch.speedup() {
        _ if sweep.best.is_none() => format!(
            "The search ran on <code>{chosen}</code>: the sweep measured no configuration (the table says why)."
        ),
        _ if launch.chosen == sweep.source => format!(
            "The search ran on the source's own configuration <code>{chosen}</code>: no other was faster{on}."
        ),
        Some((s, (lo, hi))) => format!(
            "The search ran on <code>{chosen}</code>, the served variant's configuration: {s:.3}x faster than the source's configuration <code>{source}</code> (95% interval {lo:.3}x to {hi:.3}x, the geometric mean over the {} tests){}.",
            esc(&sweep.tests),
            gevo_client::proto::measured_on_long(&sweep.backend),
        ),
        None => format!(
            "The search ran on <code>{chosen}</code>; the sweep measured no speedup for it over the source's configuration <code>{source}</code>."
        ),
    }
}

/// Every configuration: constants, status, each test's cost, the ratio.
fn table(out: &mut String, launch: &Launch) {
    let sweep = &launch.sweep;
    let tests: Vec<&str> = launch
        .row(&sweep.source)
        .filter(|s| !s.tests.is_empty())
        .or_else(|| sweep.configurations.iter().find(|m| !m.tests.is_empty()))
        .map(|m| m.tests.iter().map(|t| t.test.as_str()).collect())
        .unwrap_or_default();
    let unit = if sweep.backend == "cuda" {
        "us"
    } else {
        "cost units"
    };
    *out += "<table id=\"launch-table\">\n<tr><th>configuration</th><th>status</th>";
    for t in &tests {
        let _ = write!(out, "<th>{} ({unit})</th>", esc(t));
    }
    *out += "<th>ratio to the source's</th><th></th></tr>\n";
    for m in &sweep.configurations {
        let is_source = m.configuration == sweep.source;
        let is_chosen = m.configuration == launch.chosen;
        let _ = write!(
            out,
            "<tr{}><td><code>{}</code></td><td>{}</td>",
            if is_chosen { " class=\"chosen\"" } else { "" },
            esc(&describe(&m.configuration)),
            match &m.why {
                Some(why) => format!("dropped: {}", esc(without_spec(why, sweep))),
                None => esc(&m.status).into_owned(),
            }
        );
        for t in &tests {
            let value = m.tests.iter().find(|c| c.test == *t);
            let value = value.map_or("-".into(), |c| cost(&sweep.backend, c.cost));
            let _ = write!(out, "<td class=\"num\">{value}</td>");
        }
        let ratio = m.mean_ratio.map_or("-".into(), |r| format!("{r:.3}"));
        let role = match (is_source, is_chosen) {
            (true, true) => "source's, chosen",
            (true, false) => "source's",
            (false, true) => "chosen",
            (false, false) => "",
        };
        let _ = writeln!(out, "<td class=\"num\">{ratio}</td><td>{role}</td></tr>");
    }
    let _ = writeln!(
        out,
        "</table>\n<p>Each configuration's original kernel on the {} tests, {}; <em>chosen</em> (highlighted): the configuration the search ran on. The ratio is the geometric mean over the tests of its cost over the source configuration's (below 1 is faster). <em>Dropped</em>: not timed, because its spec or IR did not load, its original failed on the simulator (an out-of-bounds access, a race), or its outputs differ from the source configuration's; the reason is the error's first line.</p>",
        esc(&sweep.tests),
        timed_on(&sweep.backend)
    );
}

/// A dropped configuration's reason without the spec's path in front (the
/// sweep names the spec it read; the page names it under Environment).
fn without_spec<'a>(why: &'a str, sweep: &Sweep) -> &'a str {
    let spec = format!("{}: ", sweep.spec.display());
    why.strip_prefix(&spec).unwrap_or(why)
}

/// The measured configurations' ratios, the chosen one's, the served
/// variant's on it.
fn plot(out: &mut String, launch: &Launch, best: Option<&BestVariant>, job_backend: &str) {
    let measured: Vec<&Measured> = (launch.sweep.configurations.iter())
        .filter(|m| m.mean_ratio.is_some())
        .collect();
    let points: Vec<plots::LaunchPoint> = measured
        .iter()
        .map(|m| plots::LaunchPoint {
            label: describe(&m.configuration),
            ratio: m.mean_ratio.unwrap_or(1.0),
        })
        .collect();
    let chosen = measured
        .iter()
        .position(|m| m.configuration == launch.chosen);
    let svg = if points.is_empty() {
        Ok(None)
    } else {
        plots::launch(&points, chosen, launch.served_ratio(best)).map(Some)
    };
    let caption = format!(
        "Each measured configuration's original kernel: its cost ratio to the source configuration's (grey line), the geometric mean over the {} tests, timed {}; the chosen configuration in green. The red triangle is the served variant: the chosen configuration's ratio times its edits' cost ratio on the held-out tests{}, so the gap from green to red is the edits' gain on top of the launch's. Left is faster; dropped configurations have no row (the table says why).",
        launch.sweep.tests,
        timed_on(&launch.sweep.backend),
        gevo_client::proto::measured_on(job_backend)
    );
    figure(out, "plot-launch", svg, &caption);
}

/// The section's numbers for `gevod report --json`.
pub(super) fn json(launch: &Launch, best: Option<&BestVariant>) -> Value {
    let speedup = launch.speedup();
    json!({
        "backend": launch.sweep.backend,
        "tests": launch.sweep.tests,
        "source": launch.sweep.source,
        "chosen": launch.chosen,
        "speedup": speedup.map(|s| s.0),
        "interval": speedup.map(|s| [s.1 .0, s.1 .1]),
        "served_cost_ratio": launch.served_ratio(best),
        "configurations": launch.sweep.configurations.len(),
        "measured": launch.measured(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::{gather, render, summary_json, BestVariant};
    use super::*;
    use gevo_model::access::Reader;
    use gevo_search::evolve::{Config, Engine};

    /// A sweep of `BLOCK` over 32 (the source's), 64 and 128 (dropped) on
    /// two tests, as `gevod tune --json` writes it, `best` the fastest.
    fn sweep(backend: &str, best: i64, speedup: f64) -> Sweep {
        let measured = |block: i64, costs: [f64; 2], ratio: f64| {
            json!({
                "configuration": {"BLOCK": block},
                "ir": format!("k.{block}.ll"),
                "status": "measured",
                "why": null,
                "tests": [{"test": "train[0]", "cost": costs[0]}, {"test": "train[1]", "cost": costs[1]}],
                "mean_ratio": ratio,
            })
        };
        serde_json::from_value(json!({
            "spec": "k.gevo.toml",
            "backend": backend,
            "tests": "train",
            "source": {"BLOCK": 32},
            "configurations": [
                measured(32, [2000.0, 4000.0], 1.0),
                measured(64, [1000.0, 3000.0], (0.5f64 * 0.75).sqrt()),
                {
                    "configuration": {"BLOCK": 128},
                    "ir": "k.128.ll",
                    "status": "dropped",
                    "why": "k.gevo.toml: train[0]: out-of-bounds <shared> access",
                    "tests": [],
                    "mean_ratio": null,
                },
            ],
            "best": {"configuration": {"BLOCK": best}, "speedup": speedup, "interval": [1.6, 1.7]},
        }))
        .unwrap()
    }

    fn best(speedup: f64) -> BestVariant {
        BestVariant {
            generation: 1,
            speedup,
            interval: (speedup, speedup),
            train_cost: 1.0 / speedup,
            tests: Vec::new(),
            edits: Vec::new(),
            line_tables: true,
            excerpts: Vec::new(),
            contributions: None,
        }
    }

    fn block(value: i64) -> Configuration {
        [("BLOCK".to_string(), value)].into()
    }

    /// The section of a sweep on each backend: the sentence, each
    /// configuration's row (units, the source's and the chosen marked,
    /// a dropped one's reason escaped and without the spec's path), and the
    /// served variant's point on the plot where a variant is validated.
    #[test]
    fn the_section_tells_each_configuration() {
        struct Case {
            launch: Launch,
            best: Option<f64>,
            expect: &'static [&'static str],
            absent: &'static [&'static str],
        }
        let cases = [
            Case {
                launch: Launch {
                    sweep: sweep("cuda", 64, 1.0 / (0.5f64 * 0.75).sqrt()),
                    chosen: block(64),
                },
                best: Some(1.25),
                expect: &[
                    "The search ran on <code>BLOCK=64</code>, the served variant's configuration: 1.633x faster than the source's configuration <code>BLOCK=32</code> (95% interval 1.600x to 1.700x, the geometric mean over the train tests) on the GPU.",
                    "then timed on the GPU (microseconds per test",
                    "2 of 3 configurations measured, 1 dropped.",
                    "The served variant's edits add 1.250x over the chosen configuration's original on the GPU (held-out tests): about 2.041x over the source's configuration in all (cost ratio 0.4899,",
                    "<th>train[0] (us)</th><th>train[1] (us)</th><th>ratio to the source's</th>",
                    "<tr><td><code>BLOCK=32</code></td><td>measured</td><td class=\"num\">2.00</td><td class=\"num\">4.00</td><td class=\"num\">1.000</td><td>source's</td></tr>",
                    "<tr class=\"chosen\"><td><code>BLOCK=64</code></td><td>measured</td><td class=\"num\">1.00</td><td class=\"num\">3.00</td><td class=\"num\">0.612</td><td>chosen</td></tr>",
                    "<tr><td><code>BLOCK=128</code></td><td>dropped: train[0]: out-of-bounds &lt;shared&gt; access</td><td class=\"num\">-</td><td class=\"num\">-</td><td class=\"num\">-</td><td></td></tr>",
                    "<figure id=\"plot-launch\">\n<svg",
                    "served variant: the chosen with its edits",
                    "<polygon",
                ],
                absent: &["k.gevo.toml: train[0]"],
            },
            Case {
                launch: Launch {
                    sweep: sweep("sim", 32, 1.0),
                    chosen: block(32),
                },
                best: None,
                expect: &[
                    "The search ran on the source's own configuration <code>BLOCK=32</code>: no other was faster on the simulator.",
                    "then timed on the simulator (cost-model units per test, not a time measured on a GPU)",
                    "No variant of the chosen configuration is validated yet",
                    "<th>train[0] (cost units)</th>",
                    "<tr class=\"chosen\"><td><code>BLOCK=32</code></td><td>measured</td><td class=\"num\">2000</td><td class=\"num\">4000</td><td class=\"num\">1.000</td><td>source's, chosen</td></tr>",
                    "<tr><td><code>BLOCK=64</code></td><td>measured</td><td class=\"num\">1000</td>",
                    "<figure id=\"plot-launch\">\n<svg",
                ],
                absent: &["<polygon", "id=\"launch-total\""],
            },
            Case {
                launch: Launch {
                    sweep: Sweep::failed(
                        std::path::Path::new("k.gevo.toml"),
                        block(32),
                        "no <CUDA> driver",
                    ),
                    chosen: block(32),
                },
                best: Some(1.1),
                expect: &[
                    "The search ran on <code>BLOCK=32</code>: the sweep measured no configuration (the table says why).",
                    "0 of 1 configurations measured, 1 dropped.",
                    "<tr class=\"chosen\"><td><code>BLOCK=32</code></td><td>dropped: the sweep failed: no &lt;CUDA&gt; driver</td><td class=\"num\">-</td><td>source's, chosen</td></tr>",
                    "No data for this plot",
                ],
                absent: &["<svg", "id=\"launch-total\""],
            },
        ];
        for case in cases {
            let best = case.best.map(best);
            let mut html = String::new();
            section(
                &mut html,
                &case.launch,
                best.as_ref(),
                &case.launch.sweep.backend,
            );
            for text in case.expect {
                assert!(html.contains(text), "{text} not in\n{html}");
            }
            for text in case.absent {
                assert!(!html.contains(text), "{text} in\n{html}");
            }
        }
    }

    fn job(id: &str, spec_text: &str) -> JobRecord {
        JobRecord {
            id: id.into(),
            spec_path: "k.gevo.toml".into(),
            spec_hash: id.into(),
            spec_text: spec_text.into(),
            ir_hash: "i".into(),
            ir_text: String::new(),
            backend: "cuda".into(),
            target: "H200".into(),
            seed: 1,
        }
    }

    /// The sweep stored beside a tuned job makes the section, the
    /// configuration its spec chose marked; an untuned job (or one from
    /// before sweeps were kept) has none; a sweep that does not read is a
    /// note.
    #[test]
    fn gather_reads_the_jobs_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let engine = Engine::new(Config::default(), 1).unwrap();
        let tuned =
            "kernel = \"k\"\n\n[tune]\nBLOCK = [32, 64, 128]\n\n[tune.chosen]\nBLOCK = 64\n";
        for (id, text) in [
            ("plain-1", "kernel = \"k\"\n"),
            ("tuned-1", tuned),
            ("odd-1", tuned),
        ] {
            store.create_job(&job(id, text), &engine).unwrap();
        }
        let swept = sweep("cuda", 64, 1.633);
        store
            .put_setting(&job_sweep_key("tuned-1"), &swept)
            .unwrap();
        store
            .put_setting(&job_sweep_key("odd-1"), &"not a sweep")
            .unwrap();

        let plain = gather(&store, "plain-1", Reader::Caller).unwrap();
        assert_eq!(plain.launch, None);
        assert!(!render(&plain).contains("id=\"launch\""));
        assert_eq!(summary_json(&plain)["launch"], Value::Null);

        let data = gather(&store, "tuned-1", Reader::Caller).unwrap();
        let launch = data.launch.as_ref().expect("the stored sweep");
        assert_eq!((&launch.sweep, &launch.chosen), (&swept, &block(64)));
        let html = render(&data);
        assert!(html.contains("<h2 id=\"launch\">Launch configuration</h2>"));
        assert!(html.find("id=\"best\"") < html.find("id=\"launch\""));
        let json = &summary_json(&data)["launch"];
        assert_eq!(json["chosen"], json!({"BLOCK": 64}));
        assert_eq!(
            (json["measured"].clone(), json["speedup"].clone()),
            (json!(2), json!(1.633))
        );

        let odd = gather(&store, "odd-1", Reader::Caller).unwrap();
        assert_eq!(odd.launch, None);
        assert!(
            odd.notes
                .iter()
                .any(|n| n.contains("configuration sweep stored for this job could not be read")),
            "{:?}",
            odd.notes
        );
    }
}
