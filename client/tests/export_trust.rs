//! The export as an attacker would use it, against the real `gevo-client`
//! with the daemon down: a kernel name that walks out of the state
//! directory (`../x`, `/abs/x`, `a/../../b`) is refused with the name
//! quoted before anything is read, and an export file or directory owned by
//! someone other than the state directory's owner (or root) is not used,
//! as if there were no export.

use gevo_client::export;
use gevo_client::proto::Reply;
use std::os::unix::fs::chown;
use std::path::Path;

mod common;

use common::*;

/// uid `nobody` on most systems: neither root nor the test's user.
const OTHER_UID: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn kernel_names_that_leave_the_export_are_refused_with_the_name_quoted() {
    let dir = scratch("bad-names");
    let state = dir.join("state");
    export::write(
        &state,
        &best("app/k", "sm_90", 1.5, PTX),
        export::Readers::Everyone,
    )
    .unwrap();
    // What the names below would reach: a planted export beside the state
    // directory, and one at an absolute path.
    let planted = ".entry attacker() { ret; }\n";
    let abs = dir.join("elsewhere/fake");
    std::fs::create_dir_all(&abs).unwrap();
    std::fs::write(abs.join("sm_90.ptx"), planted).unwrap();
    let record = best("app/k", "sm_90", 9.0, planted).record;
    std::fs::write(
        abs.join("sm_90.json"),
        serde_json::to_string(&record).unwrap(),
    )
    .unwrap();
    let missing = dir.join("missing.sock");
    let names = [
        ("../x", "it has a \"..\" component"),
        ("../../elsewhere/fake", "it has a \"..\" component"),
        ("a/../../b", "it has a \"..\" component"),
        (s(&abs), "it is an absolute path"),
        ("app//k", "it has an empty component"),
        ("app/k/../k", "it has a \"..\" component"),
    ];
    for (name, why) in names {
        let out = dir.join("k.ptx");
        for command in ["best", "report"] {
            let run = gevo(
                &dir,
                &[
                    "--socket",
                    s(&missing),
                    "--state",
                    s(&state),
                    command,
                    name,
                    "-o",
                    s(&out),
                ],
            );
            assert_eq!(run.code, 1, "{command} {name}: {}", run.stderr);
            assert!(
                run.stderr
                    .starts_with(&format!("gevo-client: bad kernel name {name:?}: {why} (")),
                "{command} {name}: {}",
                run.stderr
            );
            assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
            assert_eq!(run.stdout, "", "{command} {name}");
            assert!(!out.exists(), "{command} {name}: wrote {}", out.display());
        }
    }
    // Nor is a running daemon asked with such a name, for any command.
    let socket = dir.join("d.sock");
    let daemon = FakeDaemon::replying(&socket, vec![ok(Reply::Done("done".into()))]);
    for command in [
        "best", "patch", "pareto", "explain", "report", "jobs", "pause",
    ] {
        let run = gevo(&dir, &["--socket", s(&socket), command, "../x"]);
        assert_eq!(run.code, 1, "{command}: {}", run.stderr);
        assert!(
            run.stderr.contains("bad kernel name \"../x\""),
            "{command}: {}",
            run.stderr
        );
    }
    let run = gevo(
        &dir,
        &[
            "--socket",
            s(&socket),
            "best",
            "app/k",
            "--arch",
            "../sm_90",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("bad target \"../sm_90\""),
        "{}",
        run.stderr
    );
    assert!(daemon.received_nothing());
    // A good name still reads the export.
    let run = gevo(
        &dir,
        &[
            "--socket",
            s(&missing),
            "--state",
            s(&state),
            "best",
            "app/k",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, PTX);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Another user's file in the export (or a directory of it): `best` and
/// `report` go on as if there were no export (exit 2, saying why), and the
/// output is not written.
#[test]
fn an_export_owned_by_another_user_is_not_used() {
    if !is_root() {
        eprintln!("skipped: only root can give a file to uid {OTHER_UID}");
        return;
    }
    let dir = scratch("other-owner");
    let state = dir.join("state");
    export::write(
        &state,
        &best("app/k", "sm_90", 1.5, PTX),
        export::Readers::Everyone,
    )
    .unwrap();
    export::write_report(
        &state,
        "app/k",
        "<html>report</html>",
        export::Readers::Everyone,
    )
    .unwrap();
    let kernel = state.join("exports/app/k");
    let exports = state.join("exports");
    let missing = dir.join("missing.sock");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&state).unwrap());
    let give = |path: &Path, uid: u32| chown(path, Some(uid), None).unwrap();
    for (path, commands) in [
        (kernel.join("sm_90.ptx"), &["best"][..]),
        (kernel.join("sm_90.json"), &["best"][..]),
        (kernel.join("report.html"), &["report"][..]),
        (kernel.clone(), &["best", "report"][..]),
        (state.join("exports/app"), &["best", "report"][..]),
        (exports.clone(), &["best", "report"][..]),
    ] {
        give(&path, OTHER_UID);
        for command in commands {
            let out = dir.join("out");
            let run = gevo(
                &dir,
                &[
                    "--socket",
                    s(&missing),
                    "--state",
                    s(&state),
                    command,
                    "k",
                    "-o",
                    s(&out),
                ],
            );
            let what = format!("{command}, {} given away", path.display());
            assert_eq!(run.code, 2, "{what}: {}", run.stderr);
            let expect = format!(
                "gevo-client: cannot reach gevod at {}: no socket there; no exported variant of k in {} \
                 (not using {}: owned by uid {OTHER_UID}, not by the state directory's owner (uid {owner}) or root)\n",
                missing.display(),
                exports.display(),
                path.display(),
            );
            assert_eq!(run.stderr, expect, "{what}");
            assert_eq!(run.stdout, "", "{what}");
            assert!(!out.exists(), "{what}: wrote the output");
        }
        give(&path, owner);
    }
    // Given back, the export is used again; root's files are trusted too.
    let run = gevo(
        &dir,
        &["--socket", s(&missing), "--state", s(&state), "best", "k"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, PTX);
    std::fs::remove_dir_all(&dir).unwrap();
}
