//! A `gevod serve` process for tests: a temporary socket and state
//! directory, the simulator backend, requests over the socket, and
//! `gevo-client` run against it.

use gevo_client::proto::{Command, JobInfo, Reply, Request, Response};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Small and quick: stencil variants validate within a few generations.
/// At normal CPU priority: the tests share two cores, where an idle-priority
/// search would wait for every other test (`daemon_cpu` tests the default).
pub const CONFIG: &str = r#"
[daemon]
settle = "300ms"
scan_interval = "1s"
debounce = "200ms"
[schedule]
slice = "1s"
[gpu]
backend = "sim"
[workers]
count = 1
cpu = "normal"
[evolve]
population = 32
"#;

pub const WAIT: Duration = Duration::from_secs(180);

pub use super::s;

/// gevo-client, built beside gevod (`cargo build --workspace`).
pub fn client_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("gevo-client");
    assert!(
        bin.exists(),
        "{} is missing: build it first (cargo build -p gevo-client)",
        bin.display()
    );
    bin
}

pub struct Daemon {
    pub child: Option<Child>,
    /// The gevod binary (a copy where another user can reach it, or the build's).
    pub binary: PathBuf,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub config: PathBuf,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts `gevod serve` in `dir` (config `dir/gevod.toml`, written from
    /// CONFIG unless present) and waits for its socket.
    pub fn start(dir: &Path, args: &[&str]) -> Daemon {
        Self::start_with_env(dir, args, &[])
    }

    pub fn start_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut d = Self::unstarted(dir, Path::new(env!("CARGO_BIN_EXE_gevod")));
        d.spawn_with_env(args, env);
        d
    }

    /// `start` watching `dir/app`, whose build directory ([`build_dir`])
    /// holds the stencil fixture; returns that build directory too.
    pub fn watching_stencil(dir: &Path) -> (Daemon, PathBuf) {
        let build = build_dir(dir, "app");
        let d = Self::start(dir, &["--watch", s(&dir.join("app"))]);
        (d, build)
    }

    /// Like `start`, from another gevod binary.
    pub fn start_binary(dir: &Path, binary: &Path, args: &[&str]) -> Daemon {
        let mut d = Self::unstarted(dir, binary);
        d.spawn(args);
        d
    }

    fn unstarted(dir: &Path, binary: &Path) -> Daemon {
        let config = dir.join("gevod.toml");
        if !config.exists() {
            std::fs::write(&config, CONFIG).unwrap();
        }
        let log = dir.join(format!("gevod-{}.log", Instant::now().elapsed().as_nanos()));
        Daemon {
            child: None,
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
            socket: dir.join("gevod.sock"),
            state: dir.join("state"),
            config,
            log,
        }
    }

    pub fn spawn(&mut self, args: &[&str]) {
        self.spawn_with_env(args, &[])
    }

    pub fn spawn_with_env(&mut self, args: &[&str], env: &[(&str, &str)]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Process::new(&self.binary);
        command
            .args([
                "serve",
                "--config",
                s(&self.config),
                "--state",
                s(&self.state),
            ])
            .args(["--socket", s(&self.socket)])
            .args(args)
            .env("GEVOD_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log);
        // A copy of gevod just written (`start_binary`) may still be open
        // in a child another test thread forked meanwhile, until that child
        // execs: exec then fails with ETXTBSY for a moment.
        let mut tries = 0;
        let child = loop {
            match command.spawn() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                result => break result.unwrap(),
            }
        };
        self.child = Some(child);
        let started = Instant::now();
        while self.try_call(Command::Status).is_none() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("gevod exited with {status}:\n{}", self.log_text());
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no socket:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn try_call(&self, command: Command) -> Option<Response> {
        let mut stream = UnixStream::connect(&self.socket).ok()?;
        let line = serde_json::to_string(&Request::new(command)).unwrap() + "\n";
        stream.write_all(line.as_bytes()).ok()?;
        let mut answer = String::new();
        BufReader::new(stream).read_line(&mut answer).ok()?;
        serde_json::from_str(&answer).ok()
    }

    pub fn call(&self, command: Command) -> Reply {
        let response = self
            .try_call(command.clone())
            .unwrap_or_else(|| panic!("{command:?}: no answer\n{}", self.log_text()));
        match response.body {
            gevo_client::proto::Body::Ok(reply) => reply,
            gevo_client::proto::Body::Error(e) => panic!("{command:?}: {e:?}"),
        }
    }

    pub fn jobs(&self) -> Vec<JobInfo> {
        match self.call(Command::Jobs { kernel: None }) {
            Reply::Jobs(jobs) => jobs,
            other => panic!("jobs answered {other:?}"),
        }
    }

    /// Polls `check` until it gives a value.
    pub fn wait_for<T>(&self, what: &str, mut check: impl FnMut(&Daemon) -> Option<T>) -> T {
        let started = Instant::now();
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            assert!(
                started.elapsed() < WAIT,
                "timed out waiting for {what}; jobs: {:#?}\n{}",
                self.jobs(),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `gevo-client --json best <kernel>`'s answer; `None` while the kernel
    /// has no validated variant (exit 3).
    pub fn validated_best(&self, kernel: &str) -> Option<serde_json::Value> {
        let out = self.client(&["--json", "best", kernel]);
        match out.status.code() {
            Some(0) => Some(serde_json::from_slice(&out.stdout).unwrap()),
            Some(3) => None,
            _ => panic!("best: {out:?}"),
        }
    }

    pub fn client(&self, args: &[&str]) -> Output {
        Process::new(client_binary())
            .args(["--socket", s(&self.socket), "--state", s(&self.state)])
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap()
    }

    pub fn signal(&mut self, signal: i32) -> (ExitStatus, Duration) {
        let mut child = self.child.take().expect("running");
        let sent = Instant::now();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        (status, sent.elapsed())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A build directory `dir/<project>/build` with the stencil fixture.
pub fn build_dir(dir: &Path, project: &str) -> PathBuf {
    let build = build_dir_with(
        dir,
        project,
        &super::spec_fixture("stencil"),
        &super::kernel_fixture("stencil"),
    );
    // The CUDA source the IR's line tables name, beside it.
    let source = super::kernel_fixture("stencil").with_extension("cu");
    std::fs::copy(source, build.join("stencil.cu")).unwrap();
    build
}

/// A build directory `dir/<project>/build` holding copies of the spec at
/// `spec` and its IR `ir`, under their own file names.
pub fn build_dir_with(dir: &Path, project: &str, spec: &Path, ir: &Path) -> PathBuf {
    let build = dir.join(project).join("build");
    std::fs::create_dir_all(&build).unwrap();
    // Without `project`, the kernel is named after the watched directory.
    let text = std::fs::read_to_string(spec).unwrap();
    let text = super::without_lines(&text, "project");
    std::fs::write(build.join(spec.file_name().unwrap()), text).unwrap();
    std::fs::copy(ir, build.join(ir.file_name().unwrap())).unwrap();
    build
}
