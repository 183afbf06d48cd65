//! The real `gevo-client` binary and its configuration file: where the
//! socket and state come from, and a file that cannot be used named at once.

use gevo_client::export;
use gevo_client::proto::{Command, Reply};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;

use common::*;

#[test]
fn the_config_supplies_socket_and_state_and_flags_override_it() {
    let dir = scratch("config");
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    let config = dir.join("etc/gevod.toml");
    // Relative paths are relative to the config file; other keys are the daemon's.
    std::fs::write(
        &config,
        "watch = [\"/src\"]\n[daemon]\nsocket = \"config.sock\"\nstate_dir = \"../state\"\n\
         nice = 19\n[search]\npopulation = 64\n",
    )
    .unwrap();
    let from_config = FakeDaemon::replying(
        &dir.join("etc/config.sock"),
        vec![ok(Reply::Done("config daemon".into()))],
    );
    let from_flag = FakeDaemon::replying(
        &dir.join("flag.sock"),
        vec![ok(Reply::Done("flag daemon".into()))],
    );
    let flag_socket = dir.join("flag.sock");

    let run = gevo(&dir, &["--config", s(&config), "jobs"]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "config daemon\n"),
        "{}",
        run.stderr
    );
    assert_eq!(from_config.received(), Command::Jobs { kernel: None });

    let run = gevo(
        &dir,
        &["--config", s(&config), "--socket", s(&flag_socket), "jobs"],
    );
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "flag daemon\n"),
        "{}",
        run.stderr
    );
    assert_eq!(from_flag.received(), Command::Jobs { kernel: None });

    // The config's state dir answers best once its daemon is gone.
    export::write(
        &dir.join("state"),
        &best("app/k", "sm_90", 1.1, PTX),
        export::Readers::Everyone,
    )
    .unwrap();
    std::fs::remove_file(dir.join("etc/config.sock")).unwrap();
    let run = gevo(&dir, &["--config", s(&config), "best", "app/k"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, PTX), "{}", run.stderr);
    assert!(run.stderr.contains("from the export in "), "{}", run.stderr);
    // ...unless --state says otherwise.
    let run = gevo(
        &dir,
        &["--config", s(&config), "--state", s(&dir), "best", "app/k"],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[test]
fn a_config_that_cannot_be_used_is_an_error_naming_it() {
    let dir = scratch("bad-config");
    let socket = dir.join("d.sock");
    let daemon = FakeDaemon::replying(&socket, vec![ok(Reply::Done("x".into()))]);
    let wrong_type = dir.join("wrong.toml");
    std::fs::write(&wrong_type, "[daemon]\nsocket = 5\n").unwrap();
    let unparsable = dir.join("broken.toml");
    std::fs::write(&unparsable, "[daemon\n").unwrap();
    let cases = [
        (
            dir.join("missing.toml"),
            format!(
                "cannot read the config {}",
                dir.join("missing.toml").display()
            ),
        ),
        (
            wrong_type.clone(),
            format!(
                "config {}: [daemon] socket must be a string, not integer",
                wrong_type.display()
            ),
        ),
        (
            unparsable.clone(),
            format!("config {}: ", unparsable.display()),
        ),
    ];
    for (config, expect) in cases {
        let run = gevo(
            &dir,
            &["--config", s(&config), "--socket", s(&socket), "status"],
        );
        assert_eq!(run.code, 1, "{expect}");
        assert!(
            run.stderr.starts_with(&format!("gevo-client: {expect}")),
            "{}",
            run.stderr
        );
        assert!(daemon.received_nothing());
    }
}

/// A file of `len` bytes of TOML comment.
fn comment_file(path: &Path, len: usize) {
    let mut text = vec![b'#'; len];
    text[len - 1] = b'\n';
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_config_that_is_not_a_small_regular_file_fails_at_once_naming_it() {
    let dir = scratch("config-kinds");
    type Make = fn(&Path) -> PathBuf;
    let cases: [(&str, Make, &str); 4] = [
        (
            "a FIFO",
            |dir| {
                let path = dir.join("fifo.toml");
                mkfifo(&path);
                path
            },
            "a FIFO, not a regular file",
        ),
        (
            "/dev/zero",
            |_| PathBuf::from("/dev/zero"),
            "a character device, not a regular file",
        ),
        (
            "a directory",
            |dir| {
                let path = dir.join("dir.toml");
                std::fs::create_dir(&path).unwrap();
                path
            },
            "a directory, not a regular file",
        ),
        (
            "a file over the cap",
            |dir| {
                let path = dir.join("big.toml");
                comment_file(&path, (1 << 20) + 1);
                path
            },
            "larger than 1048576 bytes",
        ),
    ];
    let socket = dir.join("none.sock");
    for (what, make, expect) in cases {
        let config = make(&dir);
        let args = ["--config", s(&config), "--socket", s(&socket), "status"];
        let run = gevo_within(&dir, &args, Duration::from_secs(2))
            .unwrap_or_else(|| panic!("{what}: still running after 2 s"));
        assert_ne!(run.code, 0, "{what}");
        assert_eq!(run.stderr.lines().count(), 1, "{what}: {}", run.stderr);
        assert!(
            run.stderr
                .contains(&format!("{}: {expect}", config.display())),
            "{what}: {}",
            run.stderr
        );
    }
    // Just under the cap is fine.
    let config = dir.join("fits.toml");
    comment_file(&config, 1 << 20);
    let run = gevo(
        &dir,
        &["--config", s(&config), "--socket", s(&socket), "status"],
    );
    assert!(run.stderr.contains("no socket there"), "{}", run.stderr);
}
