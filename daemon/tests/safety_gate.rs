//! The GPU safety gate (`worker::sanitize`) with stand-in sanitizers
//! (tests/fixtures/fake/compute-sanitizer.sh, and scripts written here):
//! which report decides, the tools side by side and one after another
//! where they cannot run together, and a stop killing what runs.

use crate::common;
use gevo_search::evolve::Build;
use gevod::worker::background_gate::BackgroundGate;
use gevod::worker::sanitize::{GateError, SafetyGate};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A stand-in sanitizer: `body` (sh) runs with `$tool`, `$log` and `$ptx`
/// set from the gate's arguments.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    let text = format!(
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do\n  case $1 in\n    --tool) tool=$2; shift ;;\n    --log-file) log=$2; shift ;;\n    --ptx) ptx=$2; shift ;;\n  esac\n  shift\ndone\n{body}\n"
    );
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

fn gate(sanitizer: PathBuf) -> SafetyGate {
    SafetyGate::new(
        sanitizer,
        "gevod".into(),
        vec!["gpu-check".into()],
        "heldout[0]".into(),
        Duration::from_secs(60),
    )
}

/// The safety gate runs each tool with the variant's PTX and the
/// chosen test, and the first report rejects the variant with the tool's
/// first message (a stand-in sanitizer, tests/fixtures/fake/, reports a race
/// in PTX without a barrier).
#[test]
fn the_safety_gate_rejects_what_the_sanitizer_reports() {
    let fake = common::repo_root().join("tests/fixtures/fake/compute-sanitizer.sh");
    let mut gate = SafetyGate::new(
        fake,
        "gevod".into(),
        vec!["gpu-check".into()],
        "heldout[1]".into(),
        Duration::from_secs(30),
    );
    let ir = common::load("pairsum");
    let options = common::codegen_options();
    let original = ir.compile(&ir.empty_patch(), &options).unwrap().ptx;
    let mut racy = ir.empty_patch();
    racy.edits = serde_json::from_str(r#"[{"op":"delete","target":15}]"#).unwrap();
    let racy = ir.compile(&racy, &options).unwrap().ptx;
    assert_eq!(gate.check(&original), Ok(None));
    let reason = gate.check(&racy).unwrap().expect("rejected");
    assert_eq!(
        reason,
        "racecheck: Error: Race reported between Write access at pair_sum+0x90 in heldout[1]"
    );
    let line = gate.describe();
    assert!(
        line.contains("on heldout[1]: 2 checked, 1 rejected"),
        "{line}"
    );
    assert!(line.contains("memcheck, racecheck, synccheck"), "{line}");
}

/// A stop (another user's process on the GPU, a pause) kills a running
/// check and what it started, at once, and says so: the gate does not hold
/// the GPU until racecheck would have finished.
#[test]
fn a_stop_kills_a_running_safety_check_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    // A sanitizer that runs a long program (a child of its own) and waits.
    let marker = "31.4159";
    let slow = dir.path().join("slow-sanitizer.sh");
    std::fs::write(&slow, format!("#!/bin/sh\nsleep {marker} &\nwait\n")).unwrap();
    std::fs::set_permissions(&slow, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut gate = SafetyGate::new(
        slow,
        "gevod".into(),
        vec![],
        "heldout[0]".into(),
        Duration::from_secs(60),
    )
    .stopped_by(stop.clone());
    let stopper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        })
    };
    let started = std::time::Instant::now();
    assert_eq!(gate.check("// ptx"), Err(GateError::Interrupted));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    stopper.join().unwrap();
    assert_none_left(marker);
}

/// Neither a sanitizer nor the program it started (a command line with
/// `marker`) is left. SIGKILL is delivered asynchronously: the grandchild
/// may still be exiting for a moment on a loaded machine, so it gets a few
/// seconds to be gone.
fn assert_none_left(marker: &str) {
    let running = || -> Vec<String> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(marker))
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut left = running();
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = running();
    }
    assert!(left.is_empty(), "still running: {left:?}");
}

/// The gate beside the search: checks queued in its thread answer by PTX
/// hash, a variant queued twice is checked once, `check_now` waits for its
/// own verdict and leaves the others for `verdicts`.
#[test]
fn the_background_gate_answers_by_ptx_hash() {
    let fake = common::repo_root().join("tests/fixtures/fake/compute-sanitizer.sh");
    let mut gate = BackgroundGate::start(gate(fake)).unwrap();
    let ir = common::load("pairsum");
    let options = common::codegen_options();
    let build = |edits: &str| {
        let mut patch = ir.empty_patch();
        patch.edits = serde_json::from_str(edits).unwrap();
        let ptx = ir.compile(&patch, &options).unwrap().ptx;
        Build {
            ptx_hash: gevo_ir::content_hash(ptx.as_bytes()),
            ptx,
        }
    };
    let original = build("[]");
    let racy = build(r#"[{"op":"delete","target":15}]"#);
    gate.submit(&racy).unwrap();
    gate.submit(&racy).unwrap();
    let verdict = gate.check_now(&original).unwrap();
    assert_eq!(
        (verdict.ptx_hash, verdict.outcome),
        (original.ptx_hash, Ok(None))
    );
    let verdicts = gate.verdicts(true).unwrap();
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert_eq!(verdicts[0].ptx_hash, racy.ptx_hash);
    let reason = verdicts[0].outcome.clone().unwrap().expect("rejected");
    assert!(
        reason.starts_with("racecheck: Error: Race reported"),
        "{reason}"
    );
    assert!(gate.verdicts(true).unwrap().is_empty(), "nothing left");
    let line = gate.describe();
    assert!(line.contains("2 checked, 1 rejected"), "{line}");
}

/// At the end of a search the gate is focused on the best variant: the
/// check running for another is killed and answers nothing, those queued
/// are dropped, and the best one's verdict comes without waiting for them.
#[test]
fn a_focused_background_gate_answers_for_one_variant_only() {
    let dir = tempfile::tempdir().unwrap();
    let marker = "16.1803";
    // Slow for PTX that says so, quick for the rest.
    let sanitizer = script(
        dir.path(),
        "by-ptx.sh",
        &format!("grep -q slow \"$ptx\" && {{ sleep {marker} & wait; }}\nexit 0"),
    );
    let mut gate = BackgroundGate::start(gate(sanitizer)).unwrap();
    let build = |hash: &str, ptx: &str| Build {
        ptx_hash: hash.into(),
        ptx: ptx.into(),
    };
    gate.submit(&build("worse", "// slow")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    gate.submit(&build("queued", "// slow")).unwrap();
    gate.submit(&build("best", "// quick")).unwrap();
    gate.focus("best");
    let started = std::time::Instant::now();
    let verdicts = gate.verdicts(true).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let answered: Vec<_> = verdicts
        .iter()
        .map(|v| (v.ptx_hash.as_str(), &v.outcome))
        .collect();
    assert_eq!(answered, vec![("best", &Ok(None))]);
    assert!(
        gate.verdicts(true).unwrap().is_empty(),
        "nothing else pending"
    );
    assert_none_left(marker);
}

/// Dropping the gate (the search ended, or was interrupted) kills the
/// check it runs at once and drops those queued.
#[test]
fn a_dropped_background_gate_kills_its_running_check() {
    let dir = tempfile::tempdir().unwrap();
    let marker = "27.1828";
    let slow = script(dir.path(), "slow.sh", &format!("sleep {marker} &\nwait"));
    let mut gate = BackgroundGate::start(gate(slow)).unwrap();
    for i in 0..3 {
        let build = Build {
            ptx_hash: format!("h{i}"),
            ptx: "// ptx".into(),
        };
        gate.submit(&build).unwrap();
    }
    assert!(gate.verdicts(false).unwrap().is_empty());
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    drop(gate);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_none_left(marker);
}

/// The three tools run side by side: each stand-in notes its start, then
/// waits (up to 10 s) until all three have started before it ends; run one
/// after another, the first would end alone.
#[test]
fn the_tools_run_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    let body = format!(
        "echo \"start $tool\" >> {e}\nfor i in $(seq 100); do\n  [ \"$(grep -c start {e})\" -ge 3 ] && break\n  sleep 0.1\ndone\necho \"end $tool\" >> {e}\necho '========= ERROR SUMMARY: 0 errors' > \"$log\"",
        e = events.display()
    );
    let mut gate = gate(script(dir.path(), "together.sh", &body));
    assert_eq!(gate.check("// ptx"), Ok(None));
    let lines: Vec<String> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert!(
        lines[..3].iter().all(|l| l.starts_with("start")),
        "a tool ended before all had started: {lines:?}"
    );
}

/// The first tool in order decides: memcheck's report wins over
/// racecheck's, though racecheck reports first; a later tool's report
/// waits for the earlier ones to finish clean.
#[test]
fn the_first_tool_in_order_decides() {
    let dir = tempfile::tempdir().unwrap();
    let body = "case $tool in\n  memcheck) sleep 0.5; echo '========= Invalid __global__ read of size 4 bytes' > \"$log\"; exit 86 ;;\n  racecheck) echo '========= Error: Race reported' > \"$log\"; exit 86 ;;\n  *) echo '========= ERROR SUMMARY: 0 errors' > \"$log\" ;;\nesac";
    let mut both = gate(script(dir.path(), "both.sh", body));
    assert_eq!(
        both.check("// ptx"),
        Ok(Some(
            "memcheck: Invalid __global__ read of size 4 bytes".into()
        ))
    );
    let body = "case $tool in\n  memcheck) sleep 0.5; echo '========= ERROR SUMMARY: 0 errors' > \"$log\" ;;\n  racecheck) echo '========= Error: Race reported' > \"$log\"; exit 86 ;;\n  *) echo '========= ERROR SUMMARY: 0 errors' > \"$log\" ;;\nesac";
    let mut race = gate(script(dir.path(), "race.sh", body));
    assert_eq!(
        race.check("// ptx"),
        Ok(Some("racecheck: Error: Race reported".into()))
    );
    assert!(race.describe().contains("1 checked, 1 rejected"));
}

/// Tools that cannot run together (each refuses while another runs: a
/// lock directory with the holder's pid, taken over from a killed holder)
/// are run one after another, and the check still answers.
#[test]
fn tools_that_cannot_run_together_run_one_after_another() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock");
    let runs = dir.path().join("runs");
    let refused = dir.path().join("refused");
    let body = format!(
        "if mkdir {l} 2>/dev/null; then echo $$ > {l}/pid\nelse\n  p=$(cat {l}/pid 2>/dev/null)\n  if [ -z \"$p\" ] || kill -0 \"$p\" 2>/dev/null; then echo \"$tool\" >> {f}; echo 'the GPU is busy' >&2; exit 3; fi\n  echo $$ > {l}/pid\nfi\nsleep 0.3\necho \"$tool\" >> {r}\nrm -rf {l}\necho '========= ERROR SUMMARY: 0 errors' > \"$log\"",
        l = lock.display(),
        r = runs.display(),
        f = refused.display()
    );
    let mut gate = gate(script(dir.path(), "alone.sh", &body));
    assert_eq!(gate.check("// ptx"), Ok(None));
    assert!(
        refused.exists(),
        "no tool was refused: nothing ran side by side"
    );
    let ran = std::fs::read_to_string(&runs).unwrap();
    for tool in ["memcheck", "racecheck", "synccheck"] {
        assert!(ran.contains(tool), "{tool} did not run: {ran}");
    }
}

/// A check past its timeout is killed and says so, and is not run again
/// one tool at a time.
#[test]
fn a_check_past_its_timeout_is_killed_once() {
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let body = format!("echo \"$tool\" >> {}\nsleep 30", starts.display());
    let mut gate = SafetyGate::new(
        script(dir.path(), "stuck.sh", &body),
        "gevod".into(),
        vec![],
        "heldout[0]".into(),
        Duration::from_millis(500),
    );
    let started = std::time::Instant::now();
    assert_eq!(
        gate.check("// ptx"),
        Err(GateError::TimedOut(Duration::from_millis(500)))
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let count = std::fs::read_to_string(&starts).unwrap().lines().count();
    assert_eq!(count, 3, "each tool started once");
}
