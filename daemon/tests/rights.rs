//! Rights follow the requester (docs/daemon.md, "Who may do what"): a
//! client with the socket may watch only a directory it may list, a root it
//! added adopts only its own specs, a spec's files are opened with its
//! owner's rights (wherever they lie: a watch root grants nothing), and a
//! job is paused by its spec's owner, the daemon by its user or root. Run
//! against the real binaries, the clients as other uids: root only.

use crate::common;

use common::daemon::{client_binary, s, Daemon, CONFIG};
use gevo_client::proto::{Command as Request, JobInfo, JobState};
use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The attacker: nobody, given the socket.
const A: u32 = 65534;
/// Another user with the socket (no entry in the user database needed).
const B: u32 = 4242;
/// The first line of a private file, as /etc/shadow's would be.
const SECRET: &str = "root:TOPSECRET-RIGHTS:20228:0:99999:7:::";

fn root_or_skip() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        println!("skipped: running clients and owning files as other uids needs root");
    }
    root
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, PermissionsExt::from_mode(mode)).unwrap();
}

/// A directory `path` owned by `uid` with `mode`.
fn dir_of(path: &Path, uid: u32, mode: u32) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    chown(path, Some(uid), Some(uid)).unwrap();
    chmod(path, mode);
    path.to_path_buf()
}

/// `text` written to `path`, owned by `uid` with `mode`.
fn file_of(path: &Path, text: &str, uid: u32, mode: u32) {
    std::fs::write(path, text).unwrap();
    chown(path, Some(uid), Some(uid)).unwrap();
    chmod(path, mode);
}

/// The stencil spec as `project`, naming `ir`, its input filled from
/// `fill` when given. Its tolerance differs by `ir` and `project`, so that
/// no two of these jobs share one search (each runs, and pauses, alone).
fn spec(project: &str, ir: &str, fill: Option<&str>) -> String {
    let text = std::fs::read_to_string(common::spec_fixture("stencil")).unwrap();
    let salt = gevo_ir::content_hash(format!("{project}\n{ir}").as_bytes());
    let salt = u32::from_str_radix(&salt[..4], 16).unwrap();
    let text = common::without_lines(&text, "project")
        .replace(
            "ir = \"stencil.ll\"",
            &format!("project = \"{project}\"\nir = \"{ir}\""),
        )
        .replace("tolerance = 1e-5", &format!("tolerance = 1.{salt:05}e-5"));
    match fill {
        Some(file) => text.replace(
            "fill = { uniform = [-1.0, 1.0] }",
            &format!("fill = {{ file = \"{file}\" }}"),
        ),
        None => text,
    }
}

fn stencil_ir() -> String {
    std::fs::read_to_string(common::kernel_fixture("stencil")).unwrap()
}

/// A daemon in `dir` whose socket the users A and B may use (as a member
/// of its group may), with gevo-client copied where they can run it.
fn daemon(dir: &Path, args: &[&str]) -> (Daemon, PathBuf) {
    std::fs::write(
        dir.join("gevod.toml"),
        format!("{CONFIG}\n[api]\nallowed_uids = [{A}, {B}]\n"),
    )
    .unwrap();
    let d = Daemon::start(dir, args);
    chmod(&d.socket, 0o666);
    let client = dir.join("gevo-client");
    std::fs::copy(client_binary(), &client).unwrap();
    chmod(&client, 0o755);
    (d, client)
}

/// gevo-client `args` run as `uid`.
fn as_user(d: &Daemon, client: &Path, uid: u32, args: &[&str]) -> Output {
    Command::new(client)
        .args(["--socket", s(&d.socket), "--state", s(&d.state)])
        .args(args)
        .env("HOME", "/")
        .current_dir("/")
        .uid(uid)
        .gid(uid)
        .output()
        .unwrap()
}

/// Its output and errors, in one text.
fn said(out: &Output) -> String {
    common::text(&out.stdout) + &common::text(&out.stderr)
}

/// The state of `kernel`'s job.
fn state(d: &Daemon, kernel: &str) -> Option<JobState> {
    job(&d.jobs(), kernel).map(|j| j.state)
}

fn job<'a>(jobs: &'a [JobInfo], kernel: &str) -> Option<&'a JobInfo> {
    jobs.iter().find(|j| j.kernel == kernel)
}

/// The entry of the spec file `name` (a spec that names a file it may not
/// read does not parse, so its kernel is named after the root).
fn of_spec<'a>(jobs: &'a [JobInfo], name: &str) -> Option<&'a JobInfo> {
    jobs.iter().find(|j| j.spec.ends_with(name))
}

fn message(jobs: &[JobInfo], spec: &str) -> String {
    of_spec(jobs, spec)
        .and_then(|j| j.message.clone())
        .unwrap_or_default()
}

/// What every reader sees: `jobs` and `status` as A and as root (plain and
/// JSON) and the daemon's log.
fn everything_shown(d: &Daemon, client: &Path) -> String {
    let mut seen = d.log_text();
    for args in [
        &["jobs"][..],
        &["status"],
        &["--json", "jobs"],
        &["--json", "status"],
    ] {
        seen += &said(&as_user(d, client, A, args));
        seen += &said(&d.client(args));
    }
    seen
}

/// (a), (c), (d), (e), (f) and unwatch: one daemon, a root the attacker
/// added, another user's root beside it.
#[test]
fn a_clients_root_adopts_only_its_specs_read_with_its_rights() {
    if !root_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    chmod(dir, 0o755);
    // Root's secrets: one in a private directory, one private in an open one.
    let vault = dir_of(&dir.join("vault"), 0, 0o700);
    file_of(&vault.join("shadow"), &format!("{SECRET}\n"), 0, 0o600);
    file_of(&dir.join("private.ll"), &format!("{SECRET}\n"), 0, 0o600);
    // A world-readable file root owns (a toolkit's libdevice, say).
    let system = dir_of(&dir.join("system"), 0, 0o755);
    file_of(&system.join("kernel.ll"), &stencil_ir(), 0, 0o644);
    // The attacker's build directory.
    let evil = dir_of(&dir.join("evil"), A, 0o755);
    file_of(&evil.join("stencil.ll"), &stencil_ir(), A, 0o644);
    let shadow = s(&vault.join("shadow")).to_string();
    let private = s(&dir.join("private.ll")).to_string();
    let system_ir = s(&system.join("kernel.ll")).to_string();
    for (name, ir) in [
        ("shadow", shadow.as_str()),
        ("private", private.as_str()),
        ("own", "stencil.ll"),
        ("system", system_ir.as_str()),
    ] {
        let path = evil.join(format!("{name}.gevo.toml"));
        file_of(&path, &spec("evil", ir, None), A, 0o644);
    }
    // B's spec under A's root, and B's own build directory.
    file_of(
        &evil.join("stray.gevo.toml"),
        &spec("stray", &private, None),
        B,
        0o644,
    );
    let theirs = dir_of(&dir.join("theirs"), B, 0o755);
    file_of(&theirs.join("stencil.ll"), &stencil_ir(), B, 0o644);
    file_of(
        &theirs.join("b.gevo.toml"),
        &spec("theirs", "stencil.ll", None),
        B,
        0o644,
    );
    let (mut d, client) = daemon(dir, &[]);

    // (c) A directory the client may not list is refused.
    let out = as_user(&d, &client, A, &["watch", s(&vault)]);
    assert!(!out.status.success(), "{out:?}");
    assert!(said(&out).contains("refused"), "{}", said(&out));
    assert!(
        said(&out).contains("uid 65534 may not list it"),
        "{}",
        said(&out)
    );
    // The attacker watches the whole tree (as `watch /` would).
    let out = as_user(&d, &client, A, &["watch", s(dir)]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("the specs of uid 65534 only"),
        "{}",
        said(&out)
    );
    let out = as_user(&d, &client, B, &["watch", s(&theirs)]);
    assert!(out.status.success(), "{}", said(&out));

    // (a) Refused, never a byte of the secret; (f) the legitimate ones run.
    let jobs = d.wait_for("the refusals and the legitimate jobs running", |d| {
        let jobs = d.jobs();
        let refused = ["shadow.gevo.toml", "private.gevo.toml"]
            .iter()
            .all(|k| of_spec(&jobs, k).is_some_and(|j| j.state == JobState::Error));
        let running = ["evil/own", "evil/system", "theirs/b"]
            .iter()
            .all(|k| job(&jobs, k).is_some_and(|j| j.generations > 0));
        (refused && running).then_some(jobs)
    });
    let shadow_message = message(&jobs, "shadow.gevo.toml");
    assert!(
        shadow_message
            .contains("refused: the spec's owner (uid 65534) may not search its directory")
            && shadow_message.contains("/vault"),
        "{shadow_message}"
    );
    let private_message = message(&jobs, "private.gevo.toml");
    assert!(
        private_message.contains("refused: the spec's owner (uid 65534) may not read it"),
        "{private_message}"
    );
    // (d) B's spec under A's root is not adopted: no job, no entry.
    assert!(
        jobs.iter().all(|j| !j.spec.ends_with("stray.gevo.toml")),
        "{jobs:#?}"
    );
    // Its build, asking, is told why...
    let asked = d.try_call(Request::Best {
        kernel: "stray/stray".into(),
        arch: None,
        spec: Some(evil.join("stray.gevo.toml")),
        spec_hash: None,
    });
    let note = format!("{asked:?}");
    assert!(
        note.contains("is not taken: gevod watches") && note.contains("as the spec's owner"),
        "{note}"
    );
    // ...and B, watching the same directory, has it adopt theirs too (no
    // squatting on another's directory).
    let out = as_user(&d, &client, B, &["watch", "--from-build", s(dir)]);
    assert!(
        said(&out).contains("the specs of uid 4242 only"),
        "{}",
        said(&out)
    );
    let jobs = d.wait_for("B's spec adopted", |d| {
        let jobs = d.jobs();
        of_spec(&jobs, "stray.gevo.toml").is_some().then_some(jobs)
    });
    let stray = message(&jobs, "stray.gevo.toml");
    // (In A's directory, which A could rewrite, it is refused before its IR.)
    assert!(
        stray.contains("refused") && stray.contains("(uid 4242)"),
        "{stray}"
    );
    let out = as_user(&d, &client, B, &["unwatch", s(dir)]);
    assert!(
        said(&out).contains("for the specs of uid 4242"),
        "{}",
        said(&out)
    );
    d.wait_for("B's spec let go", |d| {
        of_spec(&d.jobs(), "stray.gevo.toml")
            .is_none()
            .then_some(())
    });
    let seen = everything_shown(&d, &client);
    assert!(!seen.contains("TOPSECRET"), "the secret leaked:\n{seen}");

    // (e) Job control: A may not pause B's job, nor every job, nor shut
    // the daemon down, nor unwatch B's root; B and root may.
    for args in [
        &["pause", "theirs/b"][..],
        &["resume", "theirs/b"],
        &["pause"],
        &["shutdown"],
        &["unwatch", s(&theirs)],
    ] {
        let out = as_user(&d, &client, A, args);
        assert!(!out.status.success(), "{args:?}: {}", said(&out));
        assert!(
            said(&out).contains("refused: ") && said(&out).contains(" only "),
            "{args:?}: {}",
            said(&out)
        );
    }
    assert_ne!(state(&d, "theirs/b"), Some(JobState::Paused));
    let out = as_user(&d, &client, B, &["pause", "theirs/b"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(state(&d, "theirs/b"), Some(JobState::Paused));
    assert!(d.client(&["resume", "theirs/b"]).status.success());
    assert_ne!(state(&d, "theirs/b"), Some(JobState::Paused));
    // A pauses their own job.
    let out = as_user(&d, &client, A, &["pause", "evil/own"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(state(&d, "evil/own"), Some(JobState::Paused));

    // Who added each root survives a restart: A's root still adopts A's
    // specs only.
    d.signal(libc::SIGTERM);
    d.spawn(&[]);
    chmod(&d.socket, 0o666);
    let jobs = d.wait_for("A's jobs adopted again", |d| {
        let jobs = d.jobs();
        let back = ["evil/own", "evil/system"]
            .iter()
            .all(|k| job(&jobs, k).is_some_and(|j| j.state != JobState::Removed));
        let refused = of_spec(&jobs, "shadow.gevo.toml").is_some();
        (back && refused).then_some(jobs)
    });
    assert!(
        jobs.iter().all(|j| !j.spec.ends_with("stray.gevo.toml")),
        "{jobs:#?}"
    );
    assert_eq!(state(&d, "evil/own"), Some(JobState::Paused));

    // Unwatching their root removes the jobs it adopted (kept, removed);
    // B's, under B's own root, go on.
    let out = as_user(&d, &client, A, &["unwatch", s(dir)]);
    assert!(out.status.success(), "{}", said(&out));
    d.wait_for("A's jobs removed", |d| {
        let jobs = d.jobs();
        let removed = ["evil/own", "evil/system"]
            .iter()
            .all(|k| job(&jobs, k).is_some_and(|j| j.state == JobState::Removed));
        let gone = of_spec(&jobs, "shadow.gevo.toml").is_none();
        (removed && gone).then_some(())
    });
    assert!(job(&d.jobs(), "theirs/b").is_some_and(|j| j.state != JobState::Removed));
    // A's unwatch is A's: B's build may still register the directory.
    let out = as_user(&d, &client, B, &["watch", "--from-build", s(dir)]);
    assert!(said(&out).contains("watching"), "{}", said(&out));
    assert!(!said(&out).contains("not watching"), "{}", said(&out));
    // Root may shut the daemon down.
    assert!(d.client(&["shutdown"]).status.success());
}

/// (b) A root-owned 1777 root from the configuration: a spec of the
/// attacker's naming root's private file inside it is refused, as IR and
/// as a fill file (whose size is not told either).
#[test]
fn a_shared_root_grants_no_reading() {
    if !root_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    chmod(dir, 0o755);
    let shared = dir_of(&dir.join("shared"), 0, 0o1777);
    let secret = format!("{SECRET}\n");
    file_of(&shared.join("secret.txt"), &secret, 0, 0o600);
    file_of(&shared.join("a.ll"), &stencil_ir(), A, 0o644);
    file_of(
        &shared.join("peek.gevo.toml"),
        &spec("shared", "secret.txt", None),
        A,
        0o644,
    );
    file_of(
        &shared.join("size.gevo.toml"),
        &spec("shared", "a.ll", Some("secret.txt")),
        A,
        0o644,
    );
    let (d, client) = daemon(dir, &["--watch", s(&shared)]);
    let jobs = d.wait_for("both refusals", |d| {
        let jobs = d.jobs();
        ["peek.gevo.toml", "size.gevo.toml"]
            .iter()
            .all(|k| of_spec(&jobs, k).is_some_and(|j| j.state == JobState::Error))
            .then_some(jobs)
    });
    for kernel in ["peek.gevo.toml", "size.gevo.toml"] {
        let m = message(&jobs, kernel);
        assert!(
            m.contains("secret.txt refused: the spec's owner (uid 65534) may not read it"),
            "{kernel}: {m}"
        );
        assert!(!m.contains("bytes"), "{kernel}: the size leaked: {m}");
    }
    let seen = everything_shown(&d, &client);
    assert!(!seen.contains("TOPSECRET"), "the secret leaked:\n{seen}");
    let size = format!("{} bytes", secret.len());
    assert!(!seen.contains(&size), "the size leaked:\n{seen}");
}
