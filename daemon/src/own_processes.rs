//! Which processes on a GPU are gevod's own. The daemon computes on its GPUs
//! through processes it starts: workers, compute-sanitizer and the worker it
//! runs, harness programs, Slurm's local `srun`. None of them is "another
//! user" of the GPU, or the daemon would stop its job for its own
//! validation (it did, for 30 s at every promotion).
//!
//! A process is gevod's own when its ancestry reaches the daemon, or when it
//! or an ancestor belongs to a process group the daemon started (workers
//! and harness programs lead their own groups, so a program that forks into
//! the background and is re-parented to init still counts). A process that
//! leaves both (a new session under init) counts as another user: it could
//! be anybody's.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// How far up a process tree the walk goes: deeper trees are not gevod's.
const MAX_DEPTH: usize = 64;

/// Where a process's parent and process group come from: /proc, or a
/// script in tests. `None` for a process that is gone.
pub trait ProcessTable {
    /// `(parent pid, process group id)`.
    fn lineage(&self, pid: u32) -> Option<(u32, u32)>;
}

/// The running system's table, from `/proc/<pid>/stat`.
pub struct Proc;

impl ProcessTable for Proc {
    fn lineage(&self, pid: u32) -> Option<(u32, u32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, parent, group) = stat_fields(&stat)?;
        Some((parent, group))
    }
}

/// A `/proc/<pid>/stat` line's state, parent and process group: the fields
/// after the command name (which may hold spaces and parentheses).
fn stat_fields(stat: &str) -> Option<(&str, u32, u32)> {
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, parent, group))
}

/// The process groups this process started and that still run.
static STARTED_GROUPS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Marks a started process group as gevod's for as long as it lives.
#[must_use = "the group counts as gevod's only while the guard lives"]
pub struct GroupGuard(u32);

/// Notes that this process started the group led by `pid`.
pub fn started_group(pid: u32) -> GroupGuard {
    lock().insert(pid);
    GroupGuard(pid)
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        lock().remove(&self.0);
    }
}

/// Waits, up to `limit`, until no process of the group `group` is left
/// running: a killed program tears down its GPU context before it exits,
/// and until then the group must still count as gevod's (a killed safety
/// gate's worker, orphaned, stopped the daemon's own job for 30 s). A
/// zombie has exited (its context is gone) and counts as gone: where no
/// init reaps orphans, one may never leave. Answers whether the group is
/// gone.
pub fn await_group_gone(group: u32, limit: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if !group_runs(group) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether a process of `group` runs (one that has not exited: not a
/// zombie), from `/proc/<pid>/stat`.
fn group_runs(group: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            stat_fields(&stat)
                .is_some_and(|(state, _, pgrp)| pgrp == group && !matches!(state, "Z" | "X"))
        })
}

fn lock() -> std::sync::MutexGuard<'static, BTreeSet<u32>> {
    STARTED_GROUPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the daemon knows of its own processes at one look.
pub struct Own {
    pub daemon: u32,
    pub groups: BTreeSet<u32>,
}

impl Own {
    /// This process and the groups it started, now.
    pub fn now() -> Own {
        Own {
            daemon: std::process::id(),
            groups: lock().clone(),
        }
    }

    /// Whether `pid` is the daemon, one of its descendants, or in (or
    /// below a member of) a process group it started.
    pub fn owns(&self, pid: u32, table: &dyn ProcessTable) -> bool {
        let mut p = pid;
        for _ in 0..MAX_DEPTH {
            if p == self.daemon || self.groups.contains(&p) {
                return true;
            }
            let Some((parent, group)) = table.lineage(p) else {
                return false;
            };
            if self.groups.contains(&group) {
                return true;
            }
            if parent <= 1 || parent == p {
                return false;
            }
            p = parent;
        }
        false
    }
}

/// A short name of another process for messages: its command name, with
/// control characters escaped (anybody can name a process).
pub fn describe(pid: u32) -> String {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(comm) => format!(
            "pid {pid} {}",
            gevo_client::text::escape_controls(comm.trim_end_matches('\n'))
        ),
        Err(_) => format!("pid {pid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    /// A scripted table: pid -> (parent, group).
    struct Script(BTreeMap<u32, (u32, u32)>);

    impl ProcessTable for Script {
        fn lineage(&self, pid: u32) -> Option<(u32, u32)> {
            self.0.get(&pid).copied()
        }
    }

    #[test]
    fn the_daemon_owns_its_tree_and_its_groups_only() {
        // 100 the daemon; 200 a worker leading its group; 300 the sanitizer
        // the runner started; 301 the worker the sanitizer runs; 400 a
        // harness program's background child re-parented to init, still in
        // group 200; 500 a user's process; 600 a user's child of init in a
        // group of its own; 700 a loop in a broken table.
        let table = Script(BTreeMap::from([
            (100, (1, 100)),
            (200, (100, 200)),
            (300, (100, 100)),
            (301, (300, 100)),
            (400, (1, 200)),
            (500, (42, 500)),
            (42, (1, 42)),
            (600, (1, 600)),
            (700, (700, 700)),
        ]));
        let own = Own {
            daemon: 100,
            groups: BTreeSet::from([200]),
        };
        for (pid, expected) in [
            (100, true),
            (200, true),
            (300, true),
            (301, true),
            (400, true),
            (500, false),
            (600, false),
            (700, false),
            (9999, false),
        ] {
            assert_eq!(own.owns(pid, &table), expected, "pid {pid}");
        }
        // Once the group ended, its number is anybody's.
        let own = Own {
            daemon: 100,
            groups: BTreeSet::new(),
        };
        assert!(!own.owns(400, &table));
    }

    /// Starts `sh -c script` and reads the pid it prints.
    fn start(script: &str, group: bool) -> (std::process::Child, u32) {
        let mut command = Command::new("sh");
        command.args(["-c", script]).stdout(Stdio::piped());
        if group {
            command.process_group(0);
        }
        let mut child = command.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        (child, line.trim().parse().unwrap())
    }

    #[test]
    fn real_descendants_and_started_groups_are_own() {
        // A grandchild: sh -> sleep, as compute-sanitizer -> worker.
        let (mut child, grandchild) = start("sleep 30 & echo $!; wait", false);
        assert!(Own::now().owns(grandchild, &Proc));
        child.kill().unwrap();
        child.wait().unwrap();

        // A background process whose parent exited: re-parented away from
        // us, it stays in the group we started.
        let (mut leader, orphan) = start("(sleep 30 & echo $!) ; sleep 30", true);
        let (group, pgid) = (leader.id(), leader.id() as libc::pid_t);
        assert!(!Own::now().owns(1, &Proc), "init is nobody's");
        {
            let _guard = started_group(group);
            assert!(Own::now().owns(orphan, &Proc));
        }
        // SAFETY: kills the process group this test started.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
        leader.wait().unwrap();
    }

    #[test]
    fn names_are_escaped() {
        let me = std::process::id();
        assert!(describe(me).starts_with(&format!("pid {me} ")));
        assert_eq!(describe(u32::MAX), format!("pid {}", u32::MAX));
    }

    /// A group with a process running is not gone; once killed, it is, even
    /// where its orphaned child stays a zombie (no init here reaps it).
    #[test]
    fn a_killed_group_is_awaited_until_gone() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30"])
            .process_group(0)
            .spawn()
            .unwrap();
        let group = child.id();
        let short = std::time::Duration::from_millis(50);
        assert!(!await_group_gone(group, short), "the sleeps still run");
        let started = std::time::Instant::now();
        // SAFETY: SIGKILL to the group this test just started.
        unsafe { libc::kill(-(group as libc::pid_t), libc::SIGKILL) };
        child.wait().unwrap();
        assert!(await_group_gone(group, std::time::Duration::from_secs(5)));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
