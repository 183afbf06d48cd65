//! The daemon's search yields the CPU (`[workers] cpu`, default `idle`):
//! its simulator workers run at SCHED_IDLE, and so does its explainer
//! thread (which starts no process); the daemon's other threads (API,
//! control, runners) do not.

use crate::common;

use common::daemon::{build_dir, Daemon, CONFIG};
use common::s;

/// A task's scheduling policy and nice value, and its parent, from its
/// /proc stat line (fields 41, 19 and 4; the name may hold spaces).
fn stat_of(path: &str) -> Option<(i64, i64, u32)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    let field = |n: usize| fields[n - 3].parse::<i64>().ok();
    Some((field(41)?, field(19)?, field(4)? as u32))
}

/// (pid, policy, nice) of each process whose parent is `parent` and that
/// has exec'd its own program. A child between fork and exec still runs
/// the daemon's image at the daemon's priority (its priority is set just
/// before exec), so it is not a worker yet: its command line is still the
/// daemon's.
fn children(parent: u32) -> Vec<(u32, i64, i64)> {
    let cmdline = |pid: u32| std::fs::read(format!("/proc/{pid}/cmdline")).ok();
    let parents = cmdline(parent);
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            // The command line first: a stat read after it is post-exec.
            let execd = cmdline(pid).is_some_and(|own| Some(own) != parents);
            let (policy, nice, ppid) = stat_of(&format!("/proc/{pid}/stat"))?;
            (ppid == parent && execd).then_some((pid, policy, nice))
        })
        .collect()
}

/// The daemon's threads: the explainer's (policy, nice), and the other
/// threads' policies.
fn thread_policies(pid: u32) -> (Option<(i64, i64)>, Vec<i64>) {
    let mut explainer = None;
    let mut others = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = format!(
            "/proc/{pid}/task/{}/stat",
            e.unwrap().file_name().to_str().unwrap()
        );
        let Some((policy, nice, _)) = stat_of(&path) else {
            continue; // the thread ended
        };
        match std::fs::read_to_string(&path)
            .unwrap_or_default()
            .contains("(explainer)")
        {
            true => explainer = Some((policy, nice)),
            false => others.push(policy),
        }
    }
    (explainer, others)
}

type Threads = (Option<(i64, i64)>, Vec<i64>);

fn workers_and_threads(config: &str, cpu: Option<&str>) -> (Vec<(u32, i64, i64)>, Threads) {
    let dir = tempfile::tempdir().unwrap();
    let config = match cpu {
        Some(cpu) => config.replace("cpu = \"normal\"", &format!("cpu = \"{cpu}\"")),
        None => config.replace("cpu = \"normal\"\n", ""),
    };
    std::fs::write(dir.path().join("gevod.toml"), config).unwrap();
    build_dir(dir.path(), "app");
    let d = Daemon::start(dir.path(), &["--watch", s(&dir.path().join("app"))]);
    let pid = d.child.as_ref().unwrap().id();
    let workers = d.wait_for("the job's worker", |_| {
        let found = children(pid);
        (!found.is_empty()).then_some(found)
    });
    (workers, thread_policies(pid))
}

const SCHED_IDLE: i64 = 5;

#[test]
fn by_default_the_search_runs_on_idle_cpu_time_only() {
    let (workers, (explainer, threads)) = workers_and_threads(CONFIG, None);
    for (pid, policy, _) in &workers {
        assert_eq!(*policy, SCHED_IDLE, "worker {pid} is not at SCHED_IDLE");
    }
    assert!(
        !threads.contains(&SCHED_IDLE),
        "the daemon's threads must not wait for idle time: {threads:?}"
    );
    let (policy, _) = explainer.expect("an explainer thread");
    assert_eq!(policy, SCHED_IDLE, "the explainer is not at SCHED_IDLE");
}

#[test]
fn low_is_nice_19_and_normal_changes_nothing() {
    let (workers, (explainer, _)) = workers_and_threads(CONFIG, Some("low"));
    assert!(
        workers
            .iter()
            .all(|(_, p, nice)| *p != SCHED_IDLE && *nice == 19),
        "{workers:?}"
    );
    let (policy, nice) = explainer.expect("an explainer thread");
    assert!(policy != SCHED_IDLE && nice == 19, "{explainer:?}");
    let (workers, (explainer, threads)) = workers_and_threads(CONFIG, Some("normal"));
    let (_, own_nice, _) = stat_of("/proc/self/stat").unwrap();
    assert!(
        workers
            .iter()
            .all(|(_, p, nice)| *p != SCHED_IDLE && *nice == own_nice),
        "{workers:?}"
    );
    assert!(!threads.contains(&SCHED_IDLE), "{threads:?}");
    let (policy, nice) = explainer.expect("an explainer thread");
    assert!(policy != SCHED_IDLE && nice == own_nice, "{explainer:?}");
}
