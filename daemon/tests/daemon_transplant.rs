//! A rebuilt kernel keeps its progress: the daemon seeds the new version
//! from the previous one's patches, carried to the new IR, and serves a
//! variant validated on the new code, in its first generation.

use crate::common;

use common::daemon::Daemon;
use gevo_client::proto::{Command, Reply};

#[test]
fn a_changed_kernel_is_seeded_from_the_previous_version_and_validates_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (d, build) = Daemon::watching_stencil(dir.path());
    let v1 = d.wait_for("version 1's variant", |d| d.validated_best("stencil"));
    assert_eq!(v1["version"], 1);

    // The source changed (a constant): new IR, a new version.
    std::fs::copy(
        common::repo_root().join("tests/fixtures/transplant/stencil.constant.ll"),
        build.join("stencil.ll"),
    )
    .unwrap();
    // The export builds read when the daemon is down goes with version 1.
    let exported = d.state.join("exports/app/stencil");
    d.wait_for("version 1's export removed", |_| {
        (!exported.join("sm_90.json").exists()).then_some(())
    });
    let v2 = d.wait_for("version 2's own variant", |d| {
        d.validated_best("stencil").filter(|b| b["version"] == 2)
    });
    // Found in the first generation: a carried patch, validated on the new code.
    assert_eq!(v2["generation"], 0, "{v2}");
    let job = d
        .jobs()
        .into_iter()
        .find(|j| j.version == 2)
        .expect("version 2");
    let origin = job.origin.expect("version 2 says where it came from");
    assert_eq!(origin.version, 1);
    assert_eq!(origin.job, v1["job"].as_str().unwrap());
    assert!(origin.kept > 0, "{origin:?}");

    let status = d.client(&["status"]);
    let table = String::from_utf8_lossy(&status.stdout);
    assert!(table.contains("FROM") && table.contains("v1 ("), "{table}");
    let Reply::Explain(e) = d.call(Command::Explain {
        kernel: "stencil".into(),
    }) else {
        panic!("not an explanation")
    };
    assert_eq!(e.origin.as_ref().map(|o| o.version), Some(1));
    assert!(!e.transplanted.is_empty(), "{e:?}");
    let text = d.client(&["explain", "stencil"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("seeded from version 1") && text.contains("(from version 1)"),
        "{text}"
    );
}
