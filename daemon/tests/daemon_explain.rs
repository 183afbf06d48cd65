//! The daemon measures edit contributions itself (`[jobs] explain_edits`,
//! on by default): a real `gevod serve` runs the stencil fixture's job
//! until its search ends, then measures its best validated variant's edit
//! contributions on the simulator and stores them; the real `gevo-client
//! explain` shows them, and a restarted daemon does not measure them again.

use crate::common;

use common::daemon::{Daemon, CONFIG};
use common::{s, text};
use gevo_client::proto::JobState;
use gevo_search::contrib::{Class, Contributions};
use gevo_search::store::Store;

/// The search ends after this many generations; the stencil fixture's
/// job (seed 1) validates a variant before (in generation 2).
const GENERATIONS: u64 = 4;

/// A daemon watching the stencil fixture whose jobs end after
/// [`GENERATIONS`], with `more` config lines in `[jobs]`; waits for the
/// job to end and returns its validated best (`gevo-client --json best`).
fn ended_stencil_job(dir: &std::path::Path, more: &str) -> (Daemon, serde_json::Value) {
    std::fs::write(
        dir.join("gevod.toml"),
        format!("{CONFIG}[jobs]\nmax_generations = {GENERATIONS}\n{more}"),
    )
    .unwrap();
    let (d, _) = Daemon::watching_stencil(dir);
    let job = d.wait_for("the job to end", |d| {
        d.jobs()
            .into_iter()
            .find(|j| j.kernel == "app/stencil" && j.state == JobState::Finished)
    });
    assert!(
        job.validated > 0,
        "ended without a validated variant: {job:?}"
    );
    let best = d.validated_best("stencil").expect("a validated best");
    (d, best)
}

/// `gevo-client explain stencil` once it shows edit contributions (the
/// job may not be known yet when this starts asking).
fn explained_stencil(d: &Daemon) -> String {
    d.wait_for("the edit contributions in explain", |d| {
        let run = d.client(&["explain", "stencil"]);
        Some(text(&run.stdout)).filter(|t| t.contains("edit contributions ("))
    })
}

/// The contributions the store holds for `best` (`gevo-client --json
/// best`), read once the daemon has stopped.
fn stored_for(d: &Daemon, best: &serde_json::Value) -> Option<Contributions> {
    Store::open(&d.state)
        .unwrap()
        .contributions(
            best["job"].as_str().unwrap(),
            best["ptx_hash"].as_str().unwrap(),
        )
        .unwrap()
}

#[test]
fn an_ended_job_gets_its_edit_contributions_measured_and_explain_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, best) = ended_stencil_job(dir.path(), "");

    // `gevo-client explain` shows them once the daemon has stored them
    // (the job has ended: every ask succeeds).
    let said = d.wait_for("the edit contributions in explain", |d| {
        let run = d.client(&["explain", "stencil"]);
        assert!(run.status.success(), "{run:?}");
        Some(text(&run.stdout)).filter(|t| t.contains("edit contributions ("))
    });
    assert!(
        said.contains("edit contributions (sim, held-out tests; full patch cost ratio 0."),
        "{said}"
    );
    let json = d.client(&["--json", "explain", "stencil"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let edits = json["edits"].as_array().unwrap().len();
    assert!(edits > 0, "{json}");
    // The generated tests the served variant passed, with what each covers.
    let passed = json["generated_passed"].as_array().unwrap();
    assert!(!passed.is_empty(), "{json}");
    let first = passed[0].as_str().unwrap();
    assert!(
        first.starts_with("generated[0] (") && said.contains(first),
        "{said}"
    );
    assert!(
        said.contains("generated held-out tests passed (on the simulator):\n"),
        "{said}"
    );
    // The held-out tests it passed, with their sizes (the spec's sim ones).
    assert!(
        said.lines()
            .any(|l| l.starts_with("  heldout[0] ") && l.ends_with("  (nx = 300, ny = 200)")),
        "{said}"
    );
    assert_eq!(json["tests"][1]["sizes"], "nx = 129, ny = 257", "{json}");
    // The daemon's report lists the same tests, each passed.
    let page = dir.path().join("report.html");
    let run = d.client(&["report", "stencil", "-o", s(&page)]);
    assert!(run.status.success(), "{run:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<tr><td>heldout[1]</td><td>nx = 129, ny = 257</td><td>pass</td>"),
        "{html}"
    );
    let table = common::html_table(&html, "generated-tests");
    assert_eq!(
        table.matches("<td>pass</td>").count(),
        passed.len(),
        "{table}"
    );
    for t in passed {
        let (test, why) = t.as_str().unwrap().split_once(" (").unwrap();
        let row = format!(
            "<tr><td>{test}</td><td>{}</td><td>pass</td></tr>",
            why.strip_suffix(')').unwrap()
        );
        assert!(table.contains(&row), "{row} not in {table}");
    }
    // One class line per edit of the minimized patch, in order.
    let class_lines: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("  #"))
        .filter(|l| {
            ["carries speed", "enabling", "neutral"]
                .iter()
                .any(|c| l.contains(c))
        })
        .collect();
    assert_eq!(class_lines.len(), edits, "{said}");
    for (i, line) in class_lines.iter().enumerate() {
        assert!(line.starts_with(&format!("  #{} ", i + 1)), "{line}");
        assert!(line.contains(" [stencil5]: "), "{line}");
    }
    // A validated variant is faster: some edit carries the speed.
    assert!(
        class_lines
            .iter()
            .any(|l| l.contains("#") && l.contains(" carries speed [")),
        "{said}"
    );

    let log = d.log_text();
    assert!(log.contains("why=Ended"), "{log}");
    assert!(log.contains("edit contributions stored"), "{log}");
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{status}\n{}", d.log_text());

    // The store holds them for the best variant, relies-on lines included,
    // as `gevod explain-edits` would read them.
    let ptx_hash = best["ptx_hash"].as_str().unwrap();
    let id = best["job"].as_str().unwrap();
    {
        let store = Store::open(&d.state).unwrap();
        let c = store
            .contributions(id, ptx_hash)
            .unwrap()
            .expect("contributions stored for the best variant");
        assert_eq!(c.scope.backend, "sim");
        assert_eq!(c.set, "heldout");
        assert_eq!(c.edits.len(), edits);
        assert!(c.full.estimate < 1.0, "{:?}", c.full);
        assert!(c.relies_cost.is_some(), "no relies-on lines: {c:?}");
        assert!(
            c.edits.iter().any(|e| e.class == Class::CarriesSpeed),
            "{c:?}"
        );
        let stored: Vec<String> = c.edits.iter().map(|e| e.edit.clone()).collect();
        assert_eq!(serde_json::json!(stored), json["edits"]);
    }
    // `gevod explain-edits` reads the stored result rather than measure.
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_gevod"))
        .env("GEVOD_LOG", "info")
        .args(["explain-edits", s(&d.state), "--job", id])
        .output()
        .unwrap();
    assert!(cli.status.success(), "{}", text(&cli.stderr));
    assert!(
        !text(&cli.stderr).contains("measuring edit contributions"),
        "{}",
        text(&cli.stderr)
    );
    assert!(text(&cli.stdout).contains(&format!("edit contributions of job {id}: {edits} edits")));

    // Restarted, the daemon resumes the ended job and measures nothing again.
    d.spawn(&["--watch", s(&dir.path().join("app"))]);
    d.wait_for("the job to end again", |d| {
        d.jobs()
            .into_iter()
            .find(|j| j.kernel == "app/stencil" && j.state == JobState::Finished)
    });
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{status}\n{}", d.log_text());
    let log = d.log_text();
    assert_eq!(
        log.matches("measuring edit contributions on the simulator")
            .count(),
        1,
        "{log}"
    );
}

#[test]
fn with_explain_edits_off_the_daemon_measures_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, best) = ended_stencil_job(dir.path(), "explain_edits = false\n");
    // The runner would say so before measuring, even if stopped at once.
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{status}\n{}", d.log_text());
    let log = d.log_text();
    assert!(!log.contains("measuring edit contributions"), "{log}");
    let stored = stored_for(&d, &best);
    assert!(stored.is_none(), "{stored:?}");
}

/// A job that never ends (no `max_generations`): once its best lasts a
/// whole slice, the runner measures that best's contributions between two
/// slices, and the search goes on after.
#[test]
fn a_best_that_lasts_a_slice_is_explained_while_the_search_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, _) = Daemon::watching_stencil(dir.path());
    let said = explained_stencil(&d);
    assert!(said.contains(" carries speed ["), "{said}");
    let generations = |d: &Daemon| {
        d.jobs()
            .into_iter()
            .find(|j| j.kernel == "app/stencil")
            .map(|j| (j.generations, j.state))
    };
    let (before, state) = generations(&d).expect("the job");
    assert_ne!(state, JobState::Finished);
    d.wait_for("the search to go on", |d| {
        generations(d).filter(|(g, _)| *g > before)
    });
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{status}\n{}", d.log_text());
    let log = d.log_text();
    assert!(log.contains("why=Settled"), "{log}");
    assert!(!log.contains("why=Ended"), "{log}");
}

/// A slot with nothing to run explains a best nobody explained: here a job
/// that ended while the option was off, once a reload turns it on.
#[test]
fn an_idle_slot_explains_a_best_left_unexplained() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, best) = ended_stencil_job(dir.path(), "explain_edits = false\n");
    std::fs::write(
        &d.config,
        format!("{CONFIG}[jobs]\nmax_generations = {GENERATIONS}\n"),
    )
    .unwrap();
    // SAFETY: signals the daemon this test started.
    unsafe { libc::kill(d.child.as_ref().unwrap().id() as i32, libc::SIGHUP) };
    let said = explained_stencil(&d);
    assert!(said.contains(" carries speed ["), "{said}");
    let (status, _) = d.signal(libc::SIGTERM);
    assert!(status.success(), "{status}\n{}", d.log_text());
    let log = d.log_text();
    assert!(log.contains("why=Idle"), "{log}");
    assert!(stored_for(&d, &best).is_some());
}
