//! `best` and the daemon's record beside its socket (`<socket>.json`,
//! gevo_client::record): with no daemon answering and no export in the
//! default state directories, the export of the state directory the record
//! names is used and said to come from there; `--state` replaces the
//! records; a record nobody trusted wrote is not used; and when nothing is
//! found the error names every state directory and record looked at.

use gevo_client::export;
use gevo_client::record;
use std::path::Path;

mod common;

use common::*;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// An export of app/stencil for sm_90 in `state`.
fn export_in(state: &Path) {
    let exported = best("app/stencil", "sm_90", 1.5, PTX);
    export::write(state, &exported, export::Readers::Everyone).unwrap();
}

#[test]
fn best_reads_the_export_the_record_beside_a_named_socket_names() {
    let dir = scratch("record-named");
    let socket = dir.join("d.sock");
    let state = dir.join("daemon-state");
    export_in(&state);
    let args = ["--socket", s(&socket), "best", "stencil", "--arch", "sm_90"];

    // No record: the default state directory, then the record looked for.
    let run = gevo(&dir, &args);
    assert_eq!(run.code, 2, "{}", run.stderr);
    // The client's own mode's state directory (root's is the system one).
    let default_exports = if is_root() {
        std::path::PathBuf::from("/var/lib/gevod/exports")
    } else {
        dir.join("xdg-state/gevo/exports")
    };
    let record_path = dir.join("d.sock.json");
    assert!(
        run.stderr.contains(&format!(
            "no exported variant of stencil in {}; no daemon record at {}",
            default_exports.display(),
            record_path.display()
        )),
        "{}",
        run.stderr
    );

    // The daemon's record names its state directory: its export is used.
    assert_eq!(record::write(&socket, &state).unwrap(), record_path);
    let run = gevo(&dir, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, PTX);
    assert!(
        run.stderr.contains(&format!(
            "(from the export in {} (the state directory {} names), daemon unreachable: no \
             socket there)",
            state.canonicalize().unwrap().display(),
            record_path.display()
        )),
        "{}",
        run.stderr
    );

    // --state names the directory: no record is read.
    let elsewhere = dir.join("elsewhere");
    let run = gevo(&dir, &[&["--state", s(&elsewhere)][..], &args[..]].concat());
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        !run.stderr.contains("daemon record") && !run.stderr.contains(" names)"),
        "{}",
        run.stderr
    );

    // A record that names a directory without the export: every place said.
    let empty = dir.join("empty-state");
    std::fs::create_dir(&empty).unwrap();
    record::write(&socket, &empty).unwrap();
    let run = gevo(&dir, &args);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "no exported variant of stencil in {}; no exported variant of stencil in {} (the \
             state directory {} names)",
            default_exports.display(),
            empty.canonicalize().unwrap().join("exports").display(),
            record_path.display()
        )),
        "{}",
        run.stderr
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_record_anyone_could_have_written_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("record-untrusted");
    let socket = dir.join("d.sock");
    let state = dir.join("daemon-state");
    export_in(&state);
    let path = record::write(&socket, &state).unwrap();
    let args = ["--socket", s(&socket), "best", "stencil"];
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let run = gevo(&dir, &args);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "not using the daemon record {}: writable by everyone (mode 0666)",
            path.display()
        )),
        "{}",
        run.stderr
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(gevo(&dir, &args).code, 0);

    // A state directory its writer does not own (root only can make one).
    if is_root() {
        std::os::unix::fs::chown(&state, Some(4242), None).unwrap();
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("owned by uid 4242, not by the record's writer (uid 0) or root"),
            "{}",
            run.stderr
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Without a named socket the client tries its user daemon's default
/// socket: the record beside it is found with no flag at all.
#[test]
fn best_without_flags_finds_the_record_beside_the_user_daemons_socket() {
    if is_root() {
        println!("skipped: root's only place is the system daemon's socket");
        return;
    }
    let dir = scratch("record-default");
    // The user daemon's default socket in this environment (common's
    // XDG_RUNTIME_DIR).
    let socket = dir.join("run/gevo/gevod.sock");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let state = dir.join("srv-state");
    export_in(&state);
    record::write(&socket, &state).unwrap();
    let run = gevo(&dir, &["best", "app/stencil"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, PTX);
    assert!(
        run.stderr.contains(&format!(
            "(the state directory {} names)",
            dir.join("run/gevo/gevod.sock.json").display()
        )),
        "{}",
        run.stderr
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
