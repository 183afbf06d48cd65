//! The report page: one HTML file with inline CSS and SVG, no script and no
//! external resource. Every text from the store or the sources is escaped
//! (`html-escape`); the SVG comes from plotters.

use super::{plots, BestVariant, Generated, KeptTests, ReportData};
use gevo_model::utilization::Utilization;
use html_escape::encode_text as esc;
use std::fmt::Write as _;

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 980px; color: #222; padding: 0 1em; }
h1 { margin-bottom: 0.1em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.6em; }
.sub { color: #666; margin-top: 0; }
.speedup { font-size: 2.4em; font-weight: 600; color: #2c7a2c; }
.none { font-size: 1.4em; color: #a33; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.7em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
tr.chosen td { background: #eaf6ea; } #launch-table code { white-space: nowrap; }
ol.edits > li { margin-bottom: 0.8em; }
.summary { font-weight: 600; }
code, pre { font-family: ui-monospace, monospace; font-size: 0.92em; }
.src { background: #f6f8fa; padding: 0.1em 0.4em; }
.ir { color: #666; }
pre.excerpt { background: #f6f8fa; padding: 0.6em; overflow-x: auto; border-left: 3px solid #ccc; }
pre.excerpt .hit { background: #fff3b0; display: inline-block; width: 100%; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: 0.95em; }
.note { color: #8a5a00; }
";

/// The whole page.
pub fn render(data: &ReportData) -> String {
    let mut out = String::new();
    let title = format!("gevo report: {}", data.kernel);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n<p class=\"sub\">job <code>{}</code></p>\n",
        esc(&title),
        esc(&title),
        esc(&data.job)
    );
    best_section(&mut out, data.best.as_ref(), &data.backend, &data.generated);
    if let Some(launch) = &data.launch {
        super::tune::section(&mut out, launch, data.best.as_ref(), &data.backend);
    }
    progress_section(&mut out, data);
    if let Some(u) = &data.utilization {
        utilization_section(&mut out, u);
    }
    rejections_section(&mut out, data);
    table_section(&mut out, "Environment", "environment", &data.environment);
    if !data.notes.is_empty() {
        out += "<h2 id=\"notes\">Notes</h2>\n<ul>\n";
        for n in &data.notes {
            let _ = writeln!(out, "<li class=\"note\">{}</li>", esc(n));
        }
        out += "</ul>\n";
    }
    out += "</body>\n</html>\n";
    out
}

/// A pipeline's held-out tests per kernel: which kernel got faster (the
/// GPU times each kernel with an event after every launch; the simulator
/// and single kernels have no such rows).
fn kernel_times(out: &mut String, tests: &[super::TestRow]) {
    if tests.iter().all(|t| t.kernels.is_empty()) {
        return;
    }
    *out += "<table id=\"kernel-times\">\n<tr><th>test</th><th>kernel</th><th>original (us)</th><th>variant (us)</th><th>ratio</th></tr>\n";
    for t in tests {
        for k in &t.kernels {
            let ratio = if k.original_ns > 0.0 {
                format!("{:.3}", k.variant_ns / k.original_ns)
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.1}</td><td class=\"num\">{ratio}</td></tr>",
                esc(&t.test),
                esc(&k.kernel),
                k.original_ns / 1e3,
                k.variant_ns / 1e3,
            );
        }
    }
    *out += "</table>\n<p>Each kernel's time on each held-out test: its launches summed, the lower quartile of a few runs with an event after every launch (apart from the timed rounds), original against variant.</p>\n";
}

/// The headline: the speedup, and where it was measured (a simulator cost
/// ratio is not a GPU speedup).
fn best_section(
    out: &mut String,
    best: Option<&BestVariant>,
    backend: &str,
    generated: &Generated,
) {
    *out += "<h2 id=\"best\">Best validated variant</h2>\n";
    let Some(b) = best else {
        *out += "<p class=\"none\">No validated variant yet: nothing passed the held-out tests faster with confidence.</p>\n";
        return;
    };
    let _ = writeln!(
        out,
        "<p><span class=\"speedup\">{:.3}x faster{}</span>{} (95% interval {:.3}x to {:.3}x on the held-out tests), found in generation {}, train cost ratio {:.4}, {} edit{}.</p>",
        b.speedup,
        gevo_client::proto::measured_on(backend),
        if backend == "sim" {
            ": a ratio of the simulator's cost model, not a time measured on a GPU"
        } else {
            ""
        },
        b.interval.0,
        b.interval.1,
        b.generation,
        b.train_cost,
        b.edits.len(),
        if b.edits.len() == 1 { "" } else { "s" }
    );
    heldout_tests(out, b);
    generated_tests(out, &generated.kept);
    edits_list(out, b);
    contributions_section(out, b);
    source_excerpts(out, b);
}

/// The held-out tests' verdicts and cost ratios, then each kernel's times.
fn heldout_tests(out: &mut String, b: &BestVariant) {
    *out += "<h3>Held-out tests</h3>\n<table id=\"tests\">\n<tr><th>test</th><th>sizes</th><th>verdict</th><th>cost ratio</th><th>95% interval</th><th>speedup</th></tr>\n";
    for t in &b.tests {
        let (ratio, interval, speedup) = match t.ratio {
            Some((r, lo, hi)) => (
                format!("{r:.4}"),
                format!("{lo:.4} to {hi:.4}"),
                format!("{:.3}x", 1.0 / r),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{ratio}</td><td class=\"num\">{interval}</td><td class=\"num\">{speedup}</td></tr>",
            esc(&t.test),
            esc(&t.sizes),
            esc(&t.verdict)
        );
    }
    *out += "</table>\n";
    kernel_times(out, &b.tests);
}

/// The generated held-out tests the variant passed (every kept one: a
/// validated variant passed them at promotion or in selection).
fn generated_tests(out: &mut String, kept: &KeptTests) {
    *out += "<h3 id=\"generated\">Generated held-out tests</h3>\n";
    let tests = match kept {
        KeptTests::Listed(tests) if !tests.is_empty() => tests,
        KeptTests::Listed(_) => {
            *out += "<p>None kept: the original runs no generated size cleanly within the caps (<code>gevod run --tests generated</code> says why of each).</p>\n";
            return;
        }
        KeptTests::Harness => {
            *out += "<p>None: a harness spec runs your program, for which gevo generates no tests.</p>\n";
            return;
        }
        KeptTests::NotDerived(why) => {
            let _ = writeln!(
                out,
                "<p class=\"note\">Not listed: they could not be derived here: {}</p>",
                esc(why)
            );
            return;
        }
        KeptTests::NoBest => return,
    };
    let _ = writeln!(
        out,
        "<p>It passed all {} generated held-out tests, sizes no test of the spec uses (run on the simulator, whatever the backend):</p>\n<table id=\"generated-tests\">\n<tr><th>test</th><th>what it covers</th><th>verdict</th></tr>",
        tests.len()
    );
    for t in tests {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>pass</td></tr>",
            esc(&t.test),
            esc(&t.why)
        );
    }
    *out += "</table>\n";
}

/// Each edit: its summary, source lines, repairs and IR.
fn edits_list(out: &mut String, b: &BestVariant) {
    *out += "<h3>Edits</h3>\n";
    if !b.line_tables {
        *out += &format!(
            "<p class=\"note\">{}</p>\n",
            esc(gevo_client::explain::NO_LINE_TABLES)
        );
    }
    *out += "<ol class=\"edits\" id=\"edits\">\n";
    for e in &b.edits {
        // A pipeline's edit names its kernel.
        let kernel = e.kernel.as_deref().map_or(String::new(), |k| {
            format!(" <span class=\"kernel\">(in {})</span>", esc(k))
        });
        let _ = writeln!(
            out,
            "<li><div class=\"summary\">{}{kernel}</div>",
            esc(&e.summary)
        );
        for line in &e.lines {
            match &line.text {
                Some(text) => {
                    let _ = writeln!(
                        out,
                        "<div><code>{}</code> <code class=\"src\">{}</code></div>",
                        esc(&line.location),
                        esc(text)
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "<div><code>{}</code> (source not readable)</div>",
                        esc(&line.location)
                    );
                }
            }
        }
        for r in &e.repairs {
            let _ = writeln!(out, "<div>repair: {}</div>", esc(r));
        }
        let _ = writeln!(
            out,
            "<div class=\"ir\">IR: <code>{}</code></div></li>",
            esc(&e.ir)
        );
    }
    *out += "</ol>\n";
}

/// The source around each edited line, the line marked.
fn source_excerpts(out: &mut String, b: &BestVariant) {
    if b.excerpts.is_empty() {
        return;
    }
    *out += "<h3>Source context</h3>\n";
    for x in &b.excerpts {
        let _ = write!(
            out,
            "<p><code>{}</code></p>\n<pre class=\"excerpt\">",
            esc(&x.location)
        );
        for (n, text) in &x.lines {
            let line = format!("{n:>5} | {text}");
            if *n == x.line {
                let _ = writeln!(out, "<span class=\"hit\">{}</span>", esc(&line));
            } else {
                let _ = writeln!(out, "{}", esc(&line));
            }
        }
        *out += "</pre>\n";
    }
}

/// Which edit gives the speed (`gevod explain-edits`): a table and a plot.
fn contributions_section(out: &mut String, b: &BestVariant) {
    *out += "<h3 id=\"contributions\">Edit contributions</h3>\n";
    let Some(c) = &b.contributions else {
        *out += "<p class=\"note\">Not measured yet: <code>gevod explain-edits</code> on this state directory measures each edit alone, the patch without each edit and every pair.</p>\n";
        return;
    };
    let _ = writeln!(
        out,
        "<p>Each edit alone, and the patch without it, on the {} tests ({}; {} variants measured in {:.1} s). The full patch's cost ratio is {:.4}. <em>Carries speed</em>: removing it loses speed with confidence (or alone it is faster); <em>enabling</em>: no faster alone, needed by another edit; <em>neutral</em>: within {:.0}%.</p>",
        esc(&c.set),
        esc(&c.scope.backend),
        c.variants_measured,
        c.seconds,
        c.full.estimate,
        c.threshold * 100.0
    );
    *out += "<table id=\"contribution-table\">\n<tr><th>edit</th><th>kernel</th><th>class</th><th>alone</th><th>without it</th><th>why</th></tr>\n";
    for e in &c.edits {
        let name = edit_name(b, e);
        let _ = writeln!(
            out,
            "<tr><td>#{} {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e.index + 1,
            esc(name),
            esc(&e.kernel),
            e.class.name(),
            esc(&e.alone.phrase()),
            esc(&e.without.phrase()),
            esc(&e.why)
        );
    }
    *out += "</table>\n";
    relies_on_table(out, b, c);
    if !c.pairs.is_empty() {
        *out += "<table id=\"pair-table\">\n<tr><th>pair</th><th>result</th></tr>\n";
        for p in &c.pairs {
            let names: Vec<String> = p.edits.iter().map(|i| format!("#{}", i + 1)).collect();
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td></tr>",
                names.join(" + "),
                esc(&p.outcome.phrase())
            );
        }
        *out += "</table>\n";
    }
    figure(
        out,
        "plot-contributions",
        plots::contributions(c).map(Some),
        "Each edit's cost ratio alone (blue) and the patch's without it (orange), with 95% intervals, against the full patch (green) and the original (grey). A subset that fails a test has no point.",
    );
}

/// A contribution's edit in source terms where the report has it (the
/// same patch), else as IR ids.
fn edit_name<'a>(b: &'a BestVariant, e: &'a gevo_search::contrib::EditContribution) -> &'a str {
    b.edits
        .get(e.index)
        .map_or(e.edit.as_str(), |s| s.summary.as_str())
}

/// What each edit relies on (`contrib::relies`), one row a line.
fn relies_on_table(out: &mut String, b: &BestVariant, c: &gevo_search::contrib::Contributions) {
    *out += "<h4 id=\"relies-on\">What each edit relies on</h4>\n";
    let Some(cost) = c.relies_cost else {
        *out += "<p class=\"note\">Not analysed: these contributions were stored before the analysis existed; <code>gevod explain-edits</code> adds it.</p>\n";
        return;
    };
    let _ = writeln!(
        out,
        "<p>From the lowered IR and the simulator ({} test runs in {:.1} s): the accesses a deleted or moved barrier ordered and which barrier orders them now, whether a removed store's value is read on the tests, accesses moved across a barrier or a loop, and edits that hold only at the tests' sizes (the first generated size that fails).</p>",
        cost.runs, cost.seconds
    );
    if c.edits.iter().all(|e| e.relies_on.is_empty()) {
        *out += "<p class=\"note\">Nothing found: no edit removes or moves a barrier, removes a store, moves an access across a barrier or a loop, or fails at a size no test uses.</p>\n";
        return;
    }
    *out +=
        "<table id=\"relies-table\">\n<tr><th>edit</th><th>kernel</th><th>relies on</th></tr>\n";
    for e in c.edits.iter().filter(|e| !e.relies_on.is_empty()) {
        let name = edit_name(b, e);
        for r in &e.relies_on {
            let _ = writeln!(
                out,
                "<tr><td>#{} {}</td><td>{}</td><td>{}</td></tr>",
                e.index + 1,
                esc(name),
                esc(&e.kernel),
                esc(&r.line)
            );
        }
    }
    *out += "</table>\n";
}

fn progress_section(out: &mut String, data: &ReportData) {
    *out += "<h2 id=\"progress\">Search</h2>\n";
    let _ = writeln!(
        out,
        "<p>{} generations, {} evaluations ({:.1}% answered by the fitness cache), {:.1}% valid.</p>",
        data.generations.len(),
        data.evaluations,
        100.0 * data.cache_hits as f64 / data.evaluations.max(1) as f64,
        100.0 * data.valid as f64 / data.evaluations.max(1) as f64
    );
    figure(
        out,
        "plot-cost",
        plots::cost(&data.generations).map(Some),
        "The train best against the validated best, per generation: the population's cheapest valid variant on the train tests (blue), and the best variant validated so far, its cost ratio 1 / speedup on the held-out tests (green). Below 1.0 is faster than the original; a blue line that keeps falling while the green stays flat is train gains that do not validate.",
    );
    if let Some(since) = super::course::since(&data.generations) {
        let _ = writeln!(
            out,
            "<p id=\"train-validated\">{}</p>",
            esc(&since.sentence())
        );
    }
    figure(
        out,
        "plot-pareto",
        plots::pareto(&data.pareto, &data.population).map(Some),
        "The Pareto front over train cost ratio and error (the largest difference from the original's outputs), over the last population's valid variants.",
    );
    figure(
        out,
        "plot-rate",
        plots::rate(&data.generations),
        "Evaluations per second of each generation over the search's wall time.",
    );
}

/// Where the GPU backend's time went: the bottleneck at a glance.
fn utilization_section(out: &mut String, u: &Utilization) {
    *out += "<h2 id=\"utilization\">GPU time</h2>\n";
    let _ = writeln!(
        out,
        "<p>{}.</p>\n<p>A GPU worker starts once, and again after each variant that crashed or hung one; timing stops early when a variant is confidently on one side of the selection threshold (adaptive measurement).</p>",
        esc(&u.summary())
    );
    let total: f64 = u.phases().iter().map(|(_, s)| s).sum();
    *out += "<table id=\"utilization-table\">\n<tr><th>phase</th><th>worker seconds</th><th>share</th></tr>\n";
    for (phase, seconds) in u.phases() {
        let _ = writeln!(
            out,
            "<tr><td>{phase}</td><td class=\"num\">{seconds:.1}</td><td class=\"num\">{:.1}%</td></tr>",
            100.0 * seconds / total.max(1e-9)
        );
    }
    *out += "</table>\n<p>Compile and pre-screen run on the compile workers, the rest on the GPU: a GPU worker's start-up (uploading the tests, making the references) measures nothing; compute-sanitizer checks variants about to be validated. Held-out measurements for promotion are included.</p>\n";
    let shares = u.cpu_and_promotion();
    if !shares.is_empty() {
        // The phases are wall seconds, which grow where workers share cores.
        let _ = writeln!(
            out,
            "<p id=\"utilization-shares\">Of these: {}.</p>",
            esc(&shares.join("; "))
        );
    }
    engine_table(out, u);
    let p = &u.gpu_start_parts;
    if *p != gevo_model::utilization::StartUp::default() {
        let _ = writeln!(
            out,
            "<p>GPU worker starts (spares included), by part: set-up {:.1} s, CUDA context {:.1} s, generating inputs {:.1} s, uploading {:.1} s, references {:.1} s.</p>",
            p.setup_s, p.context_s, p.inputs_s, p.upload_s, p.references_s
        );
    }
}

/// Where the engine's own thread spent the search: while it breeds,
/// selects or promotes, no new variant reaches the workers.
fn engine_table(out: &mut String, u: &Utilization) {
    let parts = u.engine_parts();
    let total: f64 = parts.iter().map(|(_, s)| s).sum();
    if total <= 0.0 {
        return;
    }
    *out += "<table id=\"engine-table\">\n<tr><th>the engine's time</th><th>seconds</th><th>share</th></tr>\n";
    for (part, seconds) in parts {
        let _ = writeln!(
            out,
            "<tr><td>{part}</td><td class=\"num\">{seconds:.1}</td><td class=\"num\">{:.1}%</td></tr>",
            100.0 * seconds / total
        );
    }
    let _ = writeln!(
        out,
        "</table>\n<p>The engine's thread breeds a generation, waits for the workers to evaluate it, selects, then promotes (held-out tests, minimizing, on the same workers): {:.1} s between batches, when no new variant reaches the workers. On the GPU promotion runs beside the batches in a thread of its own instead ({:.1} s, which no batch waits for).</p>",
        u.engine.between_batches_s(),
        u.engine.promote_beside_s
    );
}

pub(super) fn figure(
    out: &mut String,
    id: &str,
    svg: Result<Option<String>, String>,
    caption: &str,
) {
    let _ = writeln!(out, "<figure id=\"{id}\">");
    match svg {
        Ok(Some(svg)) => *out += &svg,
        Ok(None) => *out += "<p class=\"note\">No data for this plot in the store.</p>",
        Err(e) => {
            let _ = write!(out, "<p class=\"note\">{}</p>", esc(&e));
        }
    }
    let _ = write!(
        out,
        "\n<figcaption>{}</figcaption>\n</figure>\n",
        esc(caption)
    );
}

fn rejections_section(out: &mut String, data: &ReportData) {
    *out += "<h2 id=\"rejections\">Why variants were rejected</h2>\n<table id=\"rejection-table\">\n<tr><th>reason</th><th>variants</th></tr>\n";
    for (reason, n) in &data.rejections {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{n}</td></tr>",
            esc(reason)
        );
    }
    *out += "</table>\n<p>Counted per evaluation (cache hits included); held-out and sanitizer rejections are train-best variants that failed promotion.</p>\n";
    let g = &data.generated;
    let selection = if g.in_selection {
        format!(
            "{} variant{} ran the generated held-out tests in selection (each PTX once); {} evaluation{} rejected for failing one",
            g.checks,
            if g.checks == 1 { "" } else { "s" },
            g.rejected,
            if g.rejected == 1 { " was" } else { "s were" },
        )
    } else {
        "off (<code>[evolve] generality_in_selection = false</code>)".into()
    };
    let _ = writeln!(
        out,
        "<p id=\"generality\">Generality in selection: {selection}; {} train-best variant{} refused at promotion for failing one.</p>",
        g.refused_at_promotion,
        if g.refused_at_promotion == 1 { "" } else { "s" },
    );
}

fn table_section(out: &mut String, title: &str, id: &str, rows: &[(String, String)]) {
    let _ = writeln!(out, "<h2 id=\"{id}\">{}</h2>\n<table>", esc(title));
    for (k, v) in rows {
        let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    *out += "</table>\n";
}

#[cfg(test)]
mod tests {
    use super::super::{BestVariant, ReportData, TestRow};
    use gevo_model::assessment::KernelTime;

    fn report(backend: &str, tests: Vec<TestRow>) -> ReportData {
        ReportData {
            kernel: "lu".into(),
            job: "lu-1".into(),
            backend: backend.into(),
            best: Some(BestVariant {
                generation: 3,
                speedup: 1.05,
                interval: (1.04, 1.06),
                train_cost: 0.95,
                tests,
                edits: Vec::new(),
                line_tables: true,
                excerpts: Vec::new(),
                contributions: None,
            }),
            generations: Vec::new(),
            pareto: Vec::new(),
            population: Vec::new(),
            rejections: Vec::new(),
            evaluations: 0,
            cache_hits: 0,
            valid: 0,
            utilization: None,
            generated: super::super::Generated::default(),
            launch: None,
            environment: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn row(test: &str, kernels: &[(&str, f64, f64)]) -> TestRow {
        TestRow {
            test: test.into(),
            sizes: "n = 4096".into(),
            verdict: "pass".into(),
            ratio: Some((0.95, 0.94, 0.96)),
            kernels: kernels
                .iter()
                .map(|&(kernel, original_ns, variant_ns)| KernelTime {
                    kernel: kernel.into(),
                    original_ns,
                    variant_ns,
                })
                .collect(),
        }
    }

    /// A pipeline measured on the GPU: each held-out test's kernels with
    /// their times, original against variant; names escaped; each edit
    /// names its kernel.
    #[test]
    fn a_pipelines_kernels_have_their_times() {
        let data = report(
            "cuda",
            vec![
                row(
                    "heldout[0]",
                    &[
                        ("lu_diagonal", 2000.0, 1500.0),
                        ("lu_<internal>", 10000.0, 10000.0),
                    ],
                ),
                row("heldout[1]", &[("lu_diagonal", 0.0, 0.0)]),
            ],
        );
        let mut data = data;
        data.best.as_mut().unwrap().edits = vec![gevo_client::explain::SourceEdit {
            summary: "delete the __syncthreads() at lu.cu:60".into(),
            ir: "delete i87".into(),
            lines: Vec::new(),
            repairs: Vec::new(),
            kernel: Some("lu_diagonal".into()),
        }];
        let html = super::render(&data);
        for text in [
            "<li><div class=\"summary\">delete the __syncthreads() at lu.cu:60 <span class=\"kernel\">(in lu_diagonal)</span></div>",
            "<table id=\"kernel-times\">",
            "<tr><td>heldout[0]</td><td>lu_diagonal</td><td class=\"num\">2.0</td><td class=\"num\">1.5</td><td class=\"num\">0.750</td></tr>",
            "<tr><td>heldout[0]</td><td>lu_&lt;internal&gt;</td><td class=\"num\">10.0</td><td class=\"num\">10.0</td><td class=\"num\">1.000</td></tr>",
            "<tr><td>heldout[1]</td><td>lu_diagonal</td><td class=\"num\">0.0</td><td class=\"num\">0.0</td><td class=\"num\">-</td></tr>",
        ] {
            assert!(html.contains(text), "{text} not in the report");
        }
        // Between the held-out table and the edits.
        let at = |s: &str| html.find(s).unwrap();
        assert!(at("id=\"tests\"") < at("id=\"kernel-times\""));
        assert!(at("id=\"kernel-times\"") < at("id=\"edits\""));
    }

    /// The generated tests the variant passed, escaped; a harness spec and
    /// tests not derived say why there is no list; selection's counts.
    #[test]
    fn generated_tests_are_listed_or_said_why_not() {
        use super::super::{Generated, GeneratedTest, KeptTests};
        let mut data = report("sim", vec![row("heldout[0]", &[])]);
        data.generated = Generated {
            kept: KeptTests::Listed(vec![GeneratedTest {
                test: "generated[0]".into(),
                why: "n = 7: n < 8".into(),
            }]),
            in_selection: true,
            checks: 1,
            rejected: 5,
            refused_at_promotion: 0,
        };
        let html = super::render(&data);
        assert!(html.contains("<p>It passed all 1 generated held-out tests"));
        assert!(
            html.contains("<tr><td>generated[0]</td><td>n = 7: n &lt; 8</td><td>pass</td></tr>")
        );
        assert!(html.contains("Generality in selection: 1 variant ran the generated held-out tests in selection (each PTX once); 5 evaluations were rejected for failing one; 0 train-best variants refused"));
        data.generated.kept = KeptTests::Harness;
        data.generated.in_selection = false;
        let html = super::render(&data);
        assert!(html.contains("a harness spec runs your program"));
        assert!(html.contains("Generality in selection: off"));
        data.generated.kept = KeptTests::NotDerived("spec <gone>".into());
        let html = super::render(&data);
        assert!(html.contains("could not be derived here: spec &lt;gone&gt;"));
        assert!(!html.contains("generated-tests"));
    }

    /// Without per-kernel times (the simulator, one kernel) no such table.
    #[test]
    fn no_kernel_times_no_table() {
        let html = super::render(&report("sim", vec![row("heldout[0]", &[])]));
        assert!(!html.contains("kernel-times"));
    }
}
