//! The CMake integration (gevo_optimize, EMBED mode) end to end, as CI runs
//! it: no GPU and no CUDA toolkit, only cmake, clang-19 and a C++ compiler.
//! examples/stencil-app is built against a real `gevod serve` on a
//! temporary socket and state directory (the simulator backend), and the
//! program's embedded PTX is checked at each step: the original without a
//! daemon, the evolved variant once the daemon has one, nothing rebuilt when
//! nothing changed, the original again when the daemon and its export are
//! gone.

mod common;

use common::daemon::{client_binary, s, Daemon};
use gevo_client::export::ptx_hash;
use gevo_client::proto::{Command as Cmd, Reply};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

const KERNEL: &str = "stencil-app/stencil";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs a command; panics with its output unless it succeeds. Returns
/// stdout and stderr together.
fn run(command: &mut Command) -> String {
    let out = command.output().unwrap();
    let both = text(&out.stdout) + &text(&out.stderr);
    assert!(out.status.success(), "{command:?} failed:\n{both}");
    both
}

struct Project {
    /// The example's name, also its program's.
    name: String,
    source: PathBuf,
    build: PathBuf,
    socket: PathBuf,
    state: PathBuf,
}

impl Project {
    /// A copy of examples/<example> in dir/<example>, built in dir/<build>,
    /// talking to a daemon in dir/daemon (where `Daemon::start` puts its
    /// socket and state).
    fn new(dir: &Path, example: &str, build: &str) -> Project {
        let daemon_dir = dir.join("daemon");
        std::fs::create_dir_all(&daemon_dir).unwrap();
        let source = dir.join(example);
        if !source.exists() {
            copy_dir(&common::repo_root().join("examples").join(example), &source);
        }
        Project {
            name: example.to_string(),
            source,
            build: dir.join(build),
            socket: daemon_dir.join("gevod.sock"),
            state: daemon_dir.join("state"),
        }
    }

    /// cmake's command line for configuring, with gevo's tools and the
    /// daemon's place; `extra` are more -D options.
    fn configure_command(&self, extra: &[String]) -> Command {
        let mut command = Command::new("cmake");
        command
            .arg("-S")
            .arg(&self.source)
            .arg("-B")
            .arg(&self.build)
            .arg(format!(
                "-Dgevo_DIR={}",
                s(&common::repo_root().join("cmake"))
            ))
            .arg(format!("-DGEVO_CLIENT={}", s(&client_binary())))
            .arg(format!("-DGEVOD={}", env!("CARGO_BIN_EXE_gevod")))
            .arg(format!("-DGEVO_SOCKET={}", s(&self.socket)))
            .arg(format!("-DGEVO_STATE={}", s(&self.state)))
            .args(extra);
        command
    }

    fn configure(&self) -> String {
        self.configure_with(&[])
    }

    fn configure_with(&self, extra: &[String]) -> String {
        run(&mut self.configure_command(extra))
    }

    /// Configures, expecting it to fail; returns what cmake said.
    fn configure_fails(&self, extra: &[String]) -> String {
        let out = self.configure_command(extra).output().unwrap();
        let both = text(&out.stdout) + &text(&out.stderr);
        assert!(!out.status.success(), "configuring succeeded:\n{both}");
        both
    }

    fn build(&self) -> String {
        run(Command::new("cmake").arg("--build").arg(&self.build))
    }

    fn app(&self, arg: &str) -> String {
        run(Command::new(self.build.join(&self.name)).arg(arg))
    }

    fn gevo_file(&self, name: &str) -> PathBuf {
        self.build.join("gevo").join(name)
    }

    fn original(&self) -> String {
        std::fs::read_to_string(self.gevo_file("stencil.original.ptx")).unwrap()
    }

    fn mtime(&self, path: &Path) -> SystemTime {
        std::fs::metadata(path).unwrap().modified().unwrap()
    }
}

#[test]
fn the_example_embeds_the_evolved_ptx_and_falls_back_to_the_original() {
    for tool in ["cmake", "clang-19"] {
        if !have(tool) {
            println!("skipped: {tool} is not installed");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon_dir = dir.path().join("daemon");
    let p = Project::new(dir.path(), "stencil-app", "build");

    // 1. No daemon, no export: the original PTX, and the log says why.
    let log = p.configure();
    assert!(log.contains("could not register"), "{log}");
    let log = p.build();
    assert!(
        log.contains("using the original PTX: gevod unreachable and no export"),
        "{log}"
    );
    let original = p.original();
    assert!(original.contains(".entry stencil5"), "{original}");
    let ptx = Command::new(env!("CARGO_BIN_EXE_gevod"))
        .args(["ptx", s(&p.gevo_file("stencil.ll")), "--arch", "sm_90"])
        .output()
        .unwrap();
    assert!(ptx.status.success(), "{ptx:?}");
    assert_eq!(original, text(&ptx.stdout), "gevod ptx of the emitted IR");
    assert_eq!(p.app("--print-ptx"), original);
    assert_eq!(p.app("--origin"), "original\n");
    let spec = std::fs::read_to_string(p.gevo_file("stencil.gevo.toml")).unwrap();
    for line in [
        "ir = \"stencil.ll\"",
        "project = \"stencil-app\"",
        "kernel = \"stencil5\"",
    ] {
        assert!(spec.contains(line), "{line} missing:\n{spec}");
    }

    // 2. A daemon that watches nothing: configuring registers <build>/gevo;
    // once a variant is validated the build embeds it.
    let mut d = Daemon::start(&daemon_dir, &[]);
    let log = p.configure();
    let watched = p.build.join("gevo").canonicalize().unwrap();
    assert!(
        log.contains(&format!("gevod: watching {}", watched.display())),
        "{log}"
    );
    let probe = dir.path().join("probe.ptx");
    d.wait_for("a validated variant", |d| {
        let out = d.client(&["best", KERNEL, "--arch", "sm_90", "-o", s(&probe)]);
        match out.status.code() {
            Some(0) => Some(()),
            Some(3) => None,
            _ => panic!("best: {out:?}"),
        }
    });
    // No newer variant between the build and the question below: pause the
    // job and wait for its generation in flight to end.
    let paused = d.client(&["pause", KERNEL]);
    assert!(paused.status.success(), "{paused:?}");
    d.wait_for("the paused job to stop", |d| match d.call(Cmd::Status) {
        Reply::Status(status) => status
            .slots
            .iter()
            .all(|slot| !slot.state.starts_with("running"))
            .then_some(()),
        other => panic!("status answered {other:?}"),
    });
    let log = p.build();
    assert!(log.contains("using the evolved PTX"), "{log}");
    assert!(log.contains("(from the daemon)"), "{log}");
    let best = d.client(&["--json", "best", KERNEL, "--arch", "sm_90"]);
    assert!(best.status.success(), "{best:?}");
    let best: serde_json::Value = serde_json::from_slice(&best.stdout).unwrap();
    let embedded = p.app("--print-ptx");
    assert_eq!(ptx_hash(&embedded), best["ptx_hash"].as_str().unwrap());
    assert_ne!(embedded, original, "the evolved PTX is the original's");
    let origin = p.app("--origin");
    assert!(
        origin.starts_with(&format!("evolved: {KERNEL} sm_90, speedup ")),
        "{origin}"
    );

    // 3. Nothing changed: nothing is regenerated, compiled or linked.
    let app = p.build.join("stencil-app");
    let generated = p.gevo_file("stencil_ptx.cpp");
    let before = (p.mtime(&app), p.mtime(&generated));
    let log = p.build();
    assert!(log.contains("stencil.ptx unchanged"), "{log}");
    assert!(!log.contains("Linking"), "{log}");
    assert_eq!((p.mtime(&app), p.mtime(&generated)), before, "{log}");

    // 4. The daemon stops: its export still serves the same PTX, so again
    // nothing is rebuilt; without the export, the original is back.
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "gevod: {status}\n{}", d.log_text());
    let log = p.build();
    assert!(log.contains("using the evolved PTX"), "{log}");
    assert!(log.contains("from the export"), "{log}");
    assert!(!log.contains("Linking"), "{log}");
    assert_eq!(p.app("--print-ptx"), embedded);

    std::fs::remove_dir_all(p.state.join("exports")).unwrap();
    let log = p.build();
    assert!(
        log.contains("using the original PTX: gevod unreachable and no export"),
        "{log}"
    );
    assert_eq!(p.app("--print-ptx"), original);
    assert_eq!(p.app("--origin"), "original\n");
}

#[test]
fn prebuilt_ir_from_gevo_ir_dir_needs_no_clang() {
    for tool in ["cmake", "clang-19"] {
        if !have(tool) {
            println!("skipped: {tool} is not installed");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    // A normal build emits the IR with clang ...
    let normal = Project::new(dir.path(), "stencil-app", "normal");
    normal.configure();
    normal.build();
    let ir = normal.gevo_file("stencil.ll");
    let original = normal.original();
    assert!(original.contains(".entry stencil5"), "{original}");

    // ... which a build machine without clang takes from GEVO_IR_DIR (a
    // relative path is relative to the build directory). A clang that does
    // not exist would fail the build if anything ran it.
    let no_clang = vec![
        "-DGEVO_IR_DIR=../normal/gevo".to_string(),
        format!("-DGEVO_CLANG={}", s(&dir.path().join("no-such-clang-19"))),
    ];
    let p = Project::new(dir.path(), "stencil-app", "prebuilt");
    let log = p.configure_with(&no_clang);
    assert!(
        log.contains(&format!(
            "gevo: stencil: device IR from {} (GEVO_IR_DIR)",
            s(&ir)
        )),
        "{log}"
    );
    assert!(
        !log.contains("finds no CUDA installation"),
        "clang ran:\n{log}"
    );
    let log = p.build();
    assert!(
        log.contains(&format!("gevo: device IR of stencil from {}", s(&ir))),
        "{log}"
    );
    assert!(!log.contains("device IR of stencil for"), "{log}");
    assert_eq!(
        std::fs::read(p.gevo_file("stencil.ll")).unwrap(),
        std::fs::read(&ir).unwrap()
    );
    // The same IR gives the same spec (its hash names the IR) and the same
    // original PTX, made by gevod, which is what the program embeds.
    assert_eq!(
        std::fs::read_to_string(p.gevo_file("stencil.gevo.toml")).unwrap(),
        std::fs::read_to_string(normal.gevo_file("stencil.gevo.toml")).unwrap()
    );
    assert_eq!(p.original(), original);
    assert_eq!(p.app("--print-ptx"), original);
    assert_eq!(p.app("--origin"), "original\n");

    // New IR there is copied at the next build; unchanged IR copies nothing.
    let log = p.build();
    assert!(!log.contains("device IR of stencil"), "{log}");
    let mut changed = std::fs::read_to_string(&ir).unwrap();
    changed.push_str("\n; rebuilt elsewhere\n");
    std::fs::write(&ir, &changed).unwrap();
    let log = p.build();
    assert!(log.contains("gevo: device IR of stencil from"), "{log}");
    assert_eq!(
        std::fs::read_to_string(p.gevo_file("stencil.ll")).unwrap(),
        changed
    );

    // Configure-time errors name what is missing.
    let missing = Project::new(dir.path(), "stencil-app", "missing");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let log = missing.configure_fails(&[format!("-DGEVO_IR_DIR={}", s(&empty))]);
    let wanted = format!("{}/stencil.ll", s(&empty));
    // cmake wraps long messages: compare without line breaks.
    let flat = log.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&format!("GEVO_IR_DIR is set, but {wanted} does not exist")),
        "{log}"
    );
    let neither = Project::new(dir.path(), "stencil-app", "neither");
    let mut args = no_clang.clone();
    args.push(format!("-DGEVOD={}", s(&dir.path().join("no-such-gevod"))));
    let log = neither.configure_fails(&args);
    let flat = log.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("GEVO_IR_DIR is set and neither gevod nor clang is available to compile the original PTX"),
        "{log}"
    );
}
