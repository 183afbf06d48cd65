//! Shared by the client's integration tests: scratch directories, a fake
//! gevod on a temporary socket, and running the real `gevo-client`.
#![allow(dead_code)]

use gevo_client::export;
use gevo_client::proto::{Best, BestRecord, Command, Reply, Request, Response};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// A fresh directory for one test (or one case of one).
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gevo-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub struct FakeDaemon {
    pub requests: Receiver<Request>,
}

impl FakeDaemon {
    /// Serves one connection per reply, in order.
    pub fn replying(socket: &Path, replies: Vec<Response>) -> FakeDaemon {
        let listener = UnixListener::bind(socket).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for response in replies {
                let (mut conn, _) = listener.accept().unwrap();
                let mut line = String::new();
                BufReader::new(&conn).read_line(&mut line).unwrap();
                // Reported before answering, so it is there when the client
                // exits; a test that no longer listens does not care.
                let _ = tx.send(serde_json::from_str(&line).unwrap());
                let mut line = serde_json::to_vec(&response).unwrap();
                line.push(b'\n');
                conn.write_all(&line).unwrap();
            }
        });
        FakeDaemon { requests: rx }
    }

    /// Accepts every connection and never answers.
    pub fn silent(socket: &Path) {
        let listener = UnixListener::bind(socket).unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming() {
                held.push(conn);
            }
        });
    }

    pub fn received(&self) -> Command {
        self.requests
            .recv_timeout(Duration::from_secs(5))
            .expect("the client sent no request")
            .command
    }

    pub fn received_nothing(&self) -> bool {
        self.requests.try_recv().is_err()
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The client in `dir` with a user environment pointing into `dir`, so
/// that no real config or daemon of the machine takes part.
fn client(dir: &Path, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gevo-client"));
    command
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_STATE_HOME", dir.join("xdg-state"))
        .env("XDG_RUNTIME_DIR", dir.join("run"));
    command
}

fn finished(output: Output) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = output;
    Run {
        code: status.code().expect("exited, not killed"),
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
    }
}

/// Runs the client (see [`client`]) to its end.
pub fn gevo(dir: &Path, args: &[&str]) -> Run {
    finished(client(dir, args).output().unwrap())
}

/// Runs the client like [`gevo`], killing it after `limit`: `None` when it
/// had to, so that a client that blocks fails its test instead of hanging it.
pub fn gevo_within(dir: &Path, args: &[&str], limit: Duration) -> Option<Run> {
    let mut child = client(dir, args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Some(finished(child.wait_with_output().unwrap()))
}

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
        0,
        "{}",
        path.display()
    );
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn best(kernel: &str, target: &str, speedup: f64, ptx: &str) -> Best {
    Best {
        record: BestRecord {
            configuration: None,
            kernel: kernel.into(),
            job: "j1".into(),
            version: 2,
            target: target.into(),
            backend: "cuda".into(),
            speedup,
            interval: (speedup - 0.034, speedup + 0.026),
            generation: 40,
            ptx_hash: export::ptx_hash(ptx),
            spec_hash: "spec".into(),
            ir_hash: "ir".into(),
            validated_at: 1_700_000_000,
        },
        ptx: ptx.into(),
    }
}

pub fn ok(reply: Reply) -> Response {
    Response::ok(reply)
}

pub const PTX: &str = ".version 8.0\n.target sm_90\n.entry stencil() { ret; }\n";
