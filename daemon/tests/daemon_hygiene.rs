//! What the daemon leaves around it: the worker directories a killed gevod
//! left in the temporary directory, and its own state directory inside a
//! watched root. (The store's size while running is tested beside the
//! store, crates/search/src/store/compact.rs.)

use crate::common::daemon::{build_dir, s, Daemon};
use gevo_client::proto::JobState;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The worker directories in `tmp` made by process `pid`.
fn worker_dirs_of(tmp: &Path, pid: u32) -> Vec<PathBuf> {
    let prefix = format!("gevo-worker-{pid}-");
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// A pid no process has now: a process started and waited for.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn worker_directories_a_killed_gevod_left_go_at_the_next_start_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let dead = dead_pid();
    let stale = tmp.join(format!("gevo-worker-{dead}-Ab12Cd"));
    std::fs::create_dir_all(stale.join("harness")).unwrap();
    std::fs::write(stale.join("harness/out.bin"), b"left by a killed run").unwrap();
    // A live process's (this test's), an older gevod's (no pid in the
    // name), and a link named like a stale directory: all stay, and so
    // does what the link points to.
    let live = tmp.join(format!("gevo-worker-{}-Ef34Gh", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let older = tmp.join("gevo-worker-x1Y2z3");
    std::fs::create_dir(&older).unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), b"not the daemon's").unwrap();
    let link = tmp.join(format!("gevo-worker-{dead}-Link00"));
    std::os::unix::fs::symlink(&target, &link).unwrap();
    // Another user's (only root can make one).
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    let theirs = tmp.join(format!("gevo-worker-{dead}-Th3irs"));
    if root {
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::lchown(&theirs, Some(65534), Some(65534)).unwrap();
    } else {
        println!("not root: no directory of another user's to keep");
    }

    build_dir(dir.path(), "app");
    let app = dir.path().join("app");
    let watch = ["--watch", s(&app)];
    let env = [("TMPDIR", s(&tmp))];
    let mut d = Daemon::start_with_env(dir.path(), &watch, &env);
    let first = d.child.as_ref().unwrap().id();
    d.wait_for("the killed run's directory removed", |_| {
        (!stale.exists()).then_some(())
    });
    d.wait_for("a worker's directory named by the daemon", |_| {
        (!worker_dirs_of(&tmp, first).is_empty()).then_some(())
    });
    for kept in [&live, &older, &target] {
        assert!(kept.is_dir(), "{} removed", kept.display());
    }
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(target.join("keep").is_file());
    if root {
        assert!(theirs.is_dir(), "another user's directory removed");
    }

    // A SIGKILL leaves the daemon's worker directories behind ...
    d.wait_for("a generation", |d| {
        d.jobs().into_iter().find(|j| j.generations >= 1)
    });
    d.signal(libc::SIGKILL);
    let left = worker_dirs_of(&tmp, first);
    assert!(!left.is_empty(), "nothing left to clean up");
    // ... until the next daemon starts its first worker.
    d.spawn_with_env(&watch, &env);
    let second = d.child.as_ref().unwrap().id();
    d.wait_for("the killed daemon's directories removed", |_| {
        left.iter().all(|p| !p.exists()).then_some(())
    });
    d.wait_for("the new daemon's worker directory", |_| {
        (!worker_dirs_of(&tmp, second).is_empty()).then_some(())
    });
    assert!(live.is_dir() && older.is_dir() && target.join("keep").is_file());
    if root {
        assert!(theirs.is_dir(), "another user's directory removed");
    }
}

#[test]
fn a_state_directory_inside_a_watch_root_is_not_searched_for_specs() {
    let dir = tempfile::tempdir().unwrap();
    build_dir(dir.path(), "app");
    // The state directory is `dir/state`: inside the root watched.
    let d = Daemon::start(dir.path(), &["--watch", s(dir.path())]);
    let job = d.wait_for("two generations", |d| {
        d.jobs().into_iter().find(|j| j.generations >= 2)
    });
    // The job's snapshots are named like specs ...
    let snapshots: Vec<PathBuf> = walk(&d.state)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".gevo.toml"))
        .collect();
    assert!(!snapshots.is_empty(), "no snapshot to find");
    // ... and scans (every second, and after each file event) pass them by.
    std::thread::sleep(Duration::from_secs(3));
    let jobs = d.jobs();
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    assert_eq!(jobs[0].job, job.job);
    assert_ne!(jobs[0].state, JobState::Error, "{jobs:#?}");
    assert!(!jobs[0].spec.starts_with(&d.state), "{jobs:#?}");
    let status = d.client(&["status"]);
    let table = String::from_utf8_lossy(&status.stdout);
    assert!(!table.contains("spec.gevo.toml"), "{table}");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}
