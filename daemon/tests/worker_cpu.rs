//! scripts/lib/worker_cpu.py, the sampler `scripts/gpu-side-by-side.sh`
//! compares two commits' compile-worker CPU with: it counts the compile
//! workers under the process it is given, and no others.

use crate::common;
use std::process::Command;

/// A short simulator search under a shell the sampler watches: its two
/// compile workers are counted, with the CPU they spent, which a search
/// that evaluated anything cannot have spent none of; a sampler watching
/// another process counts none of them.
#[test]
fn the_sampler_counts_the_compile_workers_under_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::spec_fixture("vecadd");
    let (inside, outside) = (
        dir.path().join("inside.json"),
        dir.path().join("outside.json"),
    );
    // `$$` is the shell's own pid; the second sampler watches the first,
    // which has no children.
    let script = r#"
        python3 scripts/lib/worker_cpu.py $$ "$INSIDE" & inside=$!
        python3 scripts/lib/worker_cpu.py $inside "$OUTSIDE" & outside=$!
        "$GEVOD" evolve "$SPEC" --time 3s --workers 2 --state "$STATE" > /dev/null 2>&1
        kill -TERM $inside $outside && wait $inside $outside
    "#;
    let status = Command::new("bash")
        .args(["-c", script])
        .current_dir(common::repo_root())
        .env("GEVOD", env!("CARGO_BIN_EXE_gevod"))
        .env("SPEC", &spec)
        .env("STATE", dir.path().join("state"))
        .env("INSIDE", &inside)
        .env("OUTSIDE", &outside)
        .status()
        .unwrap();
    assert!(status.success());
    let read = |path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let (inside, outside) = (read(&inside), read(&outside));
    assert_eq!(inside["workers"], 2, "{inside}");
    assert!(inside["compile_cpu_s"].as_f64().unwrap() > 0.0, "{inside}");
    assert_eq!(outside["workers"], 0, "{outside}");
}
