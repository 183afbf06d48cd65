//! A job whose search stopped finding gives slot time to one that still
//! finds (docs/daemon.md, "Scheduling and idle GPUs"): two harness jobs on
//! one simulator slot, one whose every variant costs the same (it finds
//! nothing after its first generation) and one whose cost is its PTX's size
//! (deleting code keeps finding, every generation or two, for dozens of
//! generations). `jobs` says whose share is reduced and why, and a
//! restarted daemon weighs the jobs as before.

use crate::common;

use common::daemon::{s, Daemon, CONFIG};
use gevo_client::proto::{Command, JobInfo, JobState, Reply};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Shares follow finds alone (no boost for finding): a job that found
/// nothing for 3 generations gets half a plain job's time, for 6 a
/// quarter (the floor).
fn config() -> String {
    CONFIG.replace(
        "slice = \"1s\"",
        "slice = \"1s\"\nimproved_weight = 1.0\nrecent_generations = 2\nstalled_generations = 3\nstalled_floor = 0.25",
    ) + "[jobs]\nexplain_edits = false\n"
}

/// A harness job `<project>/<project>` in `apps/<project>`, its script
/// printing `cost` as the kernel's cost and the output every variant
/// agrees on.
fn harness_job(dir: &Path, project: &str, cost: &str) {
    let build = dir.join("apps").join(project);
    std::fs::create_dir_all(&build).unwrap();
    let ir = build.join("stencil.ll");
    std::fs::copy(common::kernel_fixture("stencil"), &ir).unwrap();
    let script = format!("printf 'AAAA' > \"$1/r.bin\"\necho GEVO_KERNEL_COST={cost}\n");
    std::fs::write(build.join(format!("{project}.sh")), script).unwrap();
    let command = format!(r#"["/bin/sh", "{project}.sh", "{{out}}", "{{ptx}}"]"#);
    let spec = format!(
        "project = \"{project}\"\n{}",
        common::harness_spec_text(&ir, &command)
    );
    std::fs::write(build.join(format!("{project}.gevo.toml")), spec).unwrap();
}

fn find<'a>(jobs: &'a [JobInfo], kernel: &str) -> Option<&'a JobInfo> {
    jobs.iter().find(|j| j.kernel == kernel)
}

/// Both jobs' lines, once both are there.
fn both(jobs: &[JobInfo]) -> Option<(&JobInfo, &JobInfo)> {
    Some((find(jobs, "flat/flat")?, find(jobs, "finds/finds")?))
}

#[test]
fn a_job_that_stopped_finding_gives_slot_time_to_one_that_finds() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // Under root the harness runs as nobody, who must reach the scripts.
    std::fs::set_permissions(dir, PermissionsExt::from_mode(0o755)).unwrap();
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::write(dir.join("gevod.toml"), config()).unwrap();
    harness_job(dir, "flat", "1000");
    harness_job(dir, "finds", "$(wc -c < \"$2\")");
    let apps = dir.join("apps");
    let watch = ["--watch", s(&apps)];
    let env = [("TMPDIR", s(&tmp))];
    let mut d = Daemon::start_with_env(dir, &watch, &env);

    // The flat job found its best in generation 0 and nothing since: after
    // 6 more its share is at the floor.
    let (flat, finds) = d.wait_for("the flat job's share at the floor", |d| {
        let jobs = d.jobs();
        let (flat, finds) = both(&jobs)?;
        let reduced = flat.reduced_share.as_ref()?;
        (reduced.weight == 0.25).then(|| (flat.clone(), finds.clone()))
    });
    let reduced = flat.reduced_share.clone().unwrap();
    assert_eq!(reduced.last_found, Some(0), "{reduced:?}");
    assert!(reduced.generations_without >= 6, "{reduced:?}");
    assert_eq!(reduced.generations_without, flat.generations);
    // From here the finding job runs about four times as long as the flat
    // one. When written: the flat job ran 3 generations to the finding
    // one's 12, and 11 with the rule off (stalled_floor = 1).
    let (later_flat, later_finds) = d.wait_for("12 more generations of the finding job", |d| {
        let jobs = d.jobs();
        let (f, g) = both(&jobs)?;
        (g.generations >= finds.generations + 12).then(|| (f.clone(), g.clone()))
    });
    let flat_gained = later_flat.generations - flat.generations;
    let finds_gained = later_finds.generations - finds.generations;
    assert!(
        flat_gained <= 6,
        "the flat job ran {flat_gained} generations while the finding one ran {finds_gained}"
    );
    let table = String::from_utf8_lossy(&d.client(&["jobs"]).stdout).to_string();
    assert!(
        table.contains("SHARE") && table.contains("1/4 (found nothing in"),
        "{table}"
    );

    // Paused and restarted, the jobs' shares are what they were: they
    // follow from the committed generations.
    d.call(Command::Pause { kernel: None });
    let before = d.wait_for("both jobs paused and off the slot", |d| {
        let Reply::Status(status) = d.call(Command::Status) else {
            return None;
        };
        let idle = status.slots.iter().all(|s| !s.state.starts_with("running"));
        let paused = status.jobs.iter().all(|j| j.state == JobState::Paused);
        (idle && paused).then_some(status.jobs)
    });
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{status}");
    d.spawn_with_env(&watch, &env);
    let after = d.wait_for("both jobs back, paused", |d| {
        let jobs = d.jobs();
        let back = both(&jobs).is_some() && jobs.iter().all(|j| j.state == JobState::Paused);
        back.then_some(jobs)
    });
    for kernel in ["flat/flat", "finds/finds"] {
        let (was, is) = (
            find(&before, kernel).unwrap(),
            find(&after, kernel).unwrap(),
        );
        assert_eq!(
            (is.generations, &is.reduced_share),
            (was.generations, &was.reduced_share),
            "{kernel}"
        );
    }
    assert!(find(&after, "flat/flat").unwrap().reduced_share.is_some());
}
