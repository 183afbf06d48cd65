//! A spec with `[tune]` in the daemon (docs/daemon.md, "Tunable
//! constants"): the first version runs the source's configuration until a
//! runner sweeps them; the fastest becomes the kernel's next version, whose
//! answers carry the configuration and the spec file's own hash, as builds
//! compare it; its report shows the sweep.

use crate::common;

use common::daemon::{s, Daemon};
use gevo_client::export::sha256_hex;

/// `dir/app/build` with the tunable fixture and its configurations' IR.
fn tuned_build(dir: &std::path::Path) -> std::path::PathBuf {
    let build = dir.join("app/build");
    common::copy_blockscale(&build);
    build
}

#[test]
fn the_swept_configuration_becomes_the_served_version() {
    let dir = tempfile::tempdir().unwrap();
    let build = tuned_build(dir.path());
    let d = Daemon::start(dir.path(), &["--watch", s(&dir.path().join("app"))]);
    let best = d.wait_for("a variant of the chosen configuration", |d| {
        d.validated_best("blockscale").filter(|b| b["version"] == 2)
    });
    // The simulator's sweep of the fixture: 4 items a thread cost least.
    assert_eq!(
        best["configuration"],
        serde_json::json!({"BLOCK": 32, "ITEMS": 4}),
        "{best}"
    );
    let file = std::fs::read(build.join("blockscale.gevo.toml")).unwrap();
    assert_eq!(best["spec_hash"], sha256_hex(&file), "{best}");

    let jobs = d.jobs();
    let first = jobs.iter().find(|j| j.version == 1).expect("version 1");
    assert_eq!(
        first.state,
        gevo_client::proto::JobState::Superseded,
        "{first:?}"
    );
    // The job view says which configuration each version runs.
    let second = jobs.iter().find(|j| j.version == 2).expect("version 2");
    assert_eq!(second.configuration.as_deref(), Some("BLOCK=32 ITEMS=4"));
    assert_eq!(first.configuration, None, "{first:?}");
    let view = d.client(&["jobs", "blockscale"]);
    assert!(
        String::from_utf8_lossy(&view.stdout)
            .contains("launch configuration: BLOCK=32 ITEMS=4 (the fastest its sweep measured)"),
        "{view:?}"
    );
    let log = d.log_text();
    assert!(log.contains("configurations swept"), "{log}");

    // A build asking with its spec copy's hash is answered.
    let hash = sha256_hex(&file);
    let spec = build.join("blockscale.gevo.toml");
    let out = d.client(&["--json", "best", "blockscale", "--spec", s(&spec)]);
    assert!(out.status.success(), "{out:?}");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["spec_hash"], hash);
    assert_eq!(answer["configuration"]["ITEMS"], 4);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("built with BLOCK=32 ITEMS=4"), "{said}");

    // The export builds read while the daemon is down holds it too.
    let export = d.state.join("exports/app/blockscale/sm_90.json");
    let exported: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&export).unwrap()).unwrap();
    assert_eq!(
        exported["configuration"], best["configuration"],
        "{exported}"
    );
    // The report of the served version shows the sweep that chose it.
    let page = dir.path().join("report.html");
    let out = d.client(&["report", "blockscale", "-o", s(&page)]);
    assert!(out.status.success(), "{out:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    let chosen = "<tr class=\"chosen\"><td><code>BLOCK=32 ITEMS=4</code></td><td>measured</td>";
    assert!(html.contains(chosen), "{html}");
    assert!(html.contains("<figure id=\"plot-launch\">\n<svg"), "{html}");
}
