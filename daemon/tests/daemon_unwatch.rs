//! After `gevo-client unwatch`, against a real `gevod serve`: the answer
//! says what happens to the directory's jobs, `best` for the unwatched
//! build says the daemon does not watch it (and how to undo the unwatch)
//! rather than report a removed job's progress, and the removed jobs no
//! longer make a kernel's short name ambiguous.

use crate::common;

use common::daemon::{build_dir, Daemon, CONFIG};
use common::{s, text};
use gevo_client::proto::JobState;

/// `gevo-client args`: its exit code and what it said on stdout and stderr.
fn client(d: &Daemon, args: &[&str]) -> (Option<i32>, String) {
    let run = d.client(args);
    (run.status.code(), text(&run.stdout) + &text(&run.stderr))
}

#[test]
fn after_an_unwatch_unwatch_best_and_explain_say_what_is_true() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing validates: `best` stays without an answer to serve.
    std::fs::write(
        dir.path().join("gevod.toml"),
        format!("{CONFIG}promotions_per_generation = 0\n"),
    )
    .unwrap();
    // Two projects with a kernel of the same name: app (--watch) and
    // other (the user's watch, which the user may undo).
    let (d, _) = Daemon::watching_stencil(dir.path());
    build_dir(dir.path(), "other");
    let other = dir.path().join("other").canonicalize().unwrap();
    let (code, said) = client(&d, &["watch", s(&other)]);
    assert_eq!(code, Some(0), "{said}");
    d.wait_for("both jobs", |d| {
        let jobs = d.jobs();
        let has = |k: &str| jobs.iter().any(|j| j.kernel == k);
        (has("app/stencil") && has("other/stencil")).then_some(())
    });
    // Both present: the short name is ambiguous (so the check below can fail).
    let (_, said) = client(&d, &["explain", "stencil"]);
    assert!(said.contains("stencil is ambiguous"), "{said}");

    let (code, said) = client(&d, &["unwatch", s(&other)]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains(&format!(
            "no longer watching {}: the jobs of its specs stop, unless another watched directory \
             holds them, and stay listed as removed",
            other.display()
        )),
        "{said}"
    );
    assert!(!said.contains("kept, removed"), "{said}");
    d.wait_for("the other job removed", |d| {
        d.jobs()
            .into_iter()
            .find(|j| j.kernel == "other/stencil" && j.state == JobState::Removed)
    });

    // The short name is the watched project's; the full name still finds
    // the removed one.
    let (_, said) = client(&d, &["explain", "stencil"]);
    assert!(!said.contains("ambiguous"), "{said}");
    assert!(said.contains("app/stencil"), "{said}");
    let (_, said) = client(&d, &["explain", "other/stencil"]);
    assert!(!said.contains("no kernel named"), "{said}");

    // The unwatched build asks with its spec (as its build step does): the
    // daemon does not watch it, and the user's unwatch is why.
    let spec = other.join("build/stencil.gevo.toml");
    let (code, said) = client(&d, &["best", "other/stencil", "--spec", s(&spec)]);
    assert_eq!(code, Some(3), "{said}");
    assert!(said.contains("is in no directory gevod watches"), "{said}");
    assert!(
        said.contains(&format!(
            "{} was unwatched with `gevo-client unwatch`; `gevo-client watch {}` watches it again",
            other.display(),
            other.display()
        )),
        "{said}"
    );
    assert!(!said.contains("no validated variant"), "{said}");
    // Without the spec: why the version no longer runs.
    let (code, said) = client(&d, &["best", "other/stencil"]);
    assert_eq!(code, Some(3), "{said}");
    assert!(
        said.contains("version 1 is removed: its spec")
            && said.contains("is gone or in no directory gevod watches"),
        "{said}"
    );
}
