//! Every path a `gevod` command reads, given a FIFO, `/dev/zero` or a
//! directory: the command ends at once with one line naming the path and
//! what it is (no hang on the FIFO, no memory eaten by the device), and
//! `gevod serve --config <FIFO>` included.

use crate::common;

use common::s;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Generous for a loaded CI machine; each command takes milliseconds.
const LIMIT: Duration = Duration::from_secs(3);

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo touches nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn special_files_on_every_path_option_end_at_once_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let spec = common::spec_fixture("stencil");
    let ir = common::kernel_fixture("stencil");
    let (spec, ir) = (s(&spec), s(&ir));
    let state = dir.path().join("state");
    let socket = dir.path().join("sock");
    let serve_args = ["--state", s(&state), "--socket", s(&socket)];
    // Each command, with `{}` where the special file goes.
    let commands: Vec<Vec<&str>> = vec![
        vec!["ptx", ir, "--patch", "{}"],
        vec!["edits", ir, "--patch", "{}"],
        vec!["run", spec, "--patch", "{}"],
        vec!["evolve", spec, "--start-from", "{}", "--time", "1s"],
        vec!["evolve", spec, "--config", "{}", "--time", "1s"],
        vec!["--check-config", "--config", "{}"],
        [&["serve", "--config", "{}"][..], &serve_args].concat(),
    ];
    let specials = [
        (s(&fifo), "a FIFO"),
        ("/dev/zero", "a character device"),
        (s(dir.path()), "a directory"),
    ];
    for command in &commands {
        for (path, what) in specials {
            let args: Vec<&str> = command
                .iter()
                .map(|a| if *a == "{}" { path } else { a })
                .collect();
            let started = Instant::now();
            let mut child = Command::new(env!("CARGO_BIN_EXE_gevod"))
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
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
            let out = child.wait_with_output().unwrap();
            assert!(ended, "{args:?} still ran after {LIMIT:?}");
            assert!(!out.status.success(), "{args:?} succeeded");
            let stderr = common::text(&out.stderr);
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(lines.len(), 1, "{args:?}:\n{stderr}");
            assert!(
                lines[0].contains(path) && lines[0].contains(what),
                "{args:?}: {stderr}"
            );
        }
    }
}
