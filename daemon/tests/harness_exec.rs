//! The daemon runs the harness program it checked (docs/harness.md,
//! "Security"): the program is opened once when the spec loads, checked on
//! that descriptor and executed from it, so a link flipped after the check
//! never runs another file; a program reached through another user's link or
//! a directory others may write is refused, and so is a shell given its
//! commands as text (`sh -c`), whose reads no check could see.

use crate::common;

use common::daemon::{s, Daemon};
use gevo_client::proto::{JobInfo, JobState};
use gevo_ir::CodegenOptions;
use gevo_model::access::Reader;
use gevo_model::spec::TestSet;
use gevod::harness::{HarnessEvaluator, Runner};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, PermissionsExt::from_mode(mode)).unwrap();
}

/// A harness script (`#!/bin/sh`, run as the program itself) that leaves
/// `marker` and writes the output every variant agrees on, with `mode`.
fn script(path: &Path, marker: &Path, mode: u32) {
    std::fs::write(
        path,
        format!(
            "#!/bin/sh\ntouch '{}'\nprintf 'AAAA' > \"$1/r.bin\"\necho GEVO_KERNEL_MS=1\n",
            s(marker)
        ),
    )
    .unwrap();
    chmod(path, mode);
}

/// A harness spec of project `project` for the stencil IR beside it, whose
/// command is `command` (a TOML array).
fn spec_text(project: &str, command: &str) -> String {
    format!(
        "project = \"{project}\"\n{}",
        common::harness_spec_text(Path::new("stencil.ll"), command)
    )
}

/// `dir` made reachable for the harness's user, with the stencil IR and a
/// sticky markers directory anyone may write to.
fn setup(dir: &Path) -> PathBuf {
    chmod(dir, 0o755);
    std::fs::copy(common::kernel_fixture("stencil"), dir.join("stencil.ll")).unwrap();
    let markers = dir.join("markers");
    std::fs::create_dir(&markers).unwrap();
    chmod(&markers, 0o1777);
    markers
}

/// The reader the daemon's workers use for a spec in `root` its owner (this
/// process's user) wrote.
fn owner(root: &Path) -> Reader {
    Reader::OnBehalf {
        // SAFETY: geteuid cannot fail and touches no memory.
        uid: unsafe { libc::geteuid() },
        root: std::fs::canonicalize(root).unwrap(),
    }
}

/// Replaces the link at `link` with one to `target`, atomically.
fn point(link: &Path, target: &str) {
    let tmp = link.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// The race of the security review: the program is the owner's link, which
/// flips between the owner's script and one the check refuses (world-
/// writable: anyone could have put anything in it) while specs load and
/// run, as in a worker. Each load judges the file the link names then, and
/// every run of that load executes that very file: the refused script never
/// runs. Without flipping, the owner's script runs (the control).
#[test]
fn a_program_link_flipped_after_the_check_never_runs_the_other_file() {
    let dir = tempfile::tempdir().unwrap();
    let markers = setup(dir.path());
    script(
        &dir.path().join("benign.sh"),
        &markers.join("benign"),
        0o755,
    );
    script(&dir.path().join("evil.sh"), &markers.join("evil"), 0o777);
    let link = dir.path().join("hq.sh");
    point(&link, "benign.sh");
    let spec_path = dir.path().join("hq.gevo.toml");
    std::fs::write(&spec_path, spec_text("hq", r#"["./hq.sh", "{out}"]"#)).unwrap();
    let reader = owner(dir.path());
    let gevod = PathBuf::from(env!("CARGO_BIN_EXE_gevod"));
    // Loads the spec as a worker does and runs the original and the
    // unchanged variant on every test: four runs of the program.
    let load_and_run = || -> Result<(), String> {
        let spec = gevo_model::spec::load_as(&spec_path, &reader).map_err(|e| e.to_string())?;
        let runner = Runner::Simulate {
            gevod: gevod.clone(),
        };
        let evaluator =
            HarnessEvaluator::new(spec, CodegenOptions::default(), runner, None).unwrap();
        let patch = evaluator.ir().empty_patch();
        for set in [TestSet::Train, TestSet::Heldout] {
            let a = evaluator.assess(&patch, set).unwrap();
            assert!(a.tests.iter().all(|t| t.failure.is_none()), "{a:?}");
        }
        Ok(())
    };

    // The control: the owner's script runs; the other one is refused.
    load_and_run().unwrap();
    assert!(markers.join("benign").exists(), "the owner's script ran");
    point(&link, "evil.sh");
    let e = load_and_run().unwrap_err();
    assert!(
        e.contains("harness.command[0]: program") && e.contains("world-writable"),
        "{e}"
    );
    assert!(!markers.join("evil").exists());
    point(&link, "benign.sh");

    // The race: the link points at the refused script for 0-1 ms at a
    // time, at the owner's for 1-3 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, link) = (stop.clone(), link.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                point(&link, "evil.sh");
                std::thread::sleep(Duration::from_micros(flips * 7919 % 1000));
                point(&link, "benign.sh");
                std::thread::sleep(Duration::from_micros(1000 + flips * 104_729 % 2000));
                flips += 1;
            }
            flips
        })
    };
    let started = Instant::now();
    let (mut loaded, mut refused) = (0, 0);
    while loaded < 20 && started.elapsed() < Duration::from_secs(10) {
        match load_and_run() {
            Ok(()) => loaded += 1,
            Err(e) => {
                assert!(e.contains("world-writable"), "{e}");
                refused += 1;
            }
        }
        assert!(
            !markers.join("evil").exists(),
            "the refused script ran (after {loaded} loads, {refused} refused)"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    println!("{loaded} loads ran (4 runs each), {refused} refused, {flips} flips");
    assert!(loaded > 0, "no load found the owner's script in 10 s");
    assert!(!markers.join("evil").exists(), "the refused script ran");
}

/// A shell given its commands as text is refused for the daemon, with the
/// rule and the way out; so is a program in a directory anyone may write
/// (not sticky), while the same program in a sticky one is accepted.
#[test]
fn shell_text_and_programs_in_open_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let markers = setup(dir.path());
    let reader = owner(dir.path());
    let load = |name: &str, command: &str| {
        let path = dir.path().join(format!("{name}.gevo.toml"));
        std::fs::write(&path, spec_text(name, command)).unwrap();
        gevo_model::spec::load_as(&path, &reader).map_err(|e| e.to_string())
    };
    for command in [
        r#"["sh", "-c", ". ./h.sh"]"#,
        r#"["/bin/bash", "-e", "-c", ". ./h.sh", "{out}"]"#,
        r#"["env", "X=1", "/bin/sh", "-c", ". ./h.sh"]"#,
    ] {
        let e = load("shc", command).unwrap_err();
        assert!(
            e.contains("sh -") && e.contains("-c` runs commands given as text"),
            "{e}"
        );
        assert!(
            e.contains("put them in a script owned by the spec's owner and name it"),
            "{e}"
        );
    }
    // The same command is the caller's own business on the command line.
    let path = dir.path().join("shc.gevo.toml");
    gevo_model::spec::load(&path).unwrap();

    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    script(&open.join("prog.sh"), &markers.join("open"), 0o755);
    chmod(&open, 0o777);
    let e = load("open", r#"["./open/prog.sh", "{out}"]"#).unwrap_err();
    assert!(e.contains("harness.command[0]: program"), "{e}");
    assert!(e.contains("/open is world-writable (chmod o-w"), "{e}");
    chmod(&open, 0o1777);
    load("open", r#"["./open/prog.sh", "{out}"]"#).unwrap();
}

fn job<'a>(jobs: &'a [JobInfo], kernel: &str) -> Option<&'a JobInfo> {
    jobs.iter().find(|j| j.kernel == kernel)
}

/// The daemon itself: the refusals above (and, as root, a program reached
/// through another user's link in a sticky directory) are job errors saying
/// the rule, their scripts never run, and a script named as the program runs
/// from its checked descriptor (as `nobody` under root).
#[test]
fn the_daemon_refuses_unsafe_programs_and_runs_the_checked_script() {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let app = dir.path().join("app");
    std::fs::create_dir(&app).unwrap();
    let markers = setup(&app);
    let open = app.join("open");
    std::fs::create_dir(&open).unwrap();
    script(&open.join("prog.sh"), &markers.join("open"), 0o755);
    chmod(&open, 0o777);
    script(&app.join("good.sh"), &markers.join("good"), 0o755);
    let mut cases = vec![
        (
            "shc",
            format!(
                r#"["/bin/sh", "-c", "touch '{}'; printf AAAA > $0/r.bin", "{{out}}"]"#,
                s(&markers.join("shc"))
            ),
            "`sh -c` runs commands given as text",
        ),
        (
            "opendir",
            r#"["./open/prog.sh", "{out}"]"#.to_string(),
            "/open is world-writable (chmod o-w",
        ),
    ];
    if is_root() {
        // nobody's link, in a sticky directory, to root's own script.
        let sticky = app.join("sticky");
        std::fs::create_dir(&sticky).unwrap();
        chmod(&sticky, 0o1777);
        script(&app.join("theirs.sh"), &markers.join("theirs"), 0o755);
        let link = sticky.join("theirs.sh");
        std::os::unix::fs::symlink(app.join("theirs.sh"), &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        cases.push((
            "theirs",
            r#"["./sticky/theirs.sh", "{out}"]"#.to_string(),
            "on its way is owned by uid 65534",
        ));
    } else {
        println!("skipped the foreign link: a link owned by another user needs root to make");
    }
    for (name, command, _) in &cases {
        std::fs::write(
            app.join(format!("{name}.gevo.toml")),
            spec_text(name, command),
        )
        .unwrap();
    }
    std::fs::write(
        app.join("good.gevo.toml"),
        spec_text("good", r#"["./good.sh", "{out}"]"#),
    )
    .unwrap();
    let d = Daemon::start(dir.path(), &["--watch", s(&app)]);
    let jobs = d.wait_for("the refusals and the good job's first generation", |d| {
        let jobs = d.jobs();
        let refused = cases.iter().all(|(name, _, _)| {
            job(&jobs, &format!("app/{name}")).is_some_and(|j| j.state == JobState::Error)
        });
        let good = job(&jobs, "good/good").is_some_and(|j| j.generations > 0);
        (refused && good).then_some(jobs)
    });
    assert!(markers.join("good").exists(), "the checked script ran");
    for (name, _, expected) in &cases {
        let message = job(&jobs, &format!("app/{name}"))
            .unwrap()
            .message
            .clone()
            .unwrap_or_default();
        assert!(message.contains(expected), "{name}: {message}");
        assert!(!markers.join(name).exists(), "{name}'s script ran");
    }
    drop(d);
}
