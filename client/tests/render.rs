//! What `gevo-client` prints: the status and jobs tables, every reply's
//! text form, and `--json`'s payloads, against a fake gevod.

mod common;

use common::*;
use gevo_client::explain::{SourceEdit, SourceLine};
use gevo_client::proto::{
    ContributionSummary, EditContributionLine, Explanation, JobInfo, JobOrigin, JobState, Pareto,
    ParetoPoint, ReducedShare, Reply, SlotInfo, Status, TestRatio, WatchRoot,
};
fn job(kernel: &str, state: JobState, speedup: Option<f64>, message: Option<&str>) -> JobInfo {
    JobInfo {
        kernel: kernel.into(),
        job: format!("{kernel}#1"),
        version: 1,
        spec: format!("/src/{kernel}.json").into(),
        state,
        message: message.map(str::to_string),
        backend: "sim".into(),
        target: "sm_90".into(),
        generations: 12,
        evaluations: 3400,
        validated: if speedup.is_some() { 2 } else { 0 },
        best_speedup: speedup,
        origin: None,
        generated: None,
        reduced_share: None,
        configuration: None,
    }
}

fn status() -> Status {
    Status {
        pid: 4242,
        daemon_version: "0.1.0".into(),
        uptime_s: 3723.9,
        socket: "/run/gevod/gevod.sock".into(),
        state_dir: "/var/lib/gevod".into(),
        watch_roots: vec![
            WatchRoot {
                path: "/home/u/app/build".into(),
                source: "config".into(),
                exists: true,
            },
            WatchRoot {
                path: "/tmp/gone".into(),
                source: "client".into(),
                exists: false,
            },
        ],
        slots: vec![
            SlotInfo {
                name: "sim".into(),
                state: "running app/stencil".into(),
                held_s: 3600.0,
            },
            SlotInfo {
                name: "NVIDIA H200 GPU-1234".into(),
                state: "waiting: busy (another process uses it)".into(),
                held_s: 0.0,
            },
        ],
        jobs: vec![
            job("app/stencil", JobState::Running, Some(1.2345), None),
            job(
                "app/broken",
                JobState::Error,
                None,
                Some("spec: missing field `grid`"),
            ),
        ],
    }
}

const JOBS_TABLE: &str = "\
KERNEL       VERSION  STATE    GENERATIONS  EVALUATIONS  VALIDATED  BEST                     BACKEND/TARGET  MESSAGE
app/stencil  1        running  12           3400         2          1.234x on the simulator  sim/sm_90
app/broken   1        error    12           3400         0          -                        sim/sm_90       spec: missing field `grid`
";

#[test]
fn status_and_jobs_print_tables() {
    let dir = scratch("tables");
    let socket = dir.join("d.sock");
    let pareto = Pareto {
        kernel: "app/stencil".into(),
        job: "j1".into(),
        points: vec![
            ParetoPoint {
                cost: 1.0,
                error: 0.0,
                edits: 0,
            },
            ParetoPoint {
                cost: 0.81234,
                error: 2.5e-7,
                edits: 3,
            },
        ],
    };
    let explanation = Explanation {
        kernel: "app/stencil".into(),
        job: "j1".into(),
        speedup: 1.25,
        edits: vec!["delete %12".into(), "swap %3 %4".into()],
        diff: "--- original\n+++ variant\n-  %12 = add i32 %a, 0\n".into(),
        // From a daemon that predates the changed-instruction view.
        changes: String::new(),
        backend: "sim".into(),
        tests: vec![
            TestRatio {
                test: "heldout[0]".into(),
                ratio: 0.8,
                lo: 0.79,
                hi: 0.81,
                sizes: "nx = 4096, ny = 4096".into(),
            },
            TestRatio {
                test: "heldout[1]".into(),
                ratio: 0.95,
                lo: 0.95,
                hi: 0.95,
                // From a daemon that predates the sizes.
                sizes: String::new(),
            },
        ],
        rejections: vec!["heldout[1]: slower with confidence on this test".into()],
        origin: None,
        transplanted: Vec::new(),
        source_edits: vec![],
        generated_passed: vec!["generated[0] (nx = 7, ny = 7: one partial block)".into()],
        line_tables: false,
        contributions: None,
    };
    // A job seeded from its kernel's previous version.
    let origin = JobOrigin {
        job: "app/stencil@v1".into(),
        version: 1,
        patches: 2,
        kept: 3,
        dropped: 1,
    };
    let mut seeded = job("app/stencil", JobState::Running, Some(1.1), None);
    seeded.version = 2;
    seeded.origin = Some(origin.clone());
    let seeded_explanation = Explanation {
        origin: Some(origin),
        transplanted: vec![0],
        tests: Vec::new(),
        rejections: Vec::new(),
        diff: String::new(),
        generated_passed: Vec::new(),
        ..explanation.clone()
    };
    // From a daemon that tells the edits in source terms.
    let in_source = Explanation {
        edits: vec!["delete i87".into()],
        tests: vec![],
        rejections: vec![],
        diff: String::new(),
        source_edits: vec![SourceEdit {
            summary: "delete the __syncthreads() at stencil.cu:61".into(),
            ir: "delete i87".into(),
            lines: vec![SourceLine {
                location: "stencil.cu:61".into(),
                text: Some("__syncthreads();".into()),
            }],
            repairs: vec![],
            kernel: None,
        }],
        line_tables: true,
        generated_passed: Vec::new(),
        ..explanation.clone()
    };
    // With the contributions `gevod explain-edits` stored.
    let with_contributions = Explanation {
        contributions: Some(ContributionSummary {
            backend: "sim".into(),
            target: "sm_90".into(),
            set: "heldout".into(),
            full: 0.81,
            edits: vec![EditContributionLine {
                index: 0,
                kernel: "stencil5".into(),
                class: "carries speed".into(),
                why: "without it the cost ratio rises from 0.8100 to 1.0000".into(),
                relies_on: vec!["deleted the __syncthreads() at stencil.cu:61 ordered the shared-memory store to tile at stencil.cu:50 before the shared-memory load of tile at stencil.cu:70: the __syncthreads() at stencil.cu:60 now orders them".into()],
            }],
        }),
        ..in_source.clone()
    };
    let cases: Vec<(&str, Reply, String)> = vec![
        (
            "jobs",
            Reply::Jobs(vec![
                seeded,
                job("app/reduce", JobState::Queued, None, None),
            ]),
            "\
KERNEL       VERSION  STATE    GENERATIONS  EVALUATIONS  VALIDATED  BEST                     BACKEND/TARGET  FROM
app/stencil  2        running  12           3400         2          1.100x on the simulator  sim/sm_90       v1 (3 kept, 1 dropped)
app/reduce   1        queued   12           3400         0          -                        sim/sm_90       -
"
            .into(),
        ),
        (
            "explain",
            Reply::Explain(seeded_explanation),
            "\
app/stencil (job j1): speedup 1.250x on the simulator (a cost-model ratio, not a GPU speedup) with 2 edits
seeded from version 1 (job app/stencil@v1): 2 patches carried over, 3 edits kept, 1 dropped
  1. delete %12  (from version 1)
  2. swap %3 %4
"
            .into(),
        ),
        (
            "status",
            Reply::Status(status()),
            format!(
                "\
gevod 0.1.0 (pid 4242), up 1h 02m 03s
socket:    /run/gevod/gevod.sock
state dir: /var/lib/gevod

WATCH ROOT         SOURCE  EXISTS
/home/u/app/build  config  yes
/tmp/gone          client  no

SLOT                  STATE                                    HELD
sim                   running app/stencil                      1h 00m 00s (97%)
NVIDIA H200 GPU-1234  waiting: busy (another process uses it)  0s (0%)

{JOBS_TABLE}"
            ),
        ),
        ("jobs", Reply::Jobs(status().jobs), JOBS_TABLE.into()),
        ("jobs", Reply::Jobs(vec![]), "no jobs\n".into()),
        (
            "pareto",
            Reply::Pareto(pareto),
            "\
app/stencil (job j1): 2 points on the Pareto front
COST    ERROR     EDITS
1.0000  0         0
0.8123  2.500e-7  3
"
            .into(),
        ),
        (
            "explain",
            Reply::Explain(explanation),
            "\
app/stencil (job j1): speedup 1.250x on the simulator (a cost-model ratio, not a GPU speedup) with 2 edits
  1. delete %12
  2. swap %3 %4
held-out tests (cost ratio, variant over original, 95% interval):
  heldout[0]   0.8000  [0.7900, 0.8100]  (nx = 4096, ny = 4096)
  heldout[1]   0.9500  [0.9500, 0.9500]
generated held-out tests passed (on the simulator):
  generated[0] (nx = 7, ny = 7: one partial block)
latest rejected candidates:
  - heldout[1]: slower with confidence on this test

--- original
+++ variant
-  %12 = add i32 %a, 0
"
            .into(),
        ),
        (
            "explain",
            Reply::Explain(in_source),
            "\
app/stencil (job j1): speedup 1.250x on the simulator (a cost-model ratio, not a GPU speedup) with 1 edit
  1. delete the __syncthreads() at stencil.cu:61
       stencil.cu:61 | __syncthreads();
       IR: delete i87
"
            .into(),
        ),
        (
            "explain",
            Reply::Explain(with_contributions),
            "\
app/stencil (job j1): speedup 1.250x on the simulator (a cost-model ratio, not a GPU speedup) with 1 edit
  1. delete the __syncthreads() at stencil.cu:61
       stencil.cu:61 | __syncthreads();
       IR: delete i87
edit contributions (sim, held-out tests; full patch cost ratio 0.8100):
  #1 carries speed [stencil5]: without it the cost ratio rises from 0.8100 to 1.0000
     relies on: deleted the __syncthreads() at stencil.cu:61 ordered the shared-memory store to tile at stencil.cu:50 before the shared-memory load of tile at stencil.cu:70: the __syncthreads() at stencil.cu:60 now orders them
"
            .into(),
        ),
    ];
    for (i, (command, reply, expect)) in cases.into_iter().enumerate() {
        let socket = socket.with_extension(i.to_string());
        let _daemon = FakeDaemon::replying(&socket, vec![ok(reply)]);
        let mut args = vec!["--socket", s(&socket), command];
        if matches!(command, "pareto" | "explain") {
            args.push("stencil");
        }
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 0, "{command}: {}", run.stderr);
        assert_eq!(run.stdout, expect, "{command}");
    }
}

/// `explain` shows the changed instructions, and the whole IR diff with
/// `--full-diff`; a GPU job's speedup says so.
#[test]
fn explain_shows_the_changed_instructions_unless_asked_for_the_full_diff() {
    let dir = scratch("explain-changes");
    let explanation = Explanation {
        kernel: "app/stencil".into(),
        job: "j1".into(),
        speedup: 1.25,
        edits: vec!["delete i7".into()],
        diff: "--- original\n+++ variant\n-  %5 = add i32 %4, 1\n-  %6 = mul i32 %5, 2\n+  %5 = mul i32 %4, 2\n".into(),
        changes: "@@ variant line 9 @@\n   %4 = load i32, ptr %0\n-  %5 = add i32 %4, 1\n".into(),
        backend: "cuda".into(),
        tests: vec![],
        rejections: vec![],
        origin: None,
        transplanted: vec![],
        source_edits: vec![],
        generated_passed: vec![],
        line_tables: false,
        contributions: None,
    };
    let head = "app/stencil (job j1): speedup 1.250x on the GPU with 1 edit\n  1. delete i7\n\n";
    let cases = [
        (
            vec![],
            format!(
                "{head}changed IR instructions (value numbers set aside; --full-diff for the whole diff):\n{}",
                explanation.changes
            ),
        ),
        (vec!["--full-diff"], format!("{head}{}", explanation.diff)),
    ];
    for (i, (extra, expect)) in cases.into_iter().enumerate() {
        let socket = dir.join(format!("d{i}.sock"));
        let _daemon = FakeDaemon::replying(&socket, vec![ok(Reply::Explain(explanation.clone()))]);
        let mut args = vec!["--socket", s(&socket), "explain", "stencil"];
        args.extend(extra);
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.stdout, expect, "{args:?}");
    }
}

/// A job whose search stopped finding: `jobs` shows its reduced share,
/// `jobs <kernel>` why (and a `[tune]` version's launch configuration, a
/// column of the table where any job has one);
/// `--json` keeps the numbers.
#[test]
fn a_reduced_share_shows_with_why() {
    let dir = scratch("share");
    let mut stalled = job("app/stencil", JobState::Running, Some(1.1), None);
    stalled.reduced_share = Some(ReducedShare {
        weight: 0.25,
        generations_without: 230,
        last_found: Some(120),
    });
    stalled.configuration = Some("BLOCK_X=64 BLOCK_Y=2".into());
    let mut never = job("app/reduce", JobState::Queued, None, None);
    never.reduced_share = Some(ReducedShare {
        weight: 0.3,
        generations_without: 60,
        last_found: None,
    });
    let jobs = vec![
        stalled.clone(),
        never,
        job("app/scan", JobState::Queued, None, None),
    ];
    let table = "\
KERNEL       VERSION  STATE    GENERATIONS  EVALUATIONS  VALIDATED  BEST                     BACKEND/TARGET  SHARE                            CONFIGURATION
app/stencil  1        running  12           3400         2          1.100x on the simulator  sim/sm_90       1/4 (found nothing in 230 gen.)  BLOCK_X=64 BLOCK_Y=2
app/reduce   1        queued   12           3400         0          -                        sim/sm_90       0.30 (found nothing in 60 gen.)  -
app/scan     1        queued   12           3400         0          -                        sim/sm_90       -                                -
";
    let one = "\
KERNEL       VERSION  STATE    GENERATIONS  EVALUATIONS  VALIDATED  BEST                     BACKEND/TARGET  SHARE                            CONFIGURATION
app/stencil  1        running  12           3400         2          1.100x on the simulator  sim/sm_90       1/4 (found nothing in 230 gen.)  BLOCK_X=64 BLOCK_Y=2

app/stencil version 1: generated held-out tests: not derived yet (they are when the job first runs; none for harness specs)
launch configuration: BLOCK_X=64 BLOCK_Y=2 (the fastest its sweep measured)
share of the slots: 1/4 of a plain job's: no lower train cost and no better validated variant since generation 120 (230 generations)
";
    for (i, (args, reply, expect)) in [
        (vec!["jobs"], jobs.clone(), table),
        (vec!["jobs", "app/stencil"], vec![stalled], one),
    ]
    .into_iter()
    .enumerate()
    {
        let socket = dir.join(format!("d{i}.sock"));
        let _daemon = FakeDaemon::replying(&socket, vec![ok(Reply::Jobs(reply))]);
        let run = gevo(&dir, &[&["--socket", s(&socket)], args.as_slice()].concat());
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert_eq!(run.stdout, expect, "{args:?}");
    }
    let socket = dir.join("json.sock");
    let _daemon = FakeDaemon::replying(&socket, vec![ok(Reply::Jobs(jobs))]);
    let run = gevo(&dir, &["--socket", s(&socket), "jobs", "--json"]);
    let got: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        got[0]["reduced_share"],
        serde_json::json!({"weight": 0.25, "generations_without": 230, "last_found": 120})
    );
    assert_eq!(
        got[1]["reduced_share"]["last_found"],
        serde_json::Value::Null
    );
    assert!(got[2].get("reduced_share").is_none(), "{}", got[2]);
}

/// A GPU job's contributions measured on the simulator say so; measured on
/// the GPU, no such line.
#[test]
fn a_gpu_speedup_explained_by_the_simulator_says_so() {
    let dir = scratch("explain-backend");
    let summary = |backend: &str| ContributionSummary {
        backend: backend.into(),
        target: "NVIDIA H200".into(),
        set: "heldout".into(),
        full: 0.94,
        edits: vec![EditContributionLine {
            index: 0,
            kernel: "k".into(),
            class: "neutral".into(),
            why: "removing it changes nothing measurable".into(),
            relies_on: vec![],
        }],
    };
    let base = Explanation {
        kernel: "app/k".into(),
        job: "j1".into(),
        speedup: 1.065,
        edits: vec!["delete i7".into()],
        diff: String::new(),
        changes: String::new(),
        backend: "cuda".into(),
        tests: vec![],
        rejections: vec![],
        origin: None,
        transplanted: vec![],
        source_edits: vec![],
        generated_passed: vec![],
        line_tables: false,
        contributions: None,
    };
    let note = "(measured on the simulator, not on the GPU that found the speedup";
    for (i, (job_backend, measured, noted)) in [
        ("cuda", "sim", true),
        ("cuda", "cuda", false),
        ("sim", "sim", false),
    ]
    .into_iter()
    .enumerate()
    {
        let explanation = Explanation {
            backend: job_backend.into(),
            contributions: Some(summary(measured)),
            ..base.clone()
        };
        let socket = dir.join(format!("d{i}.sock"));
        let _daemon = FakeDaemon::replying(&socket, vec![ok(Reply::Explain(explanation))]);
        let run = gevo(&dir, &["--socket", s(&socket), "explain", "k"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stdout.contains(&format!(
                "edit contributions ({measured}{}, ",
                if measured == "cuda" {
                    " on NVIDIA H200"
                } else {
                    ""
                }
            )),
            "{}",
            run.stdout
        );
        assert_eq!(
            run.stdout.contains(note),
            noted,
            "{job_backend}/{measured}: {}",
            run.stdout
        );
    }
}

#[test]
fn json_prints_the_reply_payload() {
    let dir = scratch("json");
    let cases: Vec<(&str, Reply)> = vec![
        ("status", Reply::Status(status())),
        ("jobs", Reply::Jobs(status().jobs)),
        ("pause", Reply::Done("paused 2 jobs".into())),
    ];
    for (i, (command, reply)) in cases.into_iter().enumerate() {
        let socket = dir.join(format!("d{i}.sock"));
        let _daemon = FakeDaemon::replying(&socket, vec![ok(reply.clone())]);
        let run = gevo(&dir, &["--socket", s(&socket), command, "--json"]);
        assert_eq!(run.code, 0, "{command}: {}", run.stderr);
        let got: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let want = match reply {
            Reply::Status(x) => serde_json::to_value(x),
            Reply::Jobs(x) => serde_json::to_value(x),
            Reply::Done(x) => serde_json::to_value(x),
            _ => unreachable!(),
        }
        .unwrap();
        assert_eq!(got, want, "{command}");
    }
}

/// A title change and a screen clear, as a file name or source line could
/// carry them, and a C1 CSI and a DEL.
const EVIL: &str = "\x1b]0;owned\x07k\x1b[2J\u{9b}1m\x7f";

/// True when `text` holds no control character but line breaks.
fn clean(text: &str) -> bool {
    !text
        .chars()
        .any(|c| c != '\n' && (c < ' ' || c == '\x7f' || ('\u{80}'..='\u{9f}').contains(&c)))
}

#[test]
fn control_characters_from_the_daemon_are_escaped_in_text_and_kept_in_json() {
    let dir = scratch("escapes");
    let evil = |s: &str| format!("{s}{EVIL}");
    let mut job = job(&evil("app/stencil"), JobState::Error, Some(1.2), None);
    job.job = evil("j");
    job.spec = evil("/src/spec.json").into();
    job.message = Some(evil("spec: bad"));
    job.backend = evil("sim");
    job.origin = Some(JobOrigin {
        job: evil("app/stencil@v1"),
        version: 1,
        patches: 1,
        kept: 1,
        dropped: 0,
    });
    let mut status = status();
    status.daemon_version = evil("0.1");
    status.socket = evil("/run/gevod.sock").into();
    status.state_dir = evil("/var/lib/gevod").into();
    status.watch_roots[0].path = evil("/home/u/app").into();
    status.slots[0].name = evil("sim");
    status.slots[0].state = evil("running");
    status.jobs = vec![job.clone()];
    let explanation = Explanation {
        kernel: evil("app/stencil"),
        job: evil("j1"),
        speedup: 1.25,
        edits: vec![evil("delete i87")],
        diff: evil("--- original\n+++ variant\n-  %12 = add i32 %a, 0 ; "),
        changes: evil("@@ variant line 3 @@\n-  %12 = add i32 %a, 0 ; "),
        backend: evil("sim"),
        tests: vec![TestRatio {
            test: evil("heldout[0]"),
            ratio: 0.8,
            lo: 0.79,
            hi: 0.81,
            sizes: evil("n = 7"),
        }],
        rejections: vec![evil("heldout[1]: slower")],
        origin: job.origin.clone(),
        transplanted: vec![0],
        source_edits: vec![SourceEdit {
            summary: evil("delete the __syncthreads() at stencil.cu:61"),
            ir: evil("delete i87"),
            lines: vec![SourceLine {
                location: evil("stencil.cu:61"),
                text: Some(evil("__syncthreads(); // ")),
            }],
            repairs: vec![evil("%3 now %2")],
            kernel: Some(evil("stencil5")),
        }],
        generated_passed: vec![evil("generated[0] (n = 7)")],
        line_tables: true,
        contributions: Some(ContributionSummary {
            backend: evil("cuda"),
            target: evil("NVIDIA H200"),
            set: evil("heldout"),
            full: 0.8,
            edits: vec![EditContributionLine {
                index: 0,
                kernel: evil("stencil5"),
                class: evil("neutral"),
                why: evil("within 1%"),
                relies_on: vec![evil("deleted the __syncthreads() at stencil.cu:61")],
            }],
        }),
    };
    let pareto = Pareto {
        kernel: evil("app/stencil"),
        job: evil("j1"),
        points: vec![],
    };
    let cases: Vec<(&str, Reply)> = vec![
        ("status", Reply::Status(status)),
        ("jobs", Reply::Jobs(vec![job])),
        ("explain", Reply::Explain(explanation.clone())),
        (
            "explain",
            Reply::Explain(Explanation {
                source_edits: vec![],
                ..explanation
            }),
        ),
        ("pareto", Reply::Pareto(pareto)),
        ("pause", Reply::Done(evil("paused"))),
    ];
    for (i, (command, reply)) in cases.into_iter().enumerate() {
        let socket = dir.join(format!("d{i}.sock"));
        let _daemon = FakeDaemon::replying(&socket, vec![ok(reply.clone()), ok(reply.clone())]);
        let mut args = vec!["--socket", s(&socket), command];
        if matches!(command, "pareto" | "explain") {
            args.push("stencil");
        }
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 0, "{command}: {}", run.stderr);
        assert!(clean(&run.stdout), "{command}: {:?}", run.stdout);
        assert!(
            run.stdout.contains("\\u{1b}]0;owned\\u{7}"),
            "{command}: {}",
            run.stdout
        );

        args.push("--json");
        let run = gevo(&dir, &args);
        assert_eq!(run.code, 0, "{command}: {}", run.stderr);
        assert!(clean(&run.stdout), "{command}: {:?}", run.stdout);
        let got: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let want = match reply {
            Reply::Status(x) => serde_json::to_value(x),
            Reply::Jobs(x) => serde_json::to_value(x),
            Reply::Explain(x) => serde_json::to_value(x),
            Reply::Pareto(x) => serde_json::to_value(x),
            Reply::Done(x) => serde_json::to_value(x),
            _ => unreachable!(),
        }
        .unwrap();
        assert_eq!(got, want, "{command}: the original bytes");
    }

    // An error the daemon sends, on stderr.
    let socket = dir.join("error.sock");
    let _daemon = FakeDaemon::replying(
        &socket,
        vec![gevo_client::proto::Response::error(
            gevo_client::proto::ErrorCode::UnknownKernel,
            evil("no kernel named app/x"),
        )],
    );
    let run = gevo(&dir, &["--socket", s(&socket), "pause", "app/x"]);
    assert_eq!(run.code, 1);
    assert!(clean(&run.stderr), "{:?}", run.stderr);
    assert_eq!(
        run.stderr,
        "gevo-client: no kernel named app/x\\u{1b}]0;owned\\u{7}k\\u{1b}[2J\\u{9b}1m\\u{7f}\n"
    );
}
