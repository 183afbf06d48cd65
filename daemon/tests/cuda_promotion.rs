//! The GPU backend's measurement and promotion without a GPU: racing
//! train measurements against the selection threshold, a standby worker,
//! assembling in the compile workers, and promotion measured beside the
//! next batch (its pauses, stops and a lost GPU).

use crate::common;
use crate::common::gpu_backend::*;

use gevo_model::spec::TestSet;
use gevo_search::evolve::{Backend, Config, Engine};
use gevod::cuda::measure::Measurement;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Adaptive measurement through the engine: every train measurement of the
/// search races against the engine's selection threshold (the original's
/// 1.0 for the initial population), promotion's held-out ones never do,
/// and each generation's utilization counts the stand-in worker's rounds
/// and times. With fixed measurement nothing races.
#[test]
fn the_search_races_train_measurements_against_the_selection_threshold() {
    for measurement in [Measurement::Adaptive, Measurement::Fixed] {
        let dir = tempfile::tempdir().unwrap();
        let (gpu, races) = fake_gpu_logging_races(dir.path());
        let spec = common::spec_fixture("vecadd");
        let mut backend = start_measuring(&spec, gpu, false, measurement);
        let config = Config {
            population: 16,
            islands: 1,
            // The fake GPU's costs are made up: selection on the generated
            // tests (real simulator runs) would reject what it calls faster.
            generality_in_selection: false,
            ..Config::default()
        };
        let mut engine = Engine::new(config, 7).unwrap();
        let ir = common::load("vecadd");
        let mut reports = Vec::new();
        let mut seen = 0;
        let mut lines_per_generation = Vec::new();
        for _ in 0..3 {
            reports.push(engine.step(&ir, &mut backend).unwrap());
            let text = std::fs::read_to_string(&races).unwrap_or_default();
            let lines: Vec<String> = text.lines().skip(seen).map(String::from).collect();
            seen += lines.len();
            lines_per_generation.push(lines);
        }
        for (report, lines) in reports.iter().zip(&lines_per_generation) {
            let train: Vec<&str> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("train "))
                .collect();
            for l in lines.iter().filter(|l| !l.starts_with("train ")) {
                assert!(l.ends_with(" -"), "a promotion raced: {l}");
            }
            let u = report
                .utilization
                .as_ref()
                .expect("the GPU backend reports");
            assert_eq!(u.measured as usize, train.len(), "{measurement:?}");
            assert_eq!(u.timed, u.measured, "the stand-in passes every variant");
            assert_eq!(
                u.rounds,
                5 * u.stopped_early + 15 * (u.timed - u.stopped_early)
            );
            assert!(u.spent.timing_s >= u.rounds as f64 / 1000.0 - 1e-9, "{u:?}");
            assert!(u.spent.compile_s > 0.0 && u.wall_s > 0.0, "{u:?}");
            assert_eq!((u.gpu_workers, u.compile_workers), (1, 2));
            // The first generation counts the GPU worker's start; the
            // stand-in never needs a replacement.
            let first = report.generation == 0;
            assert_eq!(u.gpu_starts, u64::from(first), "{u:?}");
            assert_eq!(u.gpu_start_s > 0.0, first, "{u:?}");
            let parts = (u.gpu_start_parts.inputs_s, u.gpu_start_parts.upload_s);
            assert_eq!(parts, if first { (0.5, 0.25) } else { (0.0, 0.0) });
            match measurement {
                Measurement::Fixed => {
                    assert!(train.iter().all(|r| *r == "-"), "{train:?}");
                    assert_eq!(u.stopped_early, 0);
                }
                Measurement::Adaptive => {
                    assert!(train.iter().all(|r| *r != "-"), "{train:?}");
                    if report.generation == 0 {
                        assert!(train.iter().all(|r| r.parse::<f64>() == Ok(1.0)));
                    }
                }
            }
        }
        if measurement == Measurement::Adaptive {
            let stopped: u64 = reports
                .iter()
                .map(|r| r.utilization.as_ref().unwrap().stopped_early)
                .sum();
            let timed: u64 = reports
                .iter()
                .map(|r| r.utilization.as_ref().unwrap().timed)
                .sum();
            assert!(stopped > 0 && stopped < timed, "{stopped} of {timed}");
            // Each side's stops are counted: the stand-in stops a variant
            // more than 10% below the line as better.
            let better: u64 = reports
                .iter()
                .map(|r| r.utilization.as_ref().unwrap().stopped_better)
                .sum();
            println!("{stopped} of {timed} stopped early, {better} as better");
            assert!(better > 0 && better < stopped, "{better} of {stopped}");
            // Later generations race against the elite's cutoff, below 1.0.
            let later: Vec<f64> = lines_per_generation[2]
                .iter()
                .filter_map(|l| l.strip_prefix("train "))
                .map(|r| r.parse().unwrap())
                .collect();
            assert!(later.iter().all(|&r| r < 1.0), "{later:?}");
        }
    }
}

/// With a standby GPU worker, a variant that crashes the worker is
/// answered as before, and the next variants go to the spare, which was
/// started and greeted beforehand (no wait for a new start), while a new
/// spare starts behind it.
#[test]
fn a_standby_gpu_worker_takes_over_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut gpu = fake_gpu("3:crash 9:hang", &dir.path().join("counter"));
    gpu.standby = true;
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let results = backend
        .evaluate(&patches(11, 24), TestSet::Train, &|_| false)
        .unwrap();
    let seen = measured(&results);
    assert!(seen.len() >= 10, "only {} variants measured", seen.len());
    // The GPU side takes variants as they compile: the 3rd and 9th requests
    // are some variants', one each.
    assert_eq!(failures(&seen), ["timed out", "worker crashed"], "{seen:?}");
    let u = backend.take_utilization().unwrap();
    assert_eq!(backend.respawns(), 2);
    assert_eq!(u.gpu_starts, 3, "the first worker and two replacements");
    assert_eq!(
        backend.standby_swaps(),
        2,
        "both replacements were ready spares"
    );
}

/// With `cubin_for`, the compile workers assemble the guarded build of each
/// variant that passes the pre-screen with ptxas (a stand-in here, named by
/// GEVO_PTXAS), and every measure request carries that cubin; the variant's
/// own only where the simulator saw it pass every train test (else the GPU
/// worker assembles it while it checks, as most fail); where ptxas
/// refuses, the variant is measured from its PTX alone. ptxas's time is
/// counted.
#[test]
fn compile_workers_assemble_the_measured_variants_for_the_gpu() {
    use base64::Engine as _;
    let fake_ptxas = common::repo_root().join("tests/fixtures/fake/ptxas.sh");
    for (ptxas, assembles) in [(fake_ptxas, true), ("/bin/false".into(), false)] {
        let dir = tempfile::tempdir().unwrap();
        let (cubins, calls) = (dir.path().join("cubins"), dir.path().join("calls"));
        let flags = dir.path().join("flags");
        let mut gpu = fake_gpu("", &dir.path().join("counter"));
        gpu.env
            .push(("FAKE_GPU_CUBIN_LOG".into(), cubins.clone().into()));
        let compile_env = vec![
            ("GEVO_PTXAS".into(), ptxas.into()),
            ("FAKE_PTXAS_LOG".into(), calls.clone().into()),
            ("FAKE_PTXAS_FLAGS_LOG".into(), flags.clone().into()),
            ("GEVO_CHECK_ASSEMBLY".into(), "fast".into()),
        ];
        let mut backend = start_assembling(gpu, compile_env, true);
        let results = backend
            .evaluate(&patches(5, 24), TestSet::Train, &|_| false)
            .unwrap();
        let measured = measured(&results).len();
        assert!(measured > 0);
        let sent = std::fs::read_to_string(&cubins).unwrap();
        let sent: Vec<&str> = sent.lines().collect();
        assert_eq!(sent.len(), measured);
        let u = backend.take_utilization().unwrap();
        if assembles {
            let elf = |text: &str| {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .unwrap();
                assert!(bytes.starts_with(b"\x7fELF sm_90 "), "{bytes:?}");
            };
            let mut own = 0;
            for line in &sent {
                let (variant, guarded) = line.split_once(' ').unwrap();
                elf(guarded);
                if variant != "-" {
                    elf(variant);
                    own += 1;
                }
            }
            println!("{measured} measured, {own} with their own cubin");
            assert!(own > 0 && own < measured, "{own} of {measured}");
            // Only what the GPU measures is assembled: its guarded build,
            // and the variant itself where the simulator saw it pass.
            let calls = std::fs::read_to_string(&calls).unwrap();
            assert_eq!(
                calls.lines().collect::<Vec<_>>(),
                vec!["sm_90"; measured + own]
            );
            assert!(u.spent.assemble_s > 0.0, "{u:?}");
            assert!(u.spent.assemble_guarded_s > 0.0, "{u:?}");
            // The search counts what the compile workers assembled: every
            // measured variant's guarded build, its own build where it came.
            assert_eq!(u.guarded_assembled as usize, measured, "{u:?}");
            assert_eq!(u.timed_assembled as usize, own, "{u:?}");
            // With GEVO_CHECK_ASSEMBLY=fast, guarded builds at ptxas's
            // quickest level (the stand-in lists it in its help), timed
            // builds at its default.
            let levels = std::fs::read_to_string(&flags).unwrap();
            let count = |level: &str| levels.lines().filter(|l| *l == level).count();
            let counts = (count("--Ofast-compile=max -maxrregcount=64"), count(""));
            assert_eq!(counts, (measured, own), "{levels}");
        } else {
            assert_eq!((u.guarded_assembled, u.timed_assembled), (0, 0), "{u:?}");
            assert!(sent.iter().all(|c| *c == "- -"), "{sent:?}");
        }
    }
}

/// The compile workers' environment for the stand-in ptxas whose first
/// call of all takes 3 s more, then writes its start and end to `slow`.
fn slow_first_assembly(slow: &std::path::Path) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let fake_ptxas = common::repo_root().join("tests/fixtures/fake/ptxas.sh");
    vec![
        ("GEVO_PTXAS".into(), fake_ptxas.into()),
        (
            "FAKE_PTXAS_SLOW".into(),
            format!("{}:3", slow.display()).into(),
        ),
    ]
}

/// The GPU side takes variants as they compile: the first assembly of the
/// batch takes 3 s more, and the stand-in GPU worker measures the variants
/// compiled meanwhile, though they come after it in the batch.
#[test]
fn a_slow_compile_holds_back_no_other_variant() {
    let dir = tempfile::tempdir().unwrap();
    let (slow, times) = (dir.path().join("slow"), dir.path().join("times"));
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    gpu.env
        .push(("FAKE_GPU_TIME_LOG".into(), times.clone().into()));
    let compile_env = slow_first_assembly(&slow);
    // No pre-screen: every variant that builds goes to the GPU worker.
    let mut backend = start_assembling(gpu, compile_env, false);
    backend
        .evaluate(&patches(5, 24), TestSet::Train, &|_| false)
        .unwrap();
    let seconds = |text: &str| -> Vec<f64> {
        text.split_whitespace()
            .map(|t| t.parse().unwrap())
            .collect()
    };
    let slow = seconds(&std::fs::read_to_string(&slow).unwrap());
    let (from, to) = (slow[0], slow[1]);
    let received: Vec<f64> = std::fs::read_to_string(&times)
        .unwrap()
        .lines()
        .map(|l| seconds(l.split_once(' ').unwrap().1)[1])
        .collect();
    let meanwhile = received.iter().filter(|&&t| t > from && t < to).count();
    // Taken in the batch's order, at most the one variant before it that
    // the other compile worker held could have been.
    assert!(
        meanwhile >= 5,
        "{meanwhile} of {} variants measured during the slow assembly",
        received.len()
    );
}

/// Once a batch's own variants are measured it still waits for the compile
/// requests under way (the next batch's, compiled ahead): meanwhile its one
/// GPU measures those of them already compiled. Here the batch's one
/// variant was compiled the batch before, and the first assembly of this
/// batch, one of the next batch's, takes 3 s more.
#[test]
fn a_gpu_waiting_for_the_compiles_under_way_measures_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let slow = dir.path().join("slow");
    let claim = dir.path().join("slow.claim");
    // Claimed: no assembly is slow until the claim goes.
    std::fs::create_dir(&claim).unwrap();
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    // Long enough for the next batch's first compiles to start and some to
    // end while the batch's own variant is measured.
    gpu.env.push(("FAKE_GPU_SET_MS".into(), "train:400".into()));
    let compile_env = slow_first_assembly(&slow);
    let mut backend = start_assembling(gpu, compile_env, false);
    let (first, this, next) = (patches(21, 1), patches(22, 1), patches(23, 8));
    let built = backend.compile(&this).unwrap();
    let this_ptx = built[0].as_ref().unwrap().ptx_hash.clone();
    let mut step = |this: &[gevo_ir::Patch], next: Vec<gevo_ir::Patch>, known: &str| {
        let (sender, coming) = std::sync::mpsc::channel();
        backend.compile_ahead(coming);
        sender.send(next).unwrap();
        backend
            .evaluate(this, TestSet::Train, &|h| h == known)
            .unwrap();
        backend.take_utilization().unwrap()
    };
    // The first batch compiles `this` ahead; known to it, it is not
    // measured ahead there.
    step(&first, this.clone(), &this_ptx);
    std::fs::remove_dir(&claim).unwrap();
    let u = step(&this, next, "");
    assert_eq!(u.compiled_ahead, 1, "{u:?}");
    assert!(slow.exists(), "the slow assembly ran in this batch: {u:?}");
    assert!(
        u.measured_ahead > 0,
        "the GPU measured nothing while the slow assembly ran: {u:?}"
    );
}

/// Each generation on the GPU backend says where the engine's own thread
/// spent it (breeding, waiting for evaluation, selection, promotion): every
/// part is measured, and the parts add up to no more than the generation's
/// wall time.
#[test]
fn each_generation_says_where_the_engine_spent_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut backend = backend("", &dir.path().join("counter"), false);
    let config = Config {
        population: 16,
        islands: 1,
        ..Config::default()
    };
    let mut engine = Engine::new(config, 3).unwrap();
    let ir = common::load("vecadd");
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let report = engine.step(&ir, &mut backend).unwrap();
        let took = started.elapsed().as_secs_f64();
        let e = report.utilization.expect("the GPU backend measures").engine;
        let parts = [e.breed_s, e.evaluate_s, e.select_s, e.promote_s];
        assert!(parts.iter().all(|s| *s > 0.0), "{e:?}");
        assert!(parts.iter().sum::<f64>() <= took, "{e:?} in {took} s");
    }
}

/// A generation's promotion runs beside the next generations' batches: its
/// held-out and minimization measurements reach the GPU worker among their
/// train measurements (ahead of those still queued), never after a batch
/// as a step of their own. What the last generation found is promoted by
/// `promote_last` at the end; the validated variants name the generation
/// that found them, one before the step that validated them or earlier.
#[test]
fn a_generation_is_promoted_beside_the_next_ones_batch() {
    let dir = tempfile::tempdir().unwrap();
    let races = dir.path().join("races.log");
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    gpu.env.extend([
        ("FAKE_GPU_RACE_LOG".into(), races.clone().into()),
        // 15 ms a variant: the batch lasts while promotion's requests come.
        ("FAKE_GPU_ROUND_MS".into(), "1".into()),
    ]);
    let spec = common::spec_fixture("vecadd");
    let mut backend = start(&spec, gpu, false);
    assert!(backend.promotes_beside());
    let (mut engine, ir) = vecadd_search(24);
    let (mut seen, mut interleaved, mut promoted) = (0, 0, 0);
    let mut utilization = gevo_model::utilization::Utilization::default();
    for _ in 0..4 {
        let report = engine.step(&ir, &mut backend).unwrap();
        utilization.add(
            report
                .utilization
                .as_ref()
                .expect("the GPU backend reports"),
        );
        let text = std::fs::read_to_string(&races).unwrap_or_default();
        let sets: Vec<&str> = text
            .lines()
            .skip(seen)
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        seen += sets.len();
        let last_train = sets.iter().rposition(|s| *s == "train");
        let first_promotion = sets.iter().position(|s| *s != "train");
        if report.generation == 0 {
            assert_eq!(
                first_promotion, None,
                "generation 0 promotes nothing: {sets:?}"
            );
        }
        if let (Some(p), Some(t)) = (first_promotion, last_train) {
            promoted += 1;
            interleaved += usize::from(p < t);
        }
        for v in &report.validated {
            assert!(v.generation < report.generation, "{v:?}");
        }
    }
    assert!(promoted > 0, "no generation promoted anything");
    // Promotion's share of the workers' time is told apart: every
    // measurement not on the train tests is promotion's (a step's last ones
    // may be carried to the next step, whose utilization counts them).
    let promotion_runs = std::fs::read_to_string(&races)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("train "))
        .count() as u64;
    let u = &utilization;
    assert!(
        u.promotion_measured > 0 && u.promotion_measured <= promotion_runs,
        "{u:?}"
    );
    assert!(
        u.promotion.gpu_s() > 0.0 && u.promotion.gpu_s() <= u.spent.gpu_s(),
        "{u:?}"
    );
    assert!(
        u.promotion.compile_s > 0.0 && u.promotion.compile_s <= u.spent.compile_s,
        "{u:?}"
    );
    assert!(u.compiled >= u.measured - u.measured_ahead, "{u:?}");
    assert!(
        interleaved > 0,
        "promotion waited for every batch: {}",
        std::fs::read_to_string(&races).unwrap()
    );
    let before = std::fs::read_to_string(&races).unwrap().lines().count();
    let (validated, failures) = engine.promote_last(&ir, &mut backend).unwrap();
    let after = std::fs::read_to_string(&races).unwrap().lines().count();
    assert_eq!(
        after > before,
        !(validated.is_empty() && failures.is_empty()),
        "promote_last measures what it promotes"
    );
    for v in &validated {
        assert!(v.generation <= 3, "{v:?}");
    }
    assert!(!backend.promotion_started(), "promote_last waits for it");
}

/// No step waits for the promotion beside it: one whose measurements take
/// long (on the first of two GPUs) goes on while the next steps breed and
/// measure, and its results come with the step during which it ended, or
/// with `promote_last`.
#[test]
fn no_step_waits_for_the_promotion_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut gpu = two_fake_gpus(dir.path());
    gpu.env.extend([
        // 15 ms a search variant, 1.5 s more a promotion's measurement: a
        // promotion (two measurements at least) outlasts a step of 8
        // variants even where compiling them is slow.
        ("FAKE_GPU_ROUND_MS".into(), "1".into()),
        ("FAKE_GPU_SET_MS".into(), "heldout:1500 all:1500".into()),
    ]);
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let (mut engine, ir) = vecadd_search(8);
    let mut outlived = 0;
    for _ in 0..5 {
        let report = engine.step(&ir, &mut backend).unwrap();
        outlived += usize::from(backend.promotion_started());
        for v in &report.validated {
            assert!(v.generation < report.generation, "{v:?}");
        }
    }
    assert!(outlived > 0, "every step waited for its promotion");
    engine.promote_last(&ir, &mut backend).unwrap();
    assert!(!backend.promotion_started());
    assert_promotions_taken_in(&engine);
}

/// A batch whose own variants are measured ends though the promotion's
/// measurement on the first GPU (1.5 s) is under way: the next batch's
/// run delivers its answer. Idle GPUs measure the next batch ahead while a
/// batch's last variants are measured. Every measurement on the train
/// tests is one the generations' reports count, once, and every promotion
/// is taken in.
#[test]
fn no_batch_waits_for_the_promotion_measurement_under_way() {
    let dir = tempfile::tempdir().unwrap();
    let races = dir.path().join("races");
    let mut gpu = two_fake_gpus(dir.path());
    gpu.env.extend([
        ("FAKE_GPU_ROUND_MS".into(), "1".into()),
        ("FAKE_GPU_SET_MS".into(), "heldout:1500 all:1500".into()),
        ("FAKE_GPU_RACE_LOG".into(), races.clone().into()),
    ]);
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let (mut engine, ir) = vecadd_search(8);
    let (mut measured, mut ahead, mut carried) = (0, 0, 0);
    for _ in 0..5 {
        let report = engine.step(&ir, &mut backend).unwrap();
        let u = report.utilization.expect("the GPU backend reports");
        measured += u.measured;
        ahead += u.measured_ahead;
        carried += u.promotion_carried;
    }
    assert!(ahead > 0, "no variant measured ahead in 5 steps");
    assert!(
        carried > 0,
        "every batch waited for the promotion's measurement"
    );
    let train = std::fs::read_to_string(&races)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("train "))
        .count() as u64;
    assert_eq!(train, measured);
    engine.promote_last(&ir, &mut backend).unwrap();
    assert_promotions_taken_in(&engine);
}

/// A stop seen between steps (a daemon's pause: `Ended::Stopped`, the
/// backend kept) leaves the promotion running beside the search waiting,
/// with nothing measured meanwhile; with the stop lifted, the next steps'
/// batches serve it again, and `promote_last` to its end, its results
/// taken in.
#[test]
fn a_promotion_waits_out_a_pause_between_steps() {
    let dir = tempfile::tempdir().unwrap();
    let races = dir.path().join("races.log");
    let mut gpu = two_fake_gpus(dir.path());
    gpu.env.extend([
        ("FAKE_GPU_RACE_LOG".into(), races.clone().into()),
        ("FAKE_GPU_ROUND_MS".into(), "1".into()),
        ("FAKE_GPU_SET_MS".into(), "heldout:300 all:300".into()),
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let spec = common::spec_fixture("vecadd");
    let mut backend = start_stoppable(&spec, gpu, false, Measurement::Fixed, stop.clone());
    let (mut engine, ir) = vecadd_search(8);
    engine.step(&ir, &mut backend).unwrap();
    while !backend.promotion_started() {
        engine.step(&ir, &mut backend).unwrap();
    }
    // The pause: stopped between steps, nothing starts (a promotion
    // measurement the last batch left under way finishes: 300 ms).
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(400));
    let lines = || {
        std::fs::read_to_string(&races)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let before = lines();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(lines(), before, "something was measured during the pause");
    stop.store(false, std::sync::atomic::Ordering::Relaxed);
    // A batch measured ahead during the step before the pause ends at
    // once; the next one measures again.
    for _ in 0..3 {
        engine.step(&ir, &mut backend).unwrap();
        if lines() > before {
            break;
        }
    }
    assert!(lines() > before, "nothing measured after the pause");
    engine.promote_last(&ir, &mut backend).unwrap();
    assert!(!backend.promotion_started());
    assert_promotions_taken_in(&engine);
}

/// A stop while a generation's promotion runs beside the next batch ends
/// the step at once, the promotion with it: no request waits for an answer
/// that will not come, and the engine is as it was.
#[test]
fn a_stop_ends_a_step_whose_promotion_runs_beside_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let races = dir.path().join("races.log");
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    gpu.env.extend([
        ("FAKE_GPU_RACE_LOG".into(), races.clone().into()),
        // 300 ms a variant: the step lasts long after the stop.
        ("FAKE_GPU_ROUND_MS".into(), "20".into()),
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let spec = common::spec_fixture("vecadd");
    let mut backend = start_stoppable(&spec, gpu, false, Measurement::Fixed, stop.clone());
    let (mut engine, ir) = vecadd_search(8);
    engine.step(&ir, &mut backend).unwrap();
    let before = engine.clone();
    let flag = stop.clone();
    let log = races.clone();
    let stopper = std::thread::spawn(move || {
        // Stop once promotion's first measurement reached the GPU.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.lines().any(|l| !l.starts_with("train ")) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
        std::time::Instant::now()
    });
    let result = engine.step(&ir, &mut backend);
    let stopped_at = stopper.join().unwrap();
    let text = std::fs::read_to_string(&races).unwrap();
    assert!(
        text.lines().any(|l| !l.starts_with("train ")),
        "generation 0 had something to promote: {text}"
    );
    assert!(
        matches!(
            result,
            Err(gevo_search::evolve::EvolveError::Backend(
                gevo_search::evolve::BackendError::Interrupted
            ))
        ),
        "{result:?}"
    );
    assert!(
        stopped_at.elapsed() < Duration::from_secs(5),
        "the step took {:?} after the stop",
        stopped_at.elapsed()
    );
    assert_eq!(engine, before, "a stopped step changes nothing");
}

/// A GPU worker lost while promotion waits beside a batch for its
/// measurement, with no replacement able to start: the step fails with the
/// pool's reason instead of waiting for an answer that will not come.
#[test]
fn a_lost_gpu_ends_a_step_whose_promotion_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut gpu = fake_gpu("", &dir.path().join("counter"));
    gpu.env.extend([
        ("FAKE_GPU_CRASH_SET".into(), "heldout".into()),
        ("FAKE_GPU_STARTS".into(), "1".into()),
        ("FAKE_GPU_ROUND_MS".into(), "5".into()),
    ]);
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let (mut engine, ir) = vecadd_search(8);
    engine.step(&ir, &mut backend).unwrap();
    let started = std::time::Instant::now();
    let failed = (0..3).find_map(|_| engine.step(&ir, &mut backend).err());
    let e = failed
        .expect("a held-out measurement crashed its worker")
        .to_string();
    assert!(e.contains("before greeting"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

/// Edit contributions on the GPU (`contrib::Options::on_gpu`): the full
/// patch is timed in every held-out round first; then each leave-one-out
/// races against the full patch's line and each edit alone against the
/// original's, the stand-in worker told the threshold whose line (less the
/// worker's margin) is the one the rule decides on.
#[test]
fn edit_contributions_race_their_held_out_subsets_against_their_lines() {
    use gevo_search::contrib;
    let dir = tempfile::tempdir().unwrap();
    let (gpu, races) = fake_gpu_logging_races(dir.path());
    let mut backend = start(&common::spec_fixture("vecadd"), gpu, false);
    let ir = common::load("vecadd");
    // Three edits that replay in every subset.
    let patch = kernel_patch("vecadd.three-edits");
    let c = contrib::analyze(&ir, &mut backend, &patch, &contrib::Options::on_gpu()).unwrap();
    let log = std::fs::read_to_string(&races).unwrap();
    let lines: Vec<(&str, Option<f64>)> = log
        .lines()
        .map(|l| {
            let (set, race) = l.split_once(' ').unwrap();
            (set, race.parse().ok())
        })
        .collect();
    assert!(lines.iter().all(|(set, _)| *set == "heldout"), "{log}");
    assert_eq!(
        lines.len(),
        7,
        "the full patch, 3 without one, 3 alone: {log}"
    );
    assert_eq!(lines[0].1, None, "the full patch in full: {log}");
    // The stand-in's made-up costs may make the full patch slower: no gain,
    // no margin.
    let m = 0.01 * (1.0 - c.full.estimate).max(0.0);
    let margin = gevod::cuda::measure::MeasureOptions::default().race_margin;
    let threshold = |line: f64| line / (1.0 - margin);
    for (i, (_, race)) in lines[1..].iter().enumerate() {
        let want = if i < 3 {
            threshold(c.full.hi + m)
        } else {
            threshold(1.0 - m)
        };
        let got = race.unwrap_or_else(|| panic!("subset {} unraced: {log}", i + 1));
        // The log holds the threshold as JSON wrote it.
        assert!(
            (got - want).abs() < 1e-9,
            "subset {}: {got} against {want}",
            i + 1
        );
    }
    assert_eq!(c.variants_measured, 7);
}
