//! Workers as Slurm job steps, on a real single-node cluster from Debian's
//! packages (scripts/slurm-cluster.sh): the simulator's search gives the
//! same result as with local workers, survives a step cancelled mid-run,
//! and leaves no job behind.

use crate::common;

use common::slurm::Cluster;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SEED: &str = "3";
const EVALUATIONS: &str = "1500";

fn evolve<'a>(command: &'a mut Command, state: &Path, slurm: bool) -> &'a mut Command {
    command
        .arg(env!("CARGO_BIN_EXE_gevod"))
        .arg("evolve")
        .arg(common::spec_fixture("stencil"))
        .args([
            "--backend",
            "sim",
            "--workers",
            "2",
            "--json",
            "--no-explain",
        ])
        .args(["--seed", SEED, "--evaluations", EVALUATIONS])
        .arg("--state")
        .arg(state)
        .env("GEVO_LIBDEVICE", common::libdevice_stub())
        .env("GEVOD_LOG", "warn");
    if slurm {
        command.arg("--slurm");
    }
    command
}

/// The result without what differs between equal runs: timing, respawns
/// and the state directory's name.
fn result(stdout: &[u8], state: &Path) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout).replace(&state.display().to_string(), "STATE");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("evolve --json");
    let o = v.as_object_mut().unwrap();
    for key in [
        "evaluations_per_second",
        "worker_respawns",
        "elapsed_seconds",
        "since_validated",
    ] {
        o.remove(key);
    }
    // When each generation ended is wall time; what it reached is not.
    for milestone in o["timeline"].as_array_mut().expect("a timeline") {
        milestone.as_object_mut().unwrap().remove("seconds");
    }
    v
}

#[test]
fn slurm_steps_match_local_workers_survive_scancel_and_clean_up() {
    let cluster = match Cluster::start(&common::repo_root()) {
        Ok(c) => c,
        Err(why) => {
            println!("skipped: a single-node Slurm cluster could not start: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();

    let local_state = dir.path().join("local");
    let local = evolve(&mut Command::new("env"), &local_state, false)
        .output()
        .unwrap();
    assert!(
        local.status.success(),
        "{}",
        String::from_utf8_lossy(&local.stderr)
    );
    let expected = result(&local.stdout, &local_state);

    // The same search with its workers as steps of an allocation.
    let steps_state = dir.path().join("steps");
    let mut salloc = cluster.command("salloc");
    salloc.args(["-n", "2", "--quiet"]);
    let out = evolve(&mut salloc, &steps_state, true).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(result(&out.stdout, &steps_state), expected);

    // Again, with one worker's step cancelled while the search runs.
    let cancel_state = dir.path().join("cancel");
    let mut salloc = cluster.command("salloc");
    salloc.args(["-n", "2", "--quiet"]);
    let child = evolve(&mut salloc, &cancel_state, true)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let step = loop {
        // The first steps are the workers' (`JOB.0`, `JOB.1`).
        if let Some(s) = cluster.steps().into_iter().find(|s| s.ends_with(".1")) {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no worker step appeared"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(500));
    let cancelled = cluster.run("scancel", &[&step]);
    assert!(cancelled.status.success(), "scancel {step}: {cancelled:?}");
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    println!("log of the run with {step} cancelled:\n{log}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        json["worker_respawns"].as_u64() >= Some(1),
        "the cancelled step was not replaced: {log}"
    );
    assert_eq!(result(&out.stdout, &cancel_state), expected, "{log}");

    // Nothing is left running: the allocations ended with their commands.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cluster.jobs().is_empty() {
        assert!(Instant::now() < deadline, "jobs left: {:?}", cluster.jobs());
        std::thread::sleep(Duration::from_millis(200));
    }
}
