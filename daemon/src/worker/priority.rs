//! The CPU priority of the daemon's search (`[workers] cpu`): its compile
//! and simulator workers yield the CPU to everything else the way its GPU
//! gate yields the GPU. A worker's priority is set in the child between
//! fork and exec, so that it holds before the worker computes anything; the
//! children it starts (a harness program) inherit it. The daemon's own
//! threads are left alone: a thread at SCHED_IDLE could not give its
//! children (GPU workers) the ordinary priority back without privilege.
//! The one exception starts no child: the explainer thread, which runs the
//! simulator in the daemon's process (`lower_this_thread`).

use crate::config::CpuPriority;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The nice value of [`CpuPriority::Low`]: the lowest there is.
const LOWEST_NICE: libc::c_int = 19;

/// Makes `command`'s process start at `priority`.
pub fn lower_in_child(command: &mut Command, priority: CpuPriority) {
    if priority == CpuPriority::Normal {
        return;
    }
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: it makes one system call
    // (sched_setscheduler or setpriority) on plain values and allocates
    // nothing.
    unsafe {
        command.pre_exec(move || set(0, priority));
    }
}

/// Puts the calling thread (only it, and threads it starts later) at
/// `priority`, for good: a thread that starts no child process.
pub fn lower_this_thread(priority: CpuPriority) -> std::io::Result<()> {
    // On Linux both calls take 0 as the calling thread, not the process.
    set(0, priority)
}

/// `who`: a process id, or 0 for the caller.
fn set(who: libc::pid_t, priority: CpuPriority) -> std::io::Result<()> {
    let result = match priority {
        CpuPriority::Normal => 0,
        CpuPriority::Idle => {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: `param` is a valid sched_param that outlives the call;
            // lowering one's own policy to SCHED_IDLE needs no privilege.
            unsafe { libc::sched_setscheduler(who, libc::SCHED_IDLE, &param) }
        }
        // SAFETY: plain integer arguments; raising one's own nice value
        // needs no privilege.
        CpuPriority::Low => unsafe {
            libc::setpriority(libc::PRIO_PROCESS, who as libc::id_t, LOWEST_NICE)
        },
    };
    match result {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task's scheduling policy and nice value, from its /proc stat line
    /// (fields 41 and 19; the command name in parentheses may hold spaces).
    fn policy_and_nice(stat: &str) -> (i64, i64) {
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .collect();
        // fields[0] is field 3 (state).
        (
            fields[41 - 3].parse().unwrap(),
            fields[19 - 3].parse().unwrap(),
        )
    }

    fn of_child(priority: CpuPriority) -> (i64, i64) {
        let mut command = Command::new("sleep");
        command.arg("5");
        lower_in_child(&mut command, priority);
        let mut child = command.spawn().unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        policy_and_nice(&stat)
    }

    /// A thread lowered on its own: it runs at the priority asked for, the
    /// thread that started it does not.
    #[test]
    fn a_thread_lowers_itself_alone() {
        let this = || std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let before = policy_and_nice(&this());
        for (priority, expected) in [
            (CpuPriority::Low, (before.0, LOWEST_NICE as i64)),
            (CpuPriority::Idle, (libc::SCHED_IDLE as i64, before.1)),
        ] {
            let lowered = std::thread::spawn(move || {
                lower_this_thread(priority).unwrap();
                policy_and_nice(&this())
            })
            .join()
            .unwrap();
            assert_eq!(lowered, expected, "{priority:?}");
        }
        assert_eq!(policy_and_nice(&this()), before);
    }

    #[test]
    fn a_child_starts_at_the_priority_asked_for() {
        let normal = of_child(CpuPriority::Normal);
        assert_eq!(
            of_child(CpuPriority::Idle),
            (libc::SCHED_IDLE as i64, normal.1)
        );
        assert_eq!(of_child(CpuPriority::Low), (normal.0, LOWEST_NICE as i64));
        assert_ne!(
            normal.0,
            libc::SCHED_IDLE as i64,
            "this test runs at SCHED_IDLE"
        );
    }
}
