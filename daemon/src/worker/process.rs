//! One worker process of a [`WorkerPool`](super::pool::WorkerPool):
//! starting it where its [`Launcher`] says, the threads that turn its stdout
//! into [`Event`]s and keep the tail of its stderr, and ending it.

use super::launch::Launcher;
use super::pool::PoolOptions;
use gevo_search::evolve::BackendError;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) enum State {
    Starting(Instant),
    /// Holding no request, since then.
    Idle(Instant),
    /// Requests sent, oldest first; `since`: when the oldest started.
    Busy {
        requests: VecDeque<usize>,
        since: Instant,
    },
    /// Gone and not replaced (a Slurm step whose replacement failed).
    Lost,
}

pub(super) struct Worker {
    pub serial: u64,
    /// Which of `slot_args` it was started with.
    pub slot: usize,
    pub child: Child,
    pub stdin: ChildStdin,
    stderr_tail: Arc<Mutex<String>>,
    pub state: State,
    /// How much of its pool's known log (`WorkerPool::note_known`) its
    /// compile requests have carried.
    pub known_sent: usize,
    /// Its process group counts as gevod's on the GPU while it lives.
    _group: gevo_model::own_processes::GroupGuard,
    /// A local worker's `TMPDIR`: what it leaves there (a harness run's
    /// scratch files, when it is killed mid-run) goes with it.
    _scratch: Option<tempfile::TempDir>,
}

/// What a worker's stdout reader reports, tagged with the worker's serial.
pub(super) enum Event {
    Line(u64, String),
    Closed(u64),
    /// A pool's feed has more requests ([`super::pool::Waker`]).
    Wake,
}

/// Keeps the last few KiB a worker wrote to stderr, for crash reports.
const STDERR_TAIL: usize = 4096;

/// Why a worker process did not start, in words: EAGAIN (`Resource
/// temporarily unavailable`) is a limit on processes or memory, not the
/// program.
fn spawn_failed(program: &std::path::Path, e: &std::io::Error) -> String {
    let why = match e.raw_os_error() {
        Some(libc::EAGAIN) => {
            "the system refused a new process (EAGAIN: a limit on processes or memory is reached; fewer [workers] count or --workers?)".to_string()
        }
        Some(libc::ENOMEM) => "out of memory".to_string(),
        _ => e.to_string(),
    };
    format!("cannot start worker {}: {why}", program.display())
}

impl Worker {
    /// Starts the worker of `slot` (numbered `serial` in its events, sent
    /// to `events`); it is [`State::Starting`] until it greets.
    pub fn start(
        options: &PoolOptions,
        slot: usize,
        serial: u64,
        events: Sender<Event>,
    ) -> Result<Worker, BackendError> {
        let mut args = options.args.clone();
        if !options.slot_args.is_empty() {
            args.extend(options.slot_args[slot % options.slot_args.len()].clone());
        }
        let mut command = options
            .launcher
            .command(&options.program, &args, options.gpu);
        // A Slurm step runs elsewhere: its TMPDIR is its node's business.
        let scratch = match options.launcher {
            Launcher::Local => Some(worker_scratch()?),
            Launcher::Slurm(_) => None,
        };
        if let Some(dir) = &scratch {
            command.env("TMPDIR", dir.path());
        }
        command
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a Ctrl-C meant for the engine does not
            // kill the workers mid-answer; the engine stops them.
            .process_group(0);
        super::priority::lower_in_child(&mut command, options.cpu);
        let mut child = command
            .spawn()
            .map_err(|e| BackendError::Failed(spawn_failed(&options.program, &e)))?;
        let group = gevo_model::own_processes::started_group(child.id());
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            // Only whole lines are answers: a worker killed while writing
            // (a cancelled Slurm step's last, cut-off line) just closed.
            while matches!(reader.read_line(&mut line), Ok(n) if n > 0) && line.ends_with('\n') {
                line.pop();
                if events
                    .send(Event::Line(serial, std::mem::take(&mut line)))
                    .is_err()
                {
                    return;
                }
            }
            let _ = events.send(Event::Closed(serial));
        });
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let tail = stderr_tail.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().expect("stderr tail");
                t.push_str(&String::from_utf8_lossy(&buf[..n]));
                if t.len() > STDERR_TAIL {
                    let cut = t.len() - STDERR_TAIL;
                    let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                    t.drain(..cut);
                }
            }
        });
        Ok(Worker {
            serial,
            slot,
            child,
            stdin,
            stderr_tail,
            state: State::Starting(Instant::now()),
            known_sent: 0,
            _group: group,
            _scratch: scratch,
        })
    }

    /// Stops the process and says how it ended, with its last stderr line.
    pub fn end(&mut self, launcher: &Launcher) -> String {
        stop_worker(launcher, &mut self.child);
        let status = self.child.wait().ok();
        // The reader threads may still be delivering the last lines.
        std::thread::sleep(Duration::from_millis(5));
        let tail = last_line(&self.stderr_tail.lock().expect("stderr tail"));
        let mut what = status.map_or_else(|| "unknown status".to_string(), |s| s.to_string());
        if !tail.is_empty() {
            what.push_str(&format!("; stderr: {tail}"));
        }
        what
    }

    /// Stops the process and reaps it, saying nothing (the pool is going).
    pub fn stop(&mut self, launcher: &Launcher) {
        stop_worker(launcher, &mut self.child);
        let _ = self.child.wait();
    }
}

/// Ends a worker: a local process is killed; an `srun` gets SIGTERM first,
/// which it passes to its step (a killed srun could leave the step running
/// until the allocation ends), and a kill if it has not ended in 2 s.
fn stop_worker(launcher: &Launcher, child: &mut Child) {
    if matches!(launcher, Launcher::Slurm(_)) {
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) on our own child's pid; no memory is involved.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    let _ = child.kill();
}

/// The start of a worker's temporary directory's name: then the pid of the
/// process that made it, a dash and random characters.
const SCRATCH_PREFIX: &str = "gevo-worker-";

/// A worker's private temporary directory. Others may pass through it
/// (0711) to the scratch directories a worker makes for a harness program
/// running as another user, but not list it. Its name carries this
/// process's pid, so that the first worker a later process starts removes
/// the ones a killed process left ([`remove_stale_scratch`]).
fn worker_scratch() -> Result<tempfile::TempDir, BackendError> {
    static CLEANED: std::sync::Once = std::sync::Once::new();
    CLEANED.call_once(|| {
        remove_stale_scratch(&std::env::temp_dir());
    });
    tempfile::Builder::new()
        .prefix(&format!("{SCRATCH_PREFIX}{}-", std::process::id()))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o711))
        .tempdir()
        .map_err(|e| BackendError::Failed(format!("creating a worker's temporary directory: {e}")))
}

/// Removes the worker directories in `tmp` that a killed gevod left (its
/// workers' directories are removed with them, but not after a SIGKILL):
/// named `gevo-worker-<pid>-...` by a process that no longer runs, a
/// directory (a link is never followed) that this effective user owns.
/// Another user's, a live process's and those named otherwise (an older
/// gevod's) stay. Returns how many went.
fn remove_stale_scratch(tmp: &std::path::Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail and touches no memory.
    let euid = unsafe { libc::geteuid() };
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(scratch_pid) else {
            continue;
        };
        let path = entry.path();
        // lstat: a link is itself, never what it points to.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.file_type().is_dir() || meta.uid() != euid || process_runs(pid) {
            continue;
        }
        // Not following links inside either; in a sticky temporary
        // directory nobody but its owner (or root) can swap it meanwhile.
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed += 1,
            Err(e) => tracing::warn!(dir = %path.display(), error = %e,
                "cannot remove a killed worker's temporary directory"),
        }
    }
    if removed > 0 {
        tracing::info!(removed, tmp = %tmp.display(), "removed temporary directories of killed workers");
    }
    removed
}

/// The pid in a worker directory's name, `gevo-worker-<pid>-<random>`.
fn scratch_pid(name: &str) -> Option<i32> {
    let (pid, random) = name.strip_prefix(SCRATCH_PREFIX)?.split_once('-')?;
    if random.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|&pid: &i32| pid > 0)
}

/// Whether process `pid` exists (a zombie does; anything but "no such
/// process" counts as existing, so a directory is kept when in doubt).
fn process_runs(pid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks the pid.
    let status = unsafe { libc::kill(pid, 0) };
    status == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

fn last_line(text: &str) -> String {
    truncate(text.trim_end().lines().last().unwrap_or(""), 200)
}

pub(super) fn truncate(s: &str, max: usize) -> String {
    gevo_client::text::shorten(s, max).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::setup::SetupError;

    /// As `gevod` prints it: the error, then its sources unless repeated.
    fn printed(e: &SetupError) -> String {
        let chain = std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |e| {
            e.source()
        });
        gevo_client::text::error_line(chain)
    }

    #[test]
    fn a_worker_that_cannot_start_is_one_line_saying_why_once() {
        let program = std::path::Path::new("/opt/gevod");
        for (errno, expected) in [
            (
                libc::EAGAIN,
                "k.gevo.toml: cannot start worker /opt/gevod: the system refused a new process \
                 (EAGAIN: a limit on processes or memory is reached; fewer [workers] count or --workers?)",
            ),
            (
                libc::ENOENT,
                "k.gevo.toml: cannot start worker /opt/gevod: No such file or directory (os error 2)",
            ),
        ] {
            let e = std::io::Error::from_raw_os_error(errno);
            let error = SetupError::Backend {
                spec: "k.gevo.toml".into(),
                source: BackendError::Failed(spawn_failed(program, &e)),
            };
            assert_eq!(printed(&error), expected);
        }
    }
}
