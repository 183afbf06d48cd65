//! Every `gevod` output path (`-o`, and `ptx --emit-ir`) given something
//! other than a regular file: a symlink (to a file, to `/dev/null`), a
//! FIFO, a directory, a socket. The command fails with one line naming the
//! path and what it is, and the thing is left as it was (no HTML file where
//! a device was, no write through a link, nothing left beside it); a
//! regular file is still replaced. And `gevod serve --socket <regular
//! file>` fails naming it, the file kept with its content.

use crate::common;

use common::s;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Generous for a loaded CI machine; each command takes well under a second.
const LIMIT: Duration = Duration::from_secs(60);

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo touches nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// `gevod args`, killed after [`LIMIT`] (a command that opened the FIFO
/// would block on it): its output, and whether it ended by itself.
fn gevod(args: &[&str]) -> (Output, bool) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() && started.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(10));
    }
    let ended = child.try_wait().unwrap().is_some();
    if !ended {
        child.kill().unwrap();
    }
    (child.wait_with_output().unwrap(), ended)
}

/// What a path held before a command, to compare with after it.
#[derive(Debug, PartialEq)]
enum Held {
    Link(PathBuf),
    Fifo,
    Socket,
    Dir(Vec<String>),
    File(String),
}

fn held(path: &Path) -> Held {
    let meta = std::fs::symlink_metadata(path).unwrap();
    let kind = meta.file_type();
    if kind.is_symlink() {
        Held::Link(std::fs::read_link(path).unwrap())
    } else if kind.is_fifo() {
        Held::Fifo
    } else if kind.is_socket() {
        Held::Socket
    } else if kind.is_dir() {
        Held::Dir(names(path))
    } else {
        Held::File(std::fs::read_to_string(path).unwrap())
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The refused targets, made fresh in `dir`: name, path, what gevod must
/// call it. `_socket` keeps the socket's listener.
fn targets(dir: &Path) -> (Vec<(&'static str, PathBuf, &'static str)>, UnixListener) {
    std::fs::create_dir_all(dir).unwrap();
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let to_file = dir.join("link-to-file");
    std::os::unix::fs::symlink(&victim, &to_file).unwrap();
    let to_null = dir.join("link-to-null");
    std::os::unix::fs::symlink("/dev/null", &to_null).unwrap();
    let dangling = dir.join("dangling");
    std::os::unix::fs::symlink(dir.join("nowhere"), &dangling).unwrap();
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let subdir = dir.join("subdir");
    std::fs::create_dir(&subdir).unwrap();
    std::fs::write(subdir.join("kept"), "kept").unwrap();
    let socket = dir.join("sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let targets = vec![
        ("a symlink to a file", to_file, "a symbolic link"),
        ("a symlink to /dev/null", to_null, "a symbolic link"),
        ("a dangling symlink", dangling, "a symbolic link"),
        ("a FIFO", fifo, "a FIFO"),
        ("a directory", subdir, "a directory"),
        ("a socket", socket, "a socket"),
    ];
    (targets, listener)
}

/// A state directory with one job: a short `gevod evolve` of the stencil.
fn state_with_a_job(dir: &Path) -> PathBuf {
    let state = dir.join("state");
    let config = dir.join("evolve.toml");
    std::fs::write(&config, "[evolve]\npopulation = 4\n").unwrap();
    let spec = common::spec_fixture("stencil");
    let out = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(["evolve", s(&spec), "--state", s(&state)])
        .args(["--config", s(&config), "--generations", "1", "--seed", "1"])
        .args(["--backend", "sim"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gevod evolve: {}",
        common::text(&out.stderr)
    );
    state
}

#[test]
fn every_output_refuses_what_is_not_a_regular_file_and_leaves_it() {
    let dir = tempfile::tempdir().unwrap();
    let ir = common::kernel_fixture("stencil");
    let ir = s(&ir);
    let patch = dir.path().join("made.patch.json");
    // A patch for `transplant` (and `-o` onto a new path).
    let (out, _) = gevod(&["mutate", ir, "--seed", "7", "-o", s(&patch)]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let state = state_with_a_job(dir.path());
    let other = dir.path().join("other.ptx");
    // Each command, with `{}` where the output path goes.
    let commands: Vec<Vec<&str>> = vec![
        vec!["ptx", ir, "-o", "{}"],
        vec!["ptx", ir, "--emit-ir", "{}", "-o", s(&other)],
        vec!["mutate", ir, "--seed", "1", "-o", "{}"],
        vec!["spec", "init", ir, "-o", "{}", "--force"],
        vec!["transplant", ir, ir, "--patch", s(&patch), "-o", "{}"],
        vec!["report", s(&state), "-o", "{}"],
        vec!["report", s(&state), "--json", "-o", "{}"],
    ];
    for (i, command) in commands.iter().enumerate() {
        let case = dir.path().join(format!("case{i}"));
        let (targets, _socket) = targets(&case);
        for (what, path, kind) in &targets {
            let before = held(path);
            let listing = names(&case);
            let args: Vec<&str> = command
                .iter()
                .map(|a| if *a == "{}" { s(path) } else { a })
                .collect();
            let (out, ended) = gevod(&args);
            assert!(ended, "{args:?} still ran after {LIMIT:?}");
            let stderr = common::text(&out.stderr);
            assert!(!out.status.success(), "{what}: {args:?} succeeded");
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(lines.len(), 1, "{what}: {args:?}:\n{stderr}");
            let said = format!("{}: {kind}, not a regular file", path.display());
            assert!(
                lines[0].starts_with("gevod: ") && lines[0].ends_with(&said),
                "{what}: {args:?}: {stderr}"
            );
            assert_eq!(held(path), before, "{what}: {args:?} changed it");
            assert_eq!(names(&case), listing, "{what}: {args:?} left a file");
        }
        assert_eq!(
            std::fs::read_to_string(case.join("victim.txt")).unwrap(),
            "precious"
        );
        assert!(!other.exists(), "{command:?}: wrote -o after refusing");

        // A regular file is replaced by the output.
        let file = case.join("regular");
        std::fs::write(&file, "old").unwrap();
        let args: Vec<&str> = command
            .iter()
            .map(|a| if *a == "{}" { s(&file) } else { a })
            .collect();
        let (out, ended) = gevod(&args);
        assert!(ended, "{args:?} still ran after {LIMIT:?}");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            common::text(&out.stderr)
        );
        let meta = std::fs::symlink_metadata(&file).unwrap();
        assert!(meta.file_type().is_file(), "{args:?}");
        let written = std::fs::read_to_string(&file).unwrap();
        assert!(written != "old" && !written.is_empty(), "{args:?}");
        let _ = std::fs::remove_file(&other);
    }
    // `spec init` without --force leaves any existing path alone, as
    // before.
    let case = dir.path().join("no-force");
    let (targets, _socket) = targets(&case);
    for (what, path, _) in &targets {
        let before = held(path);
        let (out, _) = gevod(&["spec", "init", ir, "-o", s(path)]);
        assert!(!out.status.success(), "{what}");
        assert_eq!(held(path), before, "{what}");
    }
}

#[test]
fn serve_does_not_take_a_file_at_its_socket_path_for_a_stale_socket() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gevod.toml");
    std::fs::write(&config, common::daemon::CONFIG).unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("gevod.sock");
    std::fs::write(&file, "not a socket").unwrap();
    let subdir = dir.path().join("sockdir");
    std::fs::create_dir(&subdir).unwrap();
    std::fs::write(subdir.join("kept"), "kept").unwrap();
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    for (path, kind) in [
        (&file, "a regular file"),
        (&subdir, "a directory"),
        (&link, "a symbolic link"),
    ] {
        let before = held(path);
        let (out, ended) = gevod(&[
            "serve",
            "--config",
            s(&config),
            "--state",
            s(&state),
            "--socket",
            s(path),
        ]);
        assert!(ended, "{kind}: gevod serve still ran after {LIMIT:?}");
        assert!(!out.status.success(), "{kind}: gevod serve succeeded");
        let stderr = common::text(&out.stderr);
        let said = format!("{}: {kind}, not a socket", path.display());
        assert!(
            stderr.lines().any(|l| l.contains(&said)),
            "{kind}: {stderr}"
        );
        assert_eq!(held(path), before, "{kind}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a socket");
    assert_eq!(
        std::fs::read_to_string(subdir.join("kept")).unwrap(),
        "kept"
    );
}
