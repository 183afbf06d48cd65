//! The HTML report of a short simulator search, as a user sees it: written
//! by `gevod report`, then rendered by a real browser (headless chromium,
//! which scripts/install-deps.sh installs on Debian) to text and to a PNG.
//! The page must hold the barrier edit in CUDA source terms, its edit
//! contributions (`gevod explain-edits`), the four plots (the cost plot's
//! train and validated series with a point per generation), the generated
//! held-out tests the variant passed and selection's generality counts, in
//! the DOM and on the screenshot. Only the browser part skips,
//! with its reason, where no chromium can start.
//!
//! `GEVO_REPORT_SCREENSHOT=<file.png>` keeps the screenshot (docs/report.md
//! describes one).

use crate::common;

use common::s;
use std::path::{Path, PathBuf};
use std::process::Command;

const BARRIER_EDIT: &str = "delete the __syncthreads() at stencil.cu:61";

fn gevod(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(args)
        .output()
        .unwrap();
    common::succeeded(out, args)
}

/// A short search of the stencil fixture started from the planted patch
/// that drops its redundant barrier; returns the state directory and the
/// terminal report.
fn short_search(dir: &Path) -> (PathBuf, String) {
    let state = dir.join("state");
    let config = dir.join("evolve.toml");
    std::fs::write(&config, "[evolve]\npopulation = 16\n").unwrap();
    let planted =
        common::repo_root().join("tests/fixtures/kernels/stencil.drop-barrier.patch.json");
    let out = gevod(&[
        "evolve",
        s(&common::spec_fixture("stencil")),
        "--state",
        s(&state),
        "--config",
        s(&config),
        "--generations",
        "3",
        "--workers",
        "2",
        "--start-from",
        s(&planted),
    ]);
    (state, String::from_utf8(out.stdout).unwrap())
}

#[test]
fn the_terminal_and_html_reports_name_the_barrier_at_its_source_line() {
    let dir = tempfile::tempdir().unwrap();
    let (state, terminal) = short_search(dir.path());
    assert!(terminal.contains(BARRIER_EDIT), "{terminal}");
    assert!(
        terminal.contains("stencil.cu:61 | __syncthreads();"),
        "{terminal}"
    );

    // Beside the validated best, how the train best went since, and the
    // generated tests it passed.
    assert!(
        terminal.contains(
            "\ntrain best against validated best: Nothing new validated in the 3 generations ("
        ),
        "{terminal}"
    );
    assert!(
        terminal
            .contains("  generated held-out tests passed (on the simulator):\n    generated[0] ("),
        "{terminal}"
    );

    // The edit contributions, measured before the report is written.
    let explained = gevod(&["explain-edits", s(&state)]);
    let explained = String::from_utf8(explained.stdout).unwrap();
    assert!(explained.contains("#1 carries speed"), "{explained}");

    let html_path = dir.path().join("report.html");
    gevod(&["report", s(&state), "-o", s(&html_path)]);
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains(BARRIER_EDIT), "{html}");
    let table = html
        .split("<table id=\"contribution-table\">")
        .nth(1)
        .expect("no contribution table");
    assert!(
        table.contains(&format!(
            "<td>#1 {BARRIER_EDIT}</td><td>stencil5</td><td>carries speed</td>"
        )),
        "{table:.600}"
    );
    assert!(html.contains("<span class=\"hit\">   61 |     __syncthreads();"));
    // No [tune] in its spec: no launch configuration section.
    assert!(!html.contains("id=\"launch\""), "{html}");
    train_against_validated(&state, &html);
    // The deleted barrier's ordered accesses, and its twin that orders them.
    let relies = html
        .split("<table id=\"relies-table\">")
        .nth(1)
        .expect("no relies-on table");
    assert!(
        relies.contains(
            "deleted the __syncthreads() at stencil.cu:61 ordered the shared-memory store to tile"
        ) && relies.contains("the __syncthreads() at stencil.cu:60 now orders them"),
        "{relies:.1200}"
    );
    for id in [
        "plot-cost",
        "plot-pareto",
        "plot-rate",
        "plot-contributions",
    ] {
        let figure = html
            .split(&format!("<figure id=\"{id}\">"))
            .nth(1)
            .unwrap_or_else(|| panic!("no figure {id}"));
        assert!(
            figure.trim_start().starts_with("<svg"),
            "{id}: {figure:.200}"
        );
    }
    // Self-contained: nothing to fetch, nothing to run.
    for banned in ["<script", " src=", " href=", "<link", "@import", "url("] {
        assert!(!html.contains(banned), "the report holds {banned}");
    }
    for reason in [
        "mismatch",
        "out of bounds",
        "race",
        "divergent barrier",
        "timeout",
        "sanitizer",
        "held-out",
    ] {
        assert!(
            html.contains(&format!("<tr><td>{reason}</td>")),
            "no {reason} row"
        );
    }

    let browser = match browser() {
        Ok(b) => b,
        Err(why) => {
            eprintln!("skipped the browser part: {why}");
            return;
        }
    };
    let profile = dir.path().join("profile");
    let url = format!("file://{}", html_path.display());
    let run = |extra: &[&str]| {
        let out = Command::new("timeout")
            .arg("120")
            .arg(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} {extra:?}: {}",
            browser.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };

    let dom = String::from_utf8(run(&["--dump-dom"]).stdout).unwrap();
    assert!(dom.contains(BARRIER_EDIT), "{dom}");
    assert!(dom.contains("stencil.cu:61"), "{dom}");
    assert_eq!(dom.matches("<svg").count(), 4, "{dom}");
    assert!(dom.contains("Edit contributions") && dom.contains("patch without the edit"));
    assert!(dom.contains("What each edit relies on") && dom.contains("now orders them"));
    assert!(dom.contains("Generated held-out tests") && dom.contains("generated[0]"));
    assert!(dom.contains("Generality in selection: "), "{dom}");

    let png = dir.path().join("report.png");
    run(&[
        &format!("--screenshot={}", png.display()),
        "--window-size=1000,3600",
    ]);
    if let Some(keep) = std::env::var_os("GEVO_REPORT_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
    let pixels = decode(&png);
    // Each plot's colours are on the screenshot: the train line (blue), the
    // validated line (green), the Pareto front (red), and the highlighted
    // source line (yellow).
    for (what, rgb) in [
        ("the train cost line", [31, 119, 180]),
        ("the validated cost line", [44, 160, 44]),
        ("the Pareto front", [214, 39, 40]),
        ("the edited source line", [255, 243, 176]),
        ("the patch without the edit", [255, 127, 14]),
    ] {
        let n = pixels.iter().filter(|p| close(**p, rgb)).count();
        assert!(n > 50, "{what}: {n} pixels of {rgb:?} on the screenshot");
    }
}

/// The cost plot's series against the report's numbers (`gevod report
/// --json`): the train best and the validated best (1 / the best's
/// speedup) a point per generation;
/// the sentence under the plot; the generated tests the variant passed,
/// each a row; selection's counts.
fn train_against_validated(state: &Path, html: &str) {
    let json = gevod(&["report", s(state), "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let course = json["course"].as_array().unwrap();
    assert_eq!(course.len(), 4, "generations 0 to 3: {json}");
    let count = |key: &str| course.iter().filter(|g| g[key].is_f64()).count();
    assert_eq!(count("train_best"), 4, "{json}");
    // The planted patch validates in generation 0: both series have a
    // point in every generation.
    assert_eq!(json["best"]["generation"], 0, "{json}");
    assert_eq!(count("validated_best"), 4, "{json}");
    let speedup = json["best"]["speedup"].as_f64().unwrap();
    let last = course[3]["validated_best"].as_f64().unwrap();
    assert!(
        (last - 1.0 / speedup).abs() < 1e-12,
        "{last} against {speedup}"
    );

    let plot = html
        .split("<figure id=\"plot-cost\">")
        .nth(1)
        .and_then(|f| f.split("</figure>").next())
        .expect("no cost plot");
    // Train: blue, radius 2; validated: green, radius 3. Each series is a
    // line through its points, then its legend's two-point line.
    assert_eq!(points(plot, "#1F77B4", 2), 4, "{plot}");
    assert_eq!(points(plot, "#2CA02C", 3), 4, "{plot}");
    assert_eq!(lines(plot, "#1F77B4"), [4, 2], "{plot}");
    assert_eq!(lines(plot, "#2CA02C"), [4, 2], "{plot}");
    let sentence = json["since_validated"].as_str().unwrap();
    assert!(
        html.contains(&format!("<p id=\"train-validated\">{sentence}</p>")),
        "{sentence}"
    );

    let generated = &json["generated"];
    let passed = generated["passed"].as_array().unwrap();
    assert!(!passed.is_empty(), "{json}");
    let table = common::html_table(html, "generated-tests");
    assert_eq!(
        table.matches("<td>pass</td>").count(),
        passed.len(),
        "{table}"
    );
    for t in passed {
        let row = format!(
            "<tr><td>{}</td><td>{}</td><td>pass</td></tr>",
            t["test"].as_str().unwrap(),
            t["why"].as_str().unwrap()
        );
        assert!(table.contains(&row), "{row} not in {table}");
    }
    assert!(
        table.contains("<tr><td>generated[0]</td><td>nx = 7, ny = 7: one partial block</td>"),
        "{table}"
    );
    let checks = generated["selection_checks"].as_u64().unwrap();
    assert!(
        checks > 0,
        "the planted variant ran them in selection: {json}"
    );
    assert!(
        html.contains(&format!(
            "<p id=\"generality\">Generality in selection: {checks} variant{} ran the generated held-out tests in selection (each PTX once); {} evaluation",
            if checks == 1 { "" } else { "s" },
            generated["selection_rejections"].as_u64().unwrap()
        )),
        "{:.400}",
        html.split("<p id=\"generality\">").nth(1).unwrap_or("no generality paragraph")
    );
}

/// The points of a plot drawn as filled circles of `fill` and radius `r`.
fn points(svg: &str, fill: &str, r: u32) -> usize {
    svg.matches(&format!("r=\"{r}\" opacity=\"1\" fill=\"{fill}\""))
        .count()
}

/// The vertex counts of a plot's lines of `stroke` drawn 2 wide.
fn lines(svg: &str, stroke: &str) -> Vec<usize> {
    let style = format!("stroke=\"{stroke}\" stroke-width=\"2\" points=\"");
    svg.lines()
        .filter_map(|l| l.split(&style).nth(1))
        .map(|points| points.split('"').next().unwrap().split_whitespace().count())
        .collect()
}

/// The browser to run: `GEVO_CHROMIUM`, else chromium or chrome on the
/// PATH, provided it starts.
fn browser() -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = match std::env::var_os("GEVO_CHROMIUM") {
        Some(b) => vec![PathBuf::from(b)],
        None => [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ]
        .iter()
        .filter_map(|name| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .collect(),
    };
    let Some(first) = candidates.first() else {
        return Err(
            "no chromium found (scripts/install-deps.sh installs Debian's; GEVO_CHROMIUM names another)"
                .into(),
        );
    };
    let out = Command::new("timeout")
        .arg("60")
        .arg(first)
        .args(["--headless", "--no-sandbox", "--version"])
        .output()
        .map_err(|e| format!("{} cannot start: {e}", first.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot start (a snap outside snapd?): {}",
            first.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(first.clone())
}

/// RGB pixels of a PNG.
fn decode(path: &Path) -> Vec<[u8; 3]> {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    buf[..info.buffer_size()]
        .chunks(channels)
        .map(|c| [c[0], c[1], c[2]])
        .collect()
}

fn close(p: [u8; 3], rgb: [u8; 3]) -> bool {
    p.iter().zip(rgb).all(|(a, b)| a.abs_diff(b) <= 6)
}
