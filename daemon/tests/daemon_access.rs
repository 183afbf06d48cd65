//! The files a spec names are read for the spec's owner (docs/daemon.md,
//! "Files a spec names"): a hostile spec in a watched directory gets a
//! one-line refusal, never a byte of the file, and the daemon keeps serving
//! the other jobs.

use crate::common;

use common::daemon::{build_dir, s, Daemon};
use gevo_client::proto::{JobInfo, JobState};
use std::os::unix::fs::{chown, symlink, PermissionsExt};
use std::path::Path;
use std::time::Duration;

const SECRET: &str = "TOPSECRET-first-line:*:20228:0";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo touches nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// The stencil spec in `build` with one line replaced, written as `name`.
fn variant(build: &Path, name: &str, from: &str, to: &str) {
    let spec = std::fs::read_to_string(build.join("stencil.gevo.toml")).unwrap();
    assert!(spec.contains(from), "{from} not in the fixture spec");
    std::fs::write(
        build.join(format!("{name}.gevo.toml")),
        spec.replace(from, to),
    )
    .unwrap();
}

/// Waits until every kernel in `broken` is an error and the good job runs.
fn settle(d: &Daemon, broken: &[(&str, &str)]) -> Vec<JobInfo> {
    d.wait_for("the broken specs' errors and a running job", |d| {
        let jobs = d.jobs();
        let all_broken = broken.iter().all(|(kernel, _)| {
            jobs.iter()
                .any(|j| j.kernel == *kernel && j.state == JobState::Error)
        });
        let good = jobs
            .iter()
            .any(|j| j.kernel == "app/stencil" && j.generations > 0);
        (all_broken && good).then_some(jobs)
    })
}

/// Each broken kernel's message says what it expects; a few rescans later
/// the log still holds exactly one warning for it.
fn assert_refusals(d: &Daemon, jobs: &[JobInfo], broken: &[(&str, &str)]) {
    for (kernel, expected) in broken {
        let job = jobs.iter().find(|j| j.kernel == *kernel).unwrap();
        let message = job.message.as_deref().unwrap_or_default();
        assert!(message.contains(expected), "{kernel}: {message}");
        assert!(!message.contains('\n'), "{kernel}: not one line: {message}");
    }
    std::thread::sleep(Duration::from_secs(3));
    let log = d.log_text();
    for (kernel, _) in broken {
        let name = kernel.split('/').nth(1).unwrap();
        let spec = format!("/{name}.gevo.toml ");
        let warnings = log
            .lines()
            .filter(|l| l.contains("spec not usable") && l.contains(&spec))
            .count();
        assert_eq!(warnings, 1, "{kernel} warned {warnings} times:\n{log}");
    }
    assert!(d.client(&["status"]).status.success());
}

#[test]
fn non_regular_files_are_refused_without_hanging_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let build = build_dir(dir.path(), "app");
    mkfifo(&build.join("pipe.ll"));
    mkfifo(&build.join("pipe.f32"));
    std::fs::create_dir(build.join("folder.ll")).unwrap();
    variant(&build, "fifo", "ir = \"stencil.ll\"", "ir = \"pipe.ll\"");
    variant(&build, "zero", "ir = \"stencil.ll\"", "ir = \"/dev/zero\"");
    variant(
        &build,
        "folder",
        "ir = \"stencil.ll\"",
        "ir = \"folder.ll\"",
    );
    variant(
        &build,
        "fillfifo",
        "fill = { uniform = [-1.0, 1.0] }",
        "fill = { file = \"pipe.f32\" }",
    );
    let broken = [
        ("app/fifo", "is a FIFO, not a regular file"),
        ("app/zero", "/dev/zero is a character device"),
        ("app/folder", "is a directory"),
        ("app/fillfifo", "data file"),
    ];
    let d = Daemon::start(dir.path(), &["--watch", s(&dir.path().join("app"))]);
    let jobs = settle(&d, &broken);
    assert_refusals(&d, &jobs, &broken);
    let fill = jobs.iter().find(|j| j.kernel == "app/fillfifo").unwrap();
    assert!(
        fill.message.as_deref().unwrap().contains("is a FIFO"),
        "{fill:?}"
    );
}

#[test]
fn a_spec_cannot_make_the_daemon_read_what_its_owner_may_not() {
    if !is_root() {
        println!("skipped: specs owned by another user need root to write");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    // Root's private file, outside the watch root: only root may read it.
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, format!("{SECRET}\nsecond line\n")).unwrap();
    std::fs::set_permissions(&secret, PermissionsExt::from_mode(0o600)).unwrap();
    let build = build_dir(dir.path(), "app");
    symlink(&secret, build.join("link.ll")).unwrap();
    let ir = "ir = \"stencil.ll\"";
    variant(&build, "absolute", ir, &format!("ir = \"{}\"", s(&secret)));
    variant(&build, "linked", ir, "ir = \"link.ll\"");
    variant(
        &build,
        "filled",
        "fill = { uniform = [-1.0, 1.0] }",
        &format!("fill = {{ file = \"{}\" }}", s(&secret)),
    );
    std::fs::write(
        build.join("program.gevo.toml"),
        format!(
            "version = 1\nir = \"stencil.ll\"\nkernel = \"stencil5\"\n\
             [harness]\ncommand = [\"{}\", \"{{out}}\"]\n\
             outputs = [{{ file = \"grid.f32\", type = \"f32\" }}]\n\
             [tests]\ntrain = [{{ seed = 1 }}]\nheldout = [{{ seed = 2 }}]\n\
             [acceptance]\nmetric = \"max_abs\"\ntolerance = 1e-5\n",
            s(&secret)
        ),
    )
    .unwrap();
    // The spec itself a link to the secret: read as the link's maker.
    symlink(&secret, build.join("spec.gevo.toml")).unwrap();
    // The hostile user (nobody) owns every spec and link they made.
    for entry in std::fs::read_dir(&build).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap();
        if name != "stencil.gevo.toml" && name != "stencil.ll" {
            std::os::unix::fs::lchown(&path, Some(65534), Some(65534)).unwrap();
        }
    }
    chown(build.join("stencil.gevo.toml"), Some(65534), Some(65534)).unwrap();
    let broken = [
        ("app/absolute", "ir: IR file"),
        ("app/linked", "link.ll refused"),
        ("app/filled", "data file"),
        ("app/program", "harness.command[0]"),
        ("app/spec", "cannot read spec file"),
    ];
    let d = Daemon::start(dir.path(), &["--watch", s(&dir.path().join("app"))]);
    let jobs = settle(&d, &broken);
    assert_refusals(&d, &jobs, &broken);
    for (kernel, _) in &broken {
        let job = jobs.iter().find(|j| j.kernel == *kernel).unwrap();
        let message = job.message.as_deref().unwrap();
        assert!(message.contains("refused"), "{kernel}: {message}");
        assert!(message.contains("uid 65534"), "{kernel}: {message}");
    }
    let mut seen = d.log_text();
    for args in [&["jobs"][..], &["status"], &["--json", "jobs"]] {
        let out = d.client(args);
        seen += &text(&out.stdout);
        seen += &text(&out.stderr);
    }
    assert!(!seen.contains("TOPSECRET"), "the secret leaked:\n{seen}");
    assert!(!seen.contains("second line"), "the secret leaked:\n{seen}");
}

/// `[daemon] private = true`: the exports (PTX, record, report) and the job
/// snapshots are written 0640 in 0750 directories, and the state directory
/// and the store are made 0750 and 0640: nothing in it is left to others.
#[test]
fn private_kernels_are_kept_from_other_users() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::daemon::CONFIG.replace("[daemon]\n", "[daemon]\nprivate = true\n");
    std::fs::write(dir.path().join("gevod.toml"), config).unwrap();
    let (d, _) = Daemon::watching_stencil(dir.path());
    let exports = d.state.join("exports/app/stencil");
    d.wait_for("the export and its report", |d| {
        d.validated_best("stencil")?;
        exports.join("report.html").exists().then_some(())
    });
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    // Read, not set: umask is the whole process's, and the daemon's is ours.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let umask = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .map(|m| u32::from_str_radix(m.trim(), 8).unwrap())
        .unwrap();
    assert_eq!(mode(&d.state), 0o750);
    assert_eq!(mode(&d.state.join("gevod.redb")), 0o640);
    for name in ["sm_90.ptx", "sm_90.json", "report.html"] {
        assert_eq!(mode(&exports.join(name)), 0o640 & !umask, "{name}");
    }
    let mut snapshots = 0;
    let mut pending = vec![d.state.clone()];
    while let Some(path) = pending.pop() {
        let m = mode(&path);
        assert_eq!(m & 0o027, 0, "{}: {m:o}", path.display());
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.ends_with("kernel.ll") || path.ends_with("spec.gevo.toml") {
            assert_eq!(m, 0o640 & !umask, "{}", path.display());
            snapshots += 1;
        }
    }
    assert!(
        snapshots >= 2,
        "no job snapshots under {}",
        d.state.display()
    );
}
