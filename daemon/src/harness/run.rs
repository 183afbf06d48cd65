//! Running one harness command: the program opened (and checked) when the
//! spec loaded, executed from that descriptor; a scrubbed environment, its
//! own process group (so a timeout kills whatever it started), an optional
//! drop to an unprivileged user, a wall-clock limit and capped output.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The `PATH` a harness command sees.
pub const HARNESS_PATH: &str = gevo_model::spec::Harness::PATH;

/// One run's command and limits.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub argv: Vec<String>,
    /// The program as opened when the spec loaded (`Harness::program`):
    /// when given, this file runs, under the name `argv[0]`, whatever
    /// `argv[0]` names by now; else `argv[0]` is looked up as usual.
    pub program: Option<Arc<OwnedFd>>,
    pub workdir: PathBuf,
    /// The whole environment (nothing is inherited).
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// Bytes kept of stdout and of stderr each; more is an error.
    pub max_output_bytes: u64,
    /// Run as this uid and gid (the daemon running as root).
    pub user: Option<(u32, u32)>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Exited(i32),
    Signaled(i32),
    TimedOut,
}

#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub ending: Ending,
    pub wall: Duration,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// A stream wrote more than `max_output_bytes`.
    pub overflowed: bool,
}

impl RunOutcome {
    /// The last non-empty lines of stderr (for failure messages).
    pub fn stderr_tail(&self, lines: usize) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        let kept: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        kept[kept.len().saturating_sub(lines)..].join(" | ")
    }
}

/// Reads a stream to its end, keeping at most `cap` bytes; whether more came.
fn drain(mut stream: impl Read, cap: u64) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut overflowed = false;
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = (cap as usize).saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                overflowed |= n > room;
            }
        }
    }
    (kept, overflowed)
}

/// A command that executes the open file `fd` (not a path that could name
/// another file by now) as `name`. It runs `/proc/self/fd/N` with the
/// descriptor kept open across the exec, in the child only: a script's
/// interpreter opens that same path (the kernel passes it as the script),
/// which an `fexecve` of a close-on-exec descriptor would leave dangling.
/// Close-on-exec stays set in this process, so no other thread's children
/// inherit it. The descriptor is `O_PATH`: the program cannot read through
/// it what its user could not read anyway.
fn exec_descriptor(name: &str, fd: &Arc<OwnedFd>) -> Command {
    let raw = fd.as_raw_fd();
    let mut command = Command::new(format!("/proc/self/fd/{raw}"));
    command.arg0(name);
    // SAFETY: fcntl(2) is async-signal-safe and touches no memory; `raw`
    // is open in the child, a copy of this process whose `request` holds it.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(raw, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

/// Runs the command to its end or its timeout. `Err` only when it cannot
/// be started at all (no such program, no working directory).
pub fn run(request: &RunRequest) -> Result<RunOutcome, String> {
    let (program, args) = request
        .argv
        .split_first()
        .ok_or_else(|| "empty command".to_string())?;
    let mut command = match &request.program {
        None => Command::new(program),
        Some(fd) => exec_descriptor(program, fd),
    };
    command
        .args(args)
        .env_clear()
        .envs(request.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&request.workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some((uid, gid)) = request.user {
        // std drops the supplementary groups too when it changes the uid.
        command.uid(uid).gid(gid);
    }
    let started = Instant::now();
    let mut child = command.spawn().map_err(|e| {
        format!(
            "cannot start {program} in {}: {e}",
            request.workdir.display()
        )
    })?;
    let group = child.id() as libc::pid_t;
    let _own = gevo_model::own_processes::started_group(child.id());
    let cap = request.max_output_bytes;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || drain(stdout, cap));
    let err_reader = std::thread::spawn(move || drain(stderr, cap));

    let (done_tx, done_rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = done_tx.send(());
        status
    });
    let timed_out = done_rx.recv_timeout(request.timeout).is_err();
    // Whatever the command left running (a timed-out tree, or helpers it
    // started in the background) goes with it.
    // SAFETY: kill(2) on our child's process group; no memory is involved.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
    let status = waiter
        .join()
        .map_err(|_| "the waiting thread panicked".to_string())?
        .map_err(|e| format!("waiting for {program}: {e}"))?;
    let wall = started.elapsed();
    let (stdout, out_over) = out_reader.join().unwrap_or_default();
    let (stderr, err_over) = err_reader.join().unwrap_or_default();
    let ending = if timed_out {
        Ending::TimedOut
    } else if let Some(code) = status.code() {
        Ending::Exited(code)
    } else {
        Ending::Signaled(status.signal().unwrap_or(0))
    };
    Ok(RunOutcome {
        ending,
        wall,
        stdout,
        stderr,
        overflowed: out_over || err_over,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(script: &str) -> RunRequest {
        RunRequest {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            program: None,
            workdir: std::env::temp_dir(),
            env: vec![
                ("PATH".into(), HARNESS_PATH.into()),
                ("GEVO_TEST".into(), "train[0]".into()),
            ],
            timeout: Duration::from_secs(10),
            max_output_bytes: 1 << 16,
            user: None,
        }
    }

    #[test]
    fn exit_codes_signals_and_output() {
        let ok = run(&request("echo out; echo err >&2; exit 0")).unwrap();
        assert_eq!(ok.ending, Ending::Exited(0));
        assert_eq!(ok.stdout, b"out\n");
        assert_eq!(ok.stderr_tail(3), "err");
        assert_eq!(run(&request("exit 7")).unwrap().ending, Ending::Exited(7));
        assert_eq!(
            run(&request("kill -SEGV $$")).unwrap().ending,
            Ending::Signaled(libc::SIGSEGV)
        );
    }

    /// Only the given variables reach the command.
    #[test]
    fn environment_is_scrubbed() {
        std::env::set_var("GEVO_RUN_TEST_SECRET", "leaked");
        let out = run(&request("env")).unwrap();
        let env = String::from_utf8(out.stdout).unwrap();
        let mut names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
        names.sort();
        // sh itself may export PWD, SHLVL and `_`.
        names.retain(|n| !["PWD", "SHLVL", "_"].contains(n));
        assert_eq!(names, ["GEVO_TEST", "PATH"]);
    }

    /// A command past its timeout is killed with everything it started.
    #[test]
    fn timeout_kills_the_process_group() {
        let mut r = request("sleep 30 & echo $! ; wait");
        r.timeout = Duration::from_millis(300);
        let out = run(&r).unwrap();
        assert_eq!(out.ending, Ending::TimedOut);
        assert!(out.wall < Duration::from_secs(5), "{:?}", out.wall);
        let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        // The background sleep is gone (or a zombie about to be reaped by
        // init); on a loaded machine the kill may take a moment to land.
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| !s.contains(") Z "))
                .unwrap_or(false)
        };
        let since = std::time::Instant::now();
        while alive() && since.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(), "the background child {pid} survived");
    }

    #[test]
    fn output_is_capped() {
        let mut r = request("head -c 100000 /dev/zero");
        r.max_output_bytes = 1000;
        let out = run(&r).unwrap();
        assert_eq!(out.stdout.len(), 1000);
        assert!(out.overflowed);
    }

    #[test]
    fn missing_program_is_an_error_naming_it() {
        let mut r = request("");
        r.argv = vec!["/nonexistent/app".into()];
        let e = run(&r).unwrap_err();
        assert!(e.contains("/nonexistent/app"), "{e}");
    }

    /// The file opened runs, not what its path names by the time of the
    /// run: a script (its interpreter opens `/proc/self/fd/N`) and a
    /// binary (under its own name), and as another user.
    #[test]
    fn the_opened_file_runs_whatever_its_path_names_now() {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, PermissionsExt::from_mode(0o755)).unwrap();
            p
        };
        let opened = |p: &std::path::Path| -> Arc<OwnedFd> {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH)
                .open(p)
                .unwrap();
            Arc::new(file.into())
        };
        let app = write("app.sh", "#!/bin/sh\necho checked \"$1\"\n");
        let fd = opened(&app);
        let other = write("other.sh", "#!/bin/sh\necho swapped\n");
        std::fs::rename(&other, &app).unwrap();
        let mut r = request("");
        r.argv = vec!["./app.sh".into(), "x".into()];
        r.workdir = dir.path().to_path_buf();
        r.program = Some(fd.clone());
        let out = run(&r).unwrap();
        assert_eq!(out.ending, Ending::Exited(0), "{}", out.stderr_tail(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "checked x\n");
        // Without the descriptor, the path's file.
        r.program = None;
        assert_eq!(run(&r).unwrap().stdout, b"swapped\n");

        let mut r = request("echo $0; id -u");
        r.program = Some(opened(std::path::Path::new("/bin/sh")));
        r.argv[0] = "my-sh".into();
        let out = run(&r).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().next(),
            Some("my-sh")
        );
        // SAFETY: geteuid cannot fail and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: changing the user needs root");
            return;
        }
        r.user = Some((65534, 65534));
        r.workdir = PathBuf::from("/");
        let out = run(&r).unwrap();
        assert_eq!(out.ending, Ending::Exited(0), "{}", out.stderr_tail(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "my-sh\n65534\n");
        // A script too: its interpreter, already another user, opens it.
        r.argv = vec!["./app.sh".into(), "y".into()];
        r.program = Some(fd);
        let out = run(&r).unwrap();
        assert_eq!(out.ending, Ending::Exited(0), "{}", out.stderr_tail(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "checked y\n");
    }

    /// As root, the command runs as the given unprivileged user.
    #[test]
    fn runs_as_the_given_user() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: changing the user needs root");
            return;
        }
        let mut r = request("id -u; id -g; id -G");
        r.user = Some((65534, 65534));
        r.workdir = PathBuf::from("/");
        let out = run(&r).unwrap();
        assert_eq!(out.ending, Ending::Exited(0), "{}", out.stderr_tail(3));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "65534\n65534\n65534\n"
        );
    }
}
