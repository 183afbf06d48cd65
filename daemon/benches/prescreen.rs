//! What the GPU backend's pre-screen (docs/evolve.md, "The pre-screen")
//! costs a compile worker and what it decides, `all` against `smallest`:
//! random variants of each fixture with GPU-sized tests (1 to 4 edits from
//! the original, seeds 1 to N) screened in process, as a compile worker
//! screens them, on the fixture's simulator train tests. The counts (tests
//! run, variants rejected and why) are the same on every machine; the CPU
//! seconds are this thread's, the two placements alternating per variant.
//!
//! Run with `cargo bench -p gevod --bench prescreen --profile dev` (`PRESCREEN_VARIANTS`:
//! variants of each kind per fixture, 1000 unless set); it rewrites its section of
//! BENCHMARKS.md.

mod report;
use report::repo_root;

use gevo_ir::{CodegenOptions, KernelIr, Patch};
use gevo_model::spec::{self, TestSet, TestTarget};
use gevod::config::Prescreen;
use gevod::worker::InProcess;
use std::collections::BTreeMap;
use std::time::Duration;

const FIXTURES: [&str; 8] = [
    "kernels/stencil",
    "kernels/reduce",
    "kernels/nw",
    "kernels/loops",
    "general/wholetile",
    "pipelines/wavefront",
    "pipelines/lu",
    "pipelines/pyramid",
];

/// One placement's totals over a fixture's variants.
#[derive(Default, Clone, Copy)]
struct Side {
    runs: usize,
    /// The buffer bytes of the tests run: the simulator's work, roughly.
    bytes: u64,
    rejected: usize,
    cpu: Duration,
}

/// One kind of variant of a fixture: both placements, and of the variants
/// `all` rejects, by reason, how many and how many `smallest` rejects too.
#[derive(Default)]
struct Kind {
    variants: usize,
    /// Replaying the patch and lowering it for the simulator, which both
    /// placements pay once per variant.
    lower: Duration,
    all: Side,
    smallest: Side,
    reasons: BTreeMap<String, (usize, usize)>,
}

/// A fixture's row: fresh variants (1 to 4 edits from the original) and
/// children (one edit more on a fresh variant that passed `all`, as the
/// search breeds from its population).
struct Row {
    name: String,
    train: usize,
    fresh: Kind,
    children: Kind,
}

/// The reason a rejection is counted under (both races as one).
fn reason(kind: &str) -> String {
    match kind {
        "global_race" => "race".into(),
        "step_budget" => "loop".into(),
        other => other.into(),
    }
}

/// What a compile worker screens with: the worker, and its train tests'
/// buffer bytes, least first (the order it runs them in).
struct Screen {
    worker: InProcess,
    bytes: Vec<u64>,
}

fn screen(on: &Screen, patch: &Patch, placement: Prescreen, side: &mut Side) -> Option<String> {
    let started = report::thread_cpu();
    let screened = on
        .worker
        .screen(patch, placement)
        .expect("the pre-screen judges");
    side.cpu += report::thread_cpu() - started;
    side.runs += screened.runs;
    side.bytes += on.bytes[..screened.runs].iter().sum::<u64>();
    let kind = screened
        .rejected
        .map(|a| a.tests[0].failure.clone().expect("rejected").0);
    side.rejected += usize::from(kind.is_some());
    kind
}

/// Both placements on `patch` (which first alternates with `seed`);
/// whether `all` passed it.
fn both(worker: &Screen, ir: &KernelIr, patch: &Patch, seed: u64, kind: &mut Kind) -> bool {
    kind.variants += 1;
    let started = report::thread_cpu();
    let _ = ir.lower_all(patch);
    kind.lower += report::thread_cpu() - started;
    let (all, smallest) = match seed % 2 {
        0 => {
            let a = screen(worker, patch, Prescreen::All, &mut kind.all);
            (
                a,
                screen(worker, patch, Prescreen::Smallest, &mut kind.smallest),
            )
        }
        _ => {
            let s = screen(worker, patch, Prescreen::Smallest, &mut kind.smallest);
            (screen(worker, patch, Prescreen::All, &mut kind.all), s)
        }
    };
    let Some(verdict) = all else {
        return true;
    };
    let counts = kind.reasons.entry(reason(&verdict)).or_default();
    counts.0 += 1;
    counts.1 += usize::from(smallest.is_some());
    false
}

fn measure(name: &str, variants: u64, codegen: &CodegenOptions) -> Row {
    let path = repo_root().join(format!("tests/fixtures/{name}.gevo.toml"));
    let spec = spec::load(&path)
        .expect("fixture spec loads")
        .for_backend(TestTarget::Sim);
    let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).expect("fixture loads");
    let train = spec.tests(TestSet::Train).len();
    let mut bytes: Vec<u64> = spec
        .tests(TestSet::Train)
        .into_iter()
        .map(|t| spec.buffer_bytes(t).expect("sizes") as u64)
        .collect();
    bytes.sort();
    let worker = Screen {
        worker: InProcess::new(spec, codegen.clone()).expect("a compile worker"),
        bytes,
    };
    // The references are made once, on the first variant: the original's.
    let empty = ir.empty_patch();
    let original = worker
        .worker
        .screen(&empty, Prescreen::All)
        .expect("screens");
    assert!(
        original.rejected.is_none(),
        "{name}: the original is rejected"
    );
    let mut row = Row {
        name: name.rsplit('/').next().unwrap_or(name).into(),
        train,
        fresh: Kind::default(),
        children: Kind::default(),
    };
    report::bred_variants(&ir, variants, |patch, seed, child| {
        let kind = match child {
            false => &mut row.fresh,
            true => &mut row.children,
        };
        both(&worker, &ir, patch, seed, kind)
    });
    for (what, k) in [("fresh", &row.fresh), ("children", &row.children)] {
        println!(
            "{:10} {what:8} {} variants: all {} runs {} rejected {:.2}s; smallest {} runs {} rejected {:.2}s",
            row.name,
            k.variants,
            k.all.runs,
            k.all.rejected,
            k.all.cpu.as_secs_f64(),
            k.smallest.runs,
            k.smallest.rejected,
            k.smallest.cpu.as_secs_f64()
        );
    }
    row
}

fn percent(part: usize, whole: usize) -> String {
    match whole {
        0 => "-".into(),
        _ => format!("{:.0}%", 100.0 * part as f64 / whole as f64),
    }
}

fn reasons(r: &BTreeMap<String, (usize, usize)>) -> String {
    let why: Vec<String> = r
        .iter()
        .map(|(k, (a, s))| format!("{k} {a} ({})", percent(*s, *a)))
        .collect();
    why.join(", ")
}

/// A cell of both kinds: fresh / children.
fn pair(f: impl Fn(&Kind) -> String, fresh: &Kind, children: &Kind) -> String {
    format!("{} / {}", f(fresh), f(children))
}

/// The share of `all`'s CPU that is not the simulator's runs.
fn lowering(k: &Kind) -> String {
    percent(k.lower.as_micros() as usize, k.all.cpu.as_micros() as usize)
}

fn bytes(k: &Kind) -> String {
    format!("{:.2}", k.smallest.bytes as f64 / k.all.bytes.max(1) as f64)
}

fn ratio(k: &Kind) -> String {
    format!(
        "{:.2}",
        k.smallest.cpu.as_secs_f64() / k.all.cpu.as_secs_f64().max(1e-9)
    )
}

/// Adds `k` into `total`.
fn add(total: &mut Kind, k: &Kind) {
    total.variants += k.variants;
    total.lower += k.lower;
    for (t, s) in [(&mut total.all, &k.all), (&mut total.smallest, &k.smallest)] {
        t.runs += s.runs;
        t.bytes += s.bytes;
        t.rejected += s.rejected;
        t.cpu += s.cpu;
    }
    for (reason, (a, s)) in &k.reasons {
        let t = total.reasons.entry(reason.clone()).or_default();
        t.0 += a;
        t.1 += s;
    }
}

/// A row of the table: both kinds of variant, and the reasons of both.
fn line(name: &str, train: &str, fresh: &Kind, children: &Kind) -> String {
    let per = |runs: usize, k: &Kind| format!("{:.2}", runs as f64 / k.variants.max(1) as f64);
    let mut both = Kind::default();
    add(&mut both, fresh);
    add(&mut both, children);
    format!(
        "| {name} | {train} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        pair(|k| k.variants.to_string(), fresh, children),
        pair(|k| per(k.all.runs, k), fresh, children),
        pair(|k| per(k.smallest.runs, k), fresh, children),
        pair(|k| k.all.rejected.to_string(), fresh, children),
        pair(|k| k.smallest.rejected.to_string(), fresh, children),
        pair(bytes, fresh, children),
        pair(ratio, fresh, children),
        pair(lowering, fresh, children),
        reasons(&both.reasons),
    )
}

fn table(rows: &[Row], variants: u64) -> String {
    let mut body = format!(
        "## The pre-screen: `all` against `smallest` (simulator, in process)\n\n\
         Machine: {}. Date: {}. Commit: {}. Command: `PRESCREEN_VARIANTS={variants} cargo bench -p gevod --bench prescreen \
         --profile dev`. A compile worker's pre-screen on the sim train tests of each fixture with GPU-sized tests, `all` \
         (every train test, least input bytes first) against `smallest` (the first). Each cell: fresh variants (1 to 4 \
         random edits from the original, seeds 1 to {variants}) / children (one edit more on a fresh variant `all` \
         passed, as the search breeds). Runs and rejections are counts (the same on every machine); CPU is one thread's, \
         the placements alternating per variant; bytes simulated: the buffer bytes of the tests run, roughly the \
         simulator's work; lowering: the share of `all`'s CPU that replaying the patch and lowering it for the simulator \
         takes (each placement pays it once a variant; the rest is the simulator's runs). Rejected by `all`, by its verdict \
         (loop: the step budget), fresh and children together: how many, and the share `smallest` rejects too.\n\n\
         | fixture | train tests | variants | runs/variant all | runs smallest | rejected all | rejected smallest | \
         bytes simulated smallest/all | CPU smallest/all | lowering | rejected by `all` (smallest too) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
        report::machine(),
        report::today(),
        report::commit(),
    );
    let (mut fresh, mut children) = (Kind::default(), Kind::default());
    for r in rows {
        body += &line(&r.name, &r.train.to_string(), &r.fresh, &r.children);
        add(&mut fresh, &r.fresh);
        add(&mut children, &r.children);
    }
    body += &line("**all**", "-", &fresh, &children);
    body
}

fn main() {
    let root = repo_root();
    let codegen = report::stub_codegen();
    let variants = report::setting("PRESCREEN_VARIANTS", 1000) as u64;
    let rows: Vec<Row> = FIXTURES
        .iter()
        .map(|f| measure(f, variants, &codegen))
        .collect();
    report::write_section(
        &root.join("BENCHMARKS.md"),
        "prescreen",
        &table(&rows, variants),
    );
}
