//! Nobody but a spec's owner decides what the daemon runs (docs/daemon.md,
//! "Files a spec names"): a spec, a directory above it or a harness script
//! that others could rewrite is refused with a line saying what to fix, and
//! its payload never runs; a spec symlink is judged for its maker; a
//! replaced harness script makes a new version; nothing of a harness run
//! outlives SIGTERM; control bytes in names and messages never reach a
//! terminal or the log raw.

use crate::common;

use common::daemon::{s, Daemon};
use gevo_client::proto::{JobInfo, JobState};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, PermissionsExt::from_mode(mode)).unwrap();
}

/// A harness spec for the stencil kernel at `ir` whose command runs
/// `script` (relative to the spec) with `/bin/sh`.
fn harness_spec(project: &str, ir: &Path, script: &str) -> String {
    let command = format!(r#"["/bin/sh", "{script}", "{{out}}"]"#);
    format!(
        "project = \"{project}\"\n{}",
        common::harness_spec_text(ir, &command)
    )
}

/// The stencil fixture's IR copied into `dir`: files a spec names must be
/// safe from others' writes, wherever the checkout lies.
fn copy_ir(dir: &Path) -> PathBuf {
    let ir = dir.join("stencil.ll");
    std::fs::copy(common::kernel_fixture("stencil"), &ir).unwrap();
    ir
}

/// A script that leaves `marker` (the payload an attacker would plant) and
/// writes the output every variant agrees on.
fn payload(marker: &Path, extra: &str) -> String {
    format!(
        "touch '{}'\nprintf 'AAAA' > \"$1/r.bin\"\necho GEVO_KERNEL_MS=1\n{extra}\n",
        s(marker)
    )
}

fn job<'a>(jobs: &'a [JobInfo], kernel: &str) -> Option<&'a JobInfo> {
    jobs.iter().find(|j| j.kernel == kernel)
}

struct Case {
    /// A spec that cannot be read is named after the watch root and its
    /// file: `app/<name>`, its harness script `<name>.sh`.
    kernel: &'static str,
    /// Where the spec lies, relative to the build directory.
    spec: &'static str,
    /// The mode that makes it unsafe: of the spec, its directory or its
    /// script, as `target` says.
    target: &'static str,
    mode: u32,
    expected: &'static str,
}

#[test]
fn files_others_could_rewrite_never_run_and_a_rewritten_script_is_a_new_version() {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let build = dir.path().join("app").join("build");
    std::fs::create_dir_all(&build).unwrap();
    let ir = copy_ir(&build);
    // Markers land where the harness's user (nobody, under root) may write.
    let markers = dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    chmod(&markers, 0o1777);
    let cases = [
        Case {
            kernel: "app/ww",
            spec: "ww.gevo.toml",
            target: "spec",
            mode: 0o666,
            expected:
                "ww.gevo.toml: cannot read spec file: refused: it is world-writable (chmod o-w",
        },
        Case {
            kernel: "app/gw",
            spec: "gw.gevo.toml",
            target: "spec",
            mode: 0o664,
            expected:
                "gw.gevo.toml: cannot read spec file: refused: it is group-writable (chmod g-w",
        },
        Case {
            kernel: "app/dirw",
            spec: "open/dirw.gevo.toml",
            target: "dir",
            mode: 0o777,
            expected: "/open is world-writable (chmod o-w",
        },
        Case {
            kernel: "app/prog",
            spec: "prog.gevo.toml",
            target: "script",
            mode: 0o777,
            expected: "harness.command[1]: file",
        },
    ];
    for case in &cases {
        let spec = build.join(case.spec);
        let name = case.kernel.split('/').nth(1).unwrap();
        std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
        let script = spec.with_file_name(format!("{name}.sh"));
        std::fs::write(&script, payload(&markers.join(name), "")).unwrap();
        std::fs::write(&spec, harness_spec(name, &ir, &format!("{name}.sh"))).unwrap();
        let target = match case.target {
            "spec" => spec.clone(),
            "dir" => spec.parent().unwrap().to_path_buf(),
            _ => script,
        };
        chmod(&target, case.mode);
    }
    // The control: the same payload from safe files runs.
    let good_script = build.join("good.sh");
    std::fs::write(&good_script, payload(&markers.join("good"), "")).unwrap();
    std::fs::write(
        build.join("good.gevo.toml"),
        harness_spec("good", &ir, "good.sh"),
    )
    .unwrap();

    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    chmod(&tmp, 0o755);
    let mut d = Daemon::start_with_env(
        dir.path(),
        &["--watch", s(&dir.path().join("app"))],
        &[("TMPDIR", s(&tmp))],
    );
    let jobs = d.wait_for("the refusals and the good job's first generation", |d| {
        let jobs = d.jobs();
        let refused = cases
            .iter()
            .all(|c| job(&jobs, c.kernel).is_some_and(|j| j.state == JobState::Error));
        let good = job(&jobs, "good/good").is_some_and(|j| j.generations > 0);
        (refused && good).then_some(jobs)
    });
    assert!(markers.join("good").exists(), "the control's payload ran");
    for case in &cases {
        let message = job(&jobs, case.kernel).unwrap().message.clone().unwrap();
        assert!(
            message.contains(case.expected),
            "{}: {message}",
            case.kernel
        );
        assert!(!message.contains('\n'), "one line: {message}");
        let name = case.kernel.split('/').nth(1).unwrap();
        assert!(
            !markers.join(name).exists(),
            "{}'s payload ran",
            case.kernel
        );
    }

    // While a harness job runs, its scratch files are private.
    let scratch: Vec<PathBuf> = walk(&tmp)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("gevo-harness-")
        })
        .collect();
    for p in &scratch {
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", p.display());
    }

    // The good script rewritten (by its owner): a new version.
    std::fs::write(&good_script, payload(&markers.join("good2"), "true")).unwrap();
    d.wait_for("version 2 of good/good", |d| {
        let jobs = d.jobs();
        jobs.iter()
            .any(|j| j.kernel == "good/good" && j.version == 2 && j.generations > 0)
            .then_some(())
    });
    assert!(markers.join("good2").exists());

    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{status}");
    let left = walk(&tmp);
    assert!(left.is_empty(), "left after SIGTERM: {left:?}");
}

/// Every path under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

/// The symlink race of the security review: another user's link to a
/// harness spec the daemon's user owns is judged as the link's maker's all
/// the way, so its command never runs, first statically, then while they
/// flip the link between that spec and their own 400 times.
#[test]
fn a_spec_symlink_is_judged_for_its_maker() {
    if !is_root() {
        println!("skipped: a link owned by another user needs root to make");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let markers = dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    chmod(&markers, 0o1777);
    // Root's harness spec, outside the watch root.
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::write(private.join("x.sh"), payload(&markers.join("x"), "")).unwrap();
    let ir = copy_ir(&private);
    std::fs::write(private.join("x.gevo.toml"), harness_spec("x", &ir, "x.sh")).unwrap();
    // nobody's directory under the watch root, and their link in it.
    let theirs = dir.path().join("app").join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let link = theirs.join("x.gevo.toml");
    std::os::unix::fs::symlink(private.join("x.gevo.toml"), &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let d = Daemon::start(dir.path(), &["--watch", s(&dir.path().join("app"))]);
    let refused = d.wait_for("the refusal", |d| {
        d.jobs()
            .into_iter()
            .find(|j| j.kernel == "x/x" && j.state == JobState::Error)
    });
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains("harness: refused: the spec is owned by uid 65534"),
        "{message}"
    );
    // Now the race: nobody flips the link, atomically, between root's spec
    // and their own (whose script plants another marker), over and over
    // while the daemon rescans. Whatever the daemon reads when, the spec is
    // the link maker's, so neither command ever runs.
    std::fs::write(theirs.join("own.sh"), payload(&markers.join("own"), "")).unwrap();
    std::fs::write(theirs.join("own.toml"), harness_spec("x", &ir, "own.sh")).unwrap();
    for f in ["own.sh", "own.toml"] {
        std::os::unix::fs::chown(theirs.join(f), Some(65534), Some(65534)).unwrap();
    }
    let flips = 200;
    let flipper = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "cd '{}' && for i in $(seq {flips}); do \
               ln -sfn own.toml t && mv -T t x.gevo.toml && sleep 0.02; \
               ln -sfn '{}' t && mv -T t x.gevo.toml && sleep 0.02; done",
            s(&theirs),
            s(&private.join("x.gevo.toml"))
        ))
        .uid(65534)
        .gid(65534)
        .status()
        .unwrap();
    assert!(flipper.success(), "{flipper}");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let log = d.log_text();
    let refusals = log.matches("the spec is owned by uid 65534").count();
    assert!(refusals >= 1, "{log}");
    for marker in ["x", "own"] {
        assert!(!markers.join(marker).exists(), "{marker}'s payload ran");
    }
}

/// Control bytes (and a right-to-left override) in a spec's file name and
/// in an unknown key reach `status`, `jobs` and the log escaped; `--json`
/// keeps them.
#[test]
fn control_bytes_from_files_never_reach_a_terminal_raw() {
    let dir = tempfile::tempdir().unwrap();
    let build = dir.path().join("app").join("build");
    std::fs::create_dir_all(&build).unwrap();
    let name = "t\x1b]0;owned\x07\u{202e}.gevo.toml";
    std::fs::write(
        build.join(name),
        format!(
            "version = 1\nir = \"{}\"\n\"k\\u001b[2J\" = 1\n",
            s(&copy_ir(&build))
        ),
    )
    .unwrap();
    let d = Daemon::start(dir.path(), &["--watch", s(&dir.path().join("app"))]);
    d.wait_for("the spec's error", |d| {
        d.jobs()
            .into_iter()
            .find(|j| j.state == JobState::Error && j.message.is_some())
    });
    let raw = |b: &[u8]| b.iter().any(|&c| c == 0x1b || c == 0x07);
    // U+202E in UTF-8.
    let override_bytes = |b: &[u8]| b.windows(3).any(|w| w == [0xe2, 0x80, 0xae]);
    for args in [&["status"][..], &["jobs"]] {
        let out = d.client(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(!raw(&out.stdout) && !raw(&out.stderr), "{args:?}: {out:?}");
        assert!(!override_bytes(&out.stdout), "{args:?}: {out:?}");
        let text = common::text(&out.stdout);
        assert!(text.contains("\\u{1b}"), "{args:?}: {text}");
        assert!(text.contains("\\u{202e}"), "{args:?}: {text}");
    }
    let json = d.client(&["--json", "jobs"]);
    let jobs: Vec<JobInfo> = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        jobs.iter()
            .any(|j| j.spec.to_str().unwrap().contains('\x1b')),
        "{jobs:?}"
    );
    let log = std::fs::read(&d.log).unwrap();
    assert!(!raw(&log), "{}", common::text(&log));
}
