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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

/// How far up a process tree the walk goes: deeper trees are not gevod's.
const MAX_DEPTH: usize = 64;

/// Where a process's parent and process group come from: /proc, or a
/// script in tests. `None` for a process that is gone.
pub trait ProcessTable {
    /// `(parent pid, process group id)`.
    fn lineage(&self, pid: u32) -> Option<(u32, u32)>;

    /// Whether `pid` has exited and waits to be reaped (a zombie): NVML may
    /// still list it, but it computes nothing.
    fn exited(&self, _pid: u32) -> bool {
        false
    }
}

/// The running system's table, from `/proc/<pid>/stat`.
pub struct Proc;

impl ProcessTable for Proc {
    fn lineage(&self, pid: u32) -> Option<(u32, u32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, parent, group) = stat_fields(&stat)?;
        Some((parent, group))
    }

    fn exited(&self, pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| Some(has_exited(stat_fields(&stat)?.0)))
            .unwrap_or(false)
    }
}

/// A `/proc` state of a process that has exited (zombie, dead).
fn has_exited(state: &str) -> bool {
    matches!(state, "Z" | "X")
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

/// The process groups this process started and that still run, each with
/// the guards that hold it (one is released while another holds on).
static STARTED_GROUPS: Mutex<BTreeMap<u32, usize>> = Mutex::new(BTreeMap::new());

/// Marks a started process group as gevod's for as long as it lives.
#[must_use = "the group counts as gevod's only while the guard lives"]
pub struct GroupGuard(u32);

/// Notes that this process started the group led by `pid`.
pub fn started_group(pid: u32) -> GroupGuard {
    *lock().entry(pid).or_default() += 1;
    GroupGuard(pid)
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let mut groups = lock();
        if let Some(holders) = groups.get_mut(&self.0) {
            *holders -= 1;
            if *holders == 0 {
                groups.remove(&self.0);
            }
        }
    }
}

/// Counts the process `pid` as gevod's while the guard lives, whatever
/// group it is in: a process about to be killed that has left the tree and
/// the groups the daemon started (the worker a killed safety gate ran may
/// lead a group of its own) until it is gone.
pub fn hold(pid: u32) -> GroupGuard {
    started_group(pid)
}

/// Waits, up to `limit`, until no process of the group `group`, nor any
/// of `pids`, is left running: a killed program tears down its GPU context
/// before it exits, and until then it must still count as gevod's (a
/// killed safety gate's worker, orphaned, stopped the daemon's own job for
/// 30 s). A zombie has exited (its context is gone) and counts as gone:
/// where no init reaps orphans, one may never leave. Answers whether all
/// are gone.
pub fn await_gone(group: u32, pids: &[u32], limit: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let runs = running()
            .iter()
            .any(|p| p.group == group || pids.contains(&p.pid));
        if !runs {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Keeps the group `group` and the processes `pids` gevod's, in a thread
/// of its own, until none of them runs (or `limit` passed): for a killed
/// run whose processes outlast the wait their killer can afford (a
/// sanitized worker tearing down a large GPU context took longer than 5 s,
/// and the daemon stopped its own job for it).
pub fn own_until_gone(group: u32, pids: Vec<u32>, limit: Duration) {
    let mut guards = vec![started_group(group)];
    guards.extend(pids.iter().map(|&p| hold(p)));
    std::thread::spawn(move || {
        await_gone(group, &pids, limit);
        drop(guards);
    });
}

/// Every process below `pid` now (its children, theirs, and so on), from
/// `/proc`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let table = running();
    let mut found = vec![pid];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        next += 1;
        found.extend(
            table
                .iter()
                .filter(|p| p.parent == parent && !found.contains(&p.pid))
                .map(|p| p.pid)
                .collect::<Vec<_>>(),
        );
    }
    found.split_off(1)
}

/// A process that has not exited (not a zombie), as `/proc` shows it.
struct Running {
    pid: u32,
    parent: u32,
    group: u32,
}

/// Every running process, from `/proc/<pid>/stat`.
fn running() -> Vec<Running> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (state, parent, group) = stat_fields(&stat)?;
            (!has_exited(state)).then_some(Running { pid, parent, group })
        })
        .collect()
}

fn lock() -> std::sync::MutexGuard<'static, BTreeMap<u32, usize>> {
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
            groups: lock().keys().copied().collect(),
        }
    }

    /// Whether `pid` is the daemon, one of its descendants, or in (or
    /// below a member of) a process group it started.
    pub fn owns(&self, pid: u32, table: &dyn ProcessTable) -> bool {
        for (p, lineage) in walk_up(pid, table) {
            if p == self.daemon || self.groups.contains(&p) {
                return true;
            }
            match lineage {
                Some((_, group)) if self.groups.contains(&group) => return true,
                Some(_) => {}
                None => return false,
            }
        }
        false
    }
}

/// `pid`'s ancestry as the walk in [`Own::owns`] sees it, for the log:
/// each process's pid, parent and group, and its name, up to init.
pub fn ancestry(pid: u32, table: &dyn ProcessTable) -> String {
    let steps: Vec<String> = walk_up(pid, table)
        .map(|(p, lineage)| match lineage {
            Some((parent, group)) => format!("{} parent {parent} group {group}", describe(p)),
            None => format!("{} (gone)", describe(p)),
        })
        .collect();
    steps.join(" <- ")
}

/// `pid` and its ancestors, each with its parent and group as `table`
/// gives them (`None`: gone, the last one); up to the child of init, to a
/// process its own parent (a broken table), or `MAX_DEPTH` processes.
fn walk_up(
    pid: u32,
    table: &dyn ProcessTable,
) -> impl Iterator<Item = (u32, Option<(u32, u32)>)> + '_ {
    let mut next = Some(pid);
    std::iter::from_fn(move || {
        let p = next.take()?;
        let lineage = table.lineage(p);
        if let Some((parent, _)) = lineage {
            next = (parent > 1 && parent != p).then_some(parent);
        }
        Some((p, lineage))
    })
    .take(MAX_DEPTH)
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

    /// Starts `sh -c script` leading a process group of its own; the
    /// group's id is the child's pid.
    fn start_group(script: &str) -> std::process::Child {
        Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .spawn()
            .unwrap()
    }

    /// SIGKILL to every process of the group `group`, which the test started.
    fn kill_group(group: u32) {
        // SAFETY: a plain signal to a process group this test started.
        unsafe { libc::kill(-(group as libc::pid_t), libc::SIGKILL) };
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
        let group = leader.id();
        assert!(!Own::now().owns(1, &Proc), "init is nobody's");
        {
            let _guard = started_group(group);
            assert!(Own::now().owns(orphan, &Proc));
        }
        kill_group(group);
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
        let mut child = start_group("sleep 30 & sleep 30");
        let group = child.id();
        let short = std::time::Duration::from_millis(50);
        assert!(!await_gone(group, &[], short), "the sleeps still run");
        let started = std::time::Instant::now();
        kill_group(group);
        child.wait().unwrap();
        assert!(await_gone(group, &[], std::time::Duration::from_secs(5)));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    /// A group whose leader exited is not gone while a member it left
    /// behind runs (a sanitizer that exits before the worker it ran).
    #[test]
    fn a_group_outlives_its_leader_while_a_member_runs() {
        let mut leader = start_group("sleep 30 & exit 0");
        let group = leader.id();
        leader.wait().unwrap();
        let short = std::time::Duration::from_millis(50);
        assert!(!await_gone(group, &[], short), "the sleep still runs");
        kill_group(group);
        assert!(await_gone(group, &[], std::time::Duration::from_secs(5)));
    }

    /// A child that left its parent's group (a session of its own) is found
    /// below the parent, held as the daemon's while it runs, and awaited
    /// by pid: killing the group alone leaves it running.
    #[test]
    fn a_descendant_in_a_group_of_its_own_is_found_held_and_awaited() {
        let mut child = start_group("setsid sleep 30 & wait");
        let group = child.id();
        let below = (0..200)
            .map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                descendants(group)
            })
            // The forked shell shows up a moment before its `setsid` runs.
            .find(|d| d.len() == 1 && Proc.lineage(d[0]).is_some_and(|(_, g)| g != group))
            .expect("the sleep starts in a session of its own");
        let sleep = below[0];
        let held = hold(sleep);
        let own = Own::now();
        assert!(own.owns(sleep, &Proc));
        kill_group(group);
        child.wait().unwrap();
        let short = std::time::Duration::from_millis(50);
        assert!(await_gone(group, &[], short), "the group itself is gone");
        assert!(!await_gone(group, &below, short), "the sleep still runs");
        // SAFETY: SIGKILL to the sleep this test started.
        unsafe { libc::kill(sleep as libc::pid_t, libc::SIGKILL) };
        assert!(await_gone(group, &below, std::time::Duration::from_secs(5)));
        drop(held);
        assert!(!Own::now().groups.contains(&sleep));
    }

    /// A group two guards hold stays gevod's until both are gone; one left
    /// to `own_until_gone` stays so while a process of it runs, and no
    /// longer once none does.
    #[test]
    fn a_group_left_running_stays_own_until_gone() {
        let mut child = start_group("sleep 30 & sleep 30");
        let group = child.id();
        let first = started_group(group);
        let second = started_group(group);
        drop(first);
        assert!(Own::now().groups.contains(&group), "the second still holds");
        own_until_gone(group, Vec::new(), Duration::from_secs(20));
        drop(second);
        std::thread::sleep(Duration::from_millis(100));
        assert!(Own::now().groups.contains(&group), "its processes run");
        kill_group(group);
        child.wait().unwrap();
        let released = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            !Own::now().groups.contains(&group)
        });
        assert!(released, "released once nothing of it runs");
    }
}
