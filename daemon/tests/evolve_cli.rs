//! `gevod evolve` as a user runs it: the report, the exported variant,
//! resume across processes, SIGKILL at random moments, Ctrl-C, bad input.

use crate::common;

use gevo_search::store::Store;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn gevod() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gevod"));
    c.env_remove("GEVOD_LOG");
    c
}

/// A small search configuration, so each run takes a second or two.
fn small_config(dir: &Path, population: usize) -> PathBuf {
    let path = dir.join("evolve.toml");
    std::fs::write(&path, format!("[evolve]\npopulation = {population}\n")).unwrap();
    path
}

fn evolve(args: &[&str]) -> Output {
    gevod().arg("evolve").args(args).output().unwrap()
}

/// `gevod evolve` on the stencil fixture with `state` and `config`, then
/// `extra`.
fn evolve_stencil(state: &Path, config: &Path, extra: &[&str]) -> Output {
    let spec = common::spec_fixture("stencil");
    let head = [s(&spec), "--state", s(state), "--config", s(config)];
    evolve(&[&head[..], extra].concat())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Opens the store of a gevod just killed. A worker it was starting may
/// hold the store's file for a moment (a child process shares its parent's
/// descriptors between fork and exec), so a lock still held is retried for
/// up to 5 s; any other error fails at once.
fn open_after_kill(state: &Path) -> Store {
    let started = std::time::Instant::now();
    loop {
        match Store::open(state) {
            Ok(store) => return store,
            Err(e)
                if format!("{e:?}").contains("DatabaseAlreadyOpen")
                    && started.elapsed().as_secs() < 5 =>
            {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("{e}"),
        }
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The only job in a state directory, and its engine.
fn checkpoint(state: &Path) -> Option<(String, gevo_search::evolve::Engine)> {
    let store = open_after_kill(state);
    let jobs = store.jobs().unwrap();
    assert!(jobs.len() <= 1, "{jobs:?}");
    let id = jobs.into_iter().next()?;
    store.checkpoint(&id).unwrap().map(|e| (id, e))
}

#[test]
fn evolve_finds_and_exports_a_validated_stencil_variant() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = small_config(dir.path(), 48);
    let out = evolve_stencil(
        &state,
        &config,
        &["--generations", "20", "--seed", "2", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["generations"], 20);
    assert_eq!(report["backend"], "sim");
    let best = &report["best"];
    assert!(best["speedup"].as_f64().unwrap() > 1.0, "{report}");
    assert!(best["edits_after"].as_u64().unwrap() <= best["edits_before"].as_u64().unwrap());
    assert!(!report["pareto"].as_array().unwrap().is_empty());
    // Progress went to stderr, one line per generation.
    assert_eq!(text(&out.stderr).matches("generation ").count(), 21);
    // The best variant's edit contributions, measured at the end on the
    // search's backend: one class per minimized edit, some carrying speed.
    let c = &report["contributions"];
    assert_eq!(c["scope"]["backend"], "sim", "{report}");
    let classes: Vec<&str> = c["edits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["class"].as_str().unwrap())
        .collect();
    assert_eq!(classes.len() as u64, best["edits_after"].as_u64().unwrap());
    assert!(classes.contains(&"carries_speed"), "{c}");

    // `gevod report --json` reads the same numbers back from the store.
    let summary = gevod()
        .args(["report", s(&state), "--json"])
        .output()
        .unwrap();
    assert!(summary.status.success(), "{}", text(&summary.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&summary.stdout).unwrap();
    assert_eq!(summary["backend"], "sim");
    assert_eq!(summary["job"], report["job"]);
    assert_eq!(summary["evaluations"], report["evaluations"]);
    assert_eq!(summary["generations"], 21, "generation 0 and 20 more");
    assert_eq!(summary["best"]["speedup"], best["speedup"]);
    assert!(
        summary["utilization"].is_null(),
        "the simulator has no GPU workers"
    );

    // The exported PTX is real PTX for the kernel, and the minimized patch
    // runs faster than the original on every test.
    let ptx = std::fs::read_to_string(best["ptx"].as_str().unwrap()).unwrap();
    assert!(ptx.contains(".entry stencil5"), "{ptx}");
    let run = gevod()
        .args(["run", s(&common::spec_fixture("stencil")), "--patch"])
        .arg(best["minimized_patch"].as_str().unwrap())
        .args(["--json"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(rows.len(), 5);
    for r in rows {
        assert!(r["cost_ratio"].as_f64().unwrap() < 1.0, "{r}");
    }

    // The text report names the same things.
    let again = evolve_stencil(
        &state,
        &config,
        &["--generations", "20", "--seed", "2", "--resume"],
    );
    assert!(again.status.success(), "{}", text(&again.stderr));
    let t = text(&again.stdout);
    for needle in [
        "best validated variant",
        "speedup",
        "after minimization",
        "heldout[0]",
        "Pareto front",
        "best.ptx",
    ] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
}

#[test]
fn resuming_in_a_new_process_equals_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path(), 16);
    let run = |state: &Path, generations: &str, resume: bool| {
        let mut args = vec![
            s(&common::spec_fixture("stencil")).to_string(),
            "--state".into(),
            s(state).into(),
            "--config".into(),
            s(&config).into(),
            "--generations".into(),
            generations.into(),
        ];
        if resume {
            args.push("--resume".into());
        }
        let out = gevod().arg("evolve").args(&args).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    run(&a, "3", false);
    run(&a, "6", true);
    run(&b, "6", false);
    let (ja, ea) = checkpoint(&a).unwrap();
    let (jb, eb) = checkpoint(&b).unwrap();
    assert_eq!(ja, jb);
    assert_eq!(ea.generations(), 7);
    assert_eq!(ea, eb);
}

#[test]
fn the_search_does_not_depend_on_the_worker_count() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path(), 24);
    let mut engines = Vec::new();
    for workers in ["1", "2", "3"] {
        let state = dir.path().join(workers);
        // expf: its PTX has call sites, which LLVM numbers process-wide.
        let out = gevod()
            .args([
                "evolve",
                s(&common::spec_fixture("expf")),
                "--state",
                s(&state),
                "--config",
                s(&config),
            ])
            .args(["--generations", "3", "--workers", workers])
            .env("GEVO_LIBDEVICE", common::libdevice_stub())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        engines.push(checkpoint(&state).unwrap().1);
    }
    assert_eq!(engines[0], engines[1]);
    assert_eq!(engines[0], engines[2]);
}

#[test]
fn sigkill_at_random_moments_never_loses_a_committed_generation() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path(), 16);
    // Long enough that 20 kills (about 7 s of running) never see it finish.
    let generations = "150";
    let args = |state: &Path| {
        vec![
            "evolve".to_string(),
            s(&common::spec_fixture("stencil")).into(),
            "--state".into(),
            s(state).into(),
            "--config".into(),
            s(&config).into(),
            "--generations".into(),
            generations.into(),
            "--resume".into(),
        ]
    };
    // The reference: the same job, never interrupted.
    let reference = dir.path().join("reference");
    let out = gevod().args(args(&reference)).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (_, expected) = checkpoint(&reference).unwrap();

    let state = dir.path().join("killed");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let mut committed = 0u64;
    let mut kills = 0;
    while kills < 20 {
        let mut child = gevod()
            .args(args(&state))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..700)));
        assert!(
            child.try_wait().unwrap().is_none(),
            "kill {kills}: the run finished before it could be killed"
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        // The store opens, every committed generation is there and readable,
        // and nothing committed before was lost.
        if let Some((job, engine)) = checkpoint(&state) {
            let store = open_after_kill(&state);
            assert!(engine.generations() >= committed, "kill {kills}: went back");
            for g in 0..engine.generations() {
                assert!(
                    store.generation(&job, g).unwrap().is_some(),
                    "kill {kills}: generation {g}"
                );
            }
            committed = engine.generations();
        }
    }
    // Finish the job; it must equal the uninterrupted one exactly.
    let out = gevod().args(args(&state)).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (_, resumed) = checkpoint(&state).unwrap();
    assert_eq!(resumed, expected, "after {kills} kills");
}

#[test]
fn ctrl_c_checkpoints_and_exits_130_and_resume_continues() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = small_config(dir.path(), 16);
    let mut child = gevod()
        .args([
            "evolve",
            s(&common::spec_fixture("stencil")),
            "--state",
            s(&state),
            "--config",
            s(&config),
        ])
        .args(["--generations", "100000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    for line in BufReader::new(stderr).lines() {
        if line.unwrap().starts_with("generation   2") {
            break;
        }
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert!(
        text(&out.stdout).contains("interrupted"),
        "{}",
        text(&out.stdout)
    );
    let (_, engine) = checkpoint(&state).unwrap();
    assert!(engine.generations() >= 3);
    let more = engine.generations() + 1;
    let out = evolve_stencil(
        &state,
        &config,
        &["--generations", &more.to_string(), "--resume"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(checkpoint(&state).unwrap().1.generations(), more + 1);
}

#[test]
fn bad_input_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let bad_key = dir.path().join("bad.toml");
    std::fs::write(&bad_key, "[evolve]\npopulaton = 8\n").unwrap();
    let bad_value = dir.path().join("value.toml");
    std::fs::write(&bad_value, "[evolve]\nmutation_rate = 2.0\n").unwrap();
    let bad_cluster = dir.path().join("cluster.toml");
    std::fs::write(&bad_cluster, "[cluster]\nlauncher = \"pbs\"\n").unwrap();
    let huge = dir.path().join("huge.toml");
    std::fs::write(&huge, "[evolve]\npopulation = 1000000000\n").unwrap();
    let config = small_config(dir.path(), 8);
    let vecadd = common::spec_fixture("vecadd");
    let first = evolve(&[
        s(&vecadd),
        "--state",
        s(&state),
        "--config",
        s(&config),
        "--generations",
        "0",
    ]);
    assert!(first.status.success(), "{}", text(&first.stderr));

    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec![s(&vecadd), "--backend", "cuda", "--state", s(&state)],
            vec!["--backend cuda"],
        ),
        (
            vec![s(&vecadd), "--state", s(&state), "--config", s(&bad_key)],
            vec!["bad.toml", "populaton"],
        ),
        (
            vec![s(&vecadd), "--state", s(&state), "--config", s(&bad_value)],
            vec!["value.toml", "mutation_rate"],
        ),
        (
            vec![
                s(&vecadd),
                "--state",
                s(&state),
                "--config",
                s(&config),
                "--generations",
                "0",
            ],
            vec!["already has a checkpoint", "--resume"],
        ),
        (
            vec!["/nonexistent/k.gevo.toml", "--state", s(&state)],
            vec!["/nonexistent/k.gevo.toml"],
        ),
        (
            vec![s(&vecadd), "--backend", "sim", "--devices", "0,1"],
            vec!["--devices needs a GPU backend"],
        ),
        (
            vec![
                s(&vecadd),
                "--state",
                s(&state),
                "--config",
                s(&bad_cluster),
            ],
            vec!["cluster.toml:2", "`pbs`, expected `local` or `slurm`"],
        ),
        // Numbers out of their documented range: the key, the value and the range.
        (
            vec![s(&vecadd), "--state", s(&state), "--config", s(&huge)],
            vec!["huge.toml: evolve.population: 1000000000 is out of range (4 to 65536)"],
        ),
        (
            vec![s(&vecadd), "--state", s(&state), "--workers", "100000"],
            vec!["--workers: 100000 is out of range (1 to 1024)"],
        ),
        (
            vec![s(&vecadd), "--state", s(&state), "--workers", "0"],
            vec!["--workers: 0 is out of range (1 to 1024)"],
        ),
        (
            vec![s(&vecadd), "--state", s(&state), "--worker-timeout", "1e9"],
            vec!["--worker-timeout: 1000000000 s is out of range (1s to 24h)"],
        ),
        (
            vec![s(&vecadd), "--slurm", "--gpu-steps", "5000"],
            vec!["--gpu-steps: 5000 is out of range (1 to 1024)"],
        ),
    ];
    for (args, needles) in cases {
        let out = evolve(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: {n:?} not in {err}");
        }
    }
    // Command-line syntax errors are clap's: exit 2, naming the flag.
    let out = evolve(&[s(&vecadd), "--time", "ten minutes"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--time") && err.contains("expected a duration"),
        "{err}"
    );
    // Slurm options without --slurm are refused by clap too.
    let out = evolve(&[s(&vecadd), "--srun-arg=--partition=gpu"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--slurm"),
        "{}",
        text(&out.stderr)
    );
    // The checkpoint made before is still there.
    assert_eq!(checkpoint(&state).unwrap().1.generations(), 1);
}

/// A job that never stops commits a generation after another: its store
/// stays bounded (old generations keep their statistics, not their
/// populations; the file is compacted when opened), resume still has the
/// whole engine, and the report still draws every plot.
#[test]
fn ten_thousand_generations_keep_the_store_bounded() {
    const GENERATIONS: u64 = 10_000;
    /// The stated bound (docs/daemon.md): the file for this job after
    /// 10,000 generations at population 16, compacted.
    const BOUND: u64 = 10 << 20;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = small_config(dir.path(), 16);
    let out = evolve_stencil(&state, &config, &["--generations", "3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (id, engine) = checkpoint(&state).unwrap();
    let first = engine.generations();
    let plots_before = report_plots(&state, dir.path());
    let file = state.join(gevo_search::store::FILE_NAME);
    {
        let store = Store::open(&state).unwrap();
        let last = store.generation(&id, first - 1).unwrap().unwrap();
        assert!(!last.population.is_empty());
        let mut report = last.report.clone();
        // Validated variants come one per improvement, not every
        // generation; promotion failures may (the store keeps the newest).
        report.validated.clear();
        // The test hook: the same engine committed as further generations,
        // each record as large as a real one of this search.
        for g in first..first + GENERATIONS {
            report.generation = g;
            store
                .commit_generation_took(&id, &engine, &report, Some(0.5))
                .unwrap();
        }
    }
    let store = Store::open(&state).unwrap();
    let size = std::fs::metadata(&file).unwrap().len();
    println!("store after {GENERATIONS} generations: {size} bytes (bound {BOUND})");
    let records = store.generations(&id).unwrap();
    assert_eq!(records.len() as u64, first + GENERATIONS);
    let full = gevo_search::store::FULL_GENERATIONS as usize;
    let (old, recent) = records.split_at(records.len() - full);
    assert!(size < BOUND, "{size} bytes");
    assert!(old.iter().all(|r| r.population.is_empty()));
    assert!(recent.iter().all(|r| !r.population.is_empty()));
    assert!(old
        .iter()
        .all(|r| r.seconds == Some(0.5) || r.report.generation < first));
    assert_eq!(store.checkpoint(&id).unwrap(), Some(engine));
    drop(store);
    assert!(plots_before >= 2, "{plots_before} plots");
    assert_eq!(report_plots(&state, dir.path()), plots_before);
}

/// The number of plots in `gevod report`'s page for the only job.
fn report_plots(state: &Path, dir: &Path) -> usize {
    let html = dir.join("report.html");
    let out = gevod()
        .args(["report", s(state), "-o", s(&html)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::read_to_string(&html)
        .unwrap()
        .matches("<svg")
        .count()
}

/// The largest population allowed takes minutes to build (each individual
/// is the IR plus random valid edits): SIGTERM, and the time budget, end
/// the set-up within a second or two, with the report and the usual exit
/// status (130 after a signal, 0 when the budget is spent).
#[test]
fn setting_up_a_large_population_honours_sigterm_and_the_time_budget() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path(), gevo_search::evolve::ranges::POPULATION.max);
    for (name, budget, signal, status) in [
        ("sigterm", "--generations", true, 130),
        ("time", "--time", false, 0),
    ] {
        let state = dir.path().join(name);
        let started = std::time::Instant::now();
        let mut child = gevod()
            .args([
                "evolve",
                s(&common::spec_fixture("stencil")),
                "--workers",
                "1",
            ])
            .args(["--state", s(&state), "--config", s(&config)])
            .args([budget, if signal { "10" } else { "1s" }])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let asked = if signal {
            std::thread::sleep(Duration::from_secs(1));
            // SAFETY: kill(2) on our own child; no memory is involved.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            std::time::Instant::now()
        } else {
            started + Duration::from_secs(1)
        };
        let deadline = asked + Duration::from_secs(10);
        let exit = loop {
            if let Some(exit) = child.try_wait().unwrap() {
                break exit;
            }
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("{name}: still running 10 s after it should have stopped");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let took = asked.elapsed();
        let out = child.wait_with_output().unwrap();
        assert_eq!(exit.code(), Some(status), "{name}: {}", text(&out.stderr));
        // A loaded CI machine is slow; the set-up's own pace is a few ms an individual.
        assert!(
            took < Duration::from_secs(3),
            "{name}: stopped {took:?} after"
        );
        let report = text(&out.stdout);
        assert!(
            report.contains("generations 0,"),
            "{name}: no report: {report}"
        );
        assert_eq!(report.contains("interrupted"), signal, "{name}: {report}");
        // Nothing was committed: a resume builds the same population again.
        assert_eq!(checkpoint(&state).unwrap().1.generations(), 0);
    }
}
