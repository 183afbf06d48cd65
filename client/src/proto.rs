//! The socket protocol: one JSON request line from the client, one JSON
//! response line from the daemon, then the connection closes. Both carry
//! [`PROTOCOL_VERSION`]; the daemon refuses a request of another version
//! with [`ErrorCode::VersionMismatch`], naming both.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Version of the request/response protocol between `gevo-client` and `gevod`.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest request or response line either side accepts (PTX included).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub version: u32,
    #[serde(flatten)]
    pub command: Command,
}

impl Request {
    pub fn new(command: Command) -> Self {
        Request {
            version: PROTOCOL_VERSION,
            command,
        }
    }
}

/// A kernel is `<project>/<name>` or, when unique, the short `<name>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    Status,
    /// Every job, or one kernel's jobs (each version) when `kernel` is
    /// given. A daemon that predates the filter ignores the field and
    /// answers every job, so clients filter the answer again.
    Jobs {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel: Option<String>,
    },
    Best {
        kernel: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arch: Option<String>,
        /// The spec file the asking build wrote (absolute): when the daemon
        /// has no answer, it says what it knows of that file (settling, not
        /// yet scanned, outside every watched directory, broken).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spec: Option<PathBuf>,
        /// That file's SHA-256 as the build sees it: a content the daemon
        /// has not taken yet is said to be pending.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spec_hash: Option<String>,
    },
    Pareto {
        kernel: String,
    },
    Explain {
        kernel: String,
    },
    /// The kernel's HTML report.
    Report {
        kernel: String,
    },
    /// The minimized patch of the kernel's best validated variant.
    Patch {
        kernel: String,
    },
    Watch {
        dir: PathBuf,
        /// A build registering its directory (CMake's configure), not a
        /// person: a directory the user unwatched stays unwatched.
        #[serde(default, skip_serializing_if = "is_false")]
        from_build: bool,
    },
    Unwatch {
        dir: PathBuf,
    },
    /// One kernel's current job, or every job when `kernel` is `None`.
    Pause {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel: Option<String>,
    },
    Resume {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel: Option<String>,
    },
    Shutdown,
}

fn is_false(b: &bool) -> bool {
    !b
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub version: u32,
    #[serde(flatten)]
    pub body: Body,
}

impl Response {
    pub fn ok(reply: Reply) -> Self {
        Response {
            version: PROTOCOL_VERSION,
            body: Body::Ok(reply),
        }
    }

    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        Response {
            version: PROTOCOL_VERSION,
            body: Body::Error(ApiError {
                code,
                message: message.into(),
            }),
        }
    }
}

// One response per connection: boxing the reply would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Body {
    Ok(Reply),
    Error(ApiError),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not a request this daemon understands.
    BadRequest,
    VersionMismatch,
    /// The peer's uid/gid is not allowed to use the daemon.
    Refused,
    UnknownKernel,
    /// A short name that several projects use; the message lists them.
    AmbiguousKernel,
    /// The kernel is known but has no validated variant (for that arch).
    NoValidated,
    /// The asking build's spec is not taken yet: its content is settling,
    /// or no scan has seen it. Ask again shortly.
    Pending,
    /// A watch/unwatch directory that cannot be used.
    BadDirectory,
    Internal,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Status(Status),
    Jobs(Vec<JobInfo>),
    Best(Best),
    Pareto(Pareto),
    Explain(Explanation),
    Report(ReportPage),
    Patch(PatchFile),
    /// Watch, unwatch, pause, resume and shutdown: what was done.
    Done(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub pid: u32,
    pub daemon_version: String,
    pub uptime_s: f64,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub watch_roots: Vec<WatchRoot>,
    pub slots: Vec<SlotInfo>,
    pub jobs: Vec<JobInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchRoot {
    pub path: PathBuf,
    /// `config` (gevod.toml or --watch) or `client` (gevo-client watch).
    pub source: String,
    pub exists: bool,
}

/// Where jobs run: a GPU or the simulator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotInfo {
    /// `sim`, or the GPU's name and UUID.
    pub name: String,
    /// `idle`, `running <job>`, `waiting: <why>`.
    pub state: String,
    /// Seconds jobs have held the slot since the daemon started (its
    /// share of `uptime_s` is the time the daemon used the GPU).
    #[serde(default)]
    pub held_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Evolving now.
    Running,
    /// Runnable, waiting for its turn or an idle GPU.
    Queued,
    /// Paused by a client.
    Paused,
    /// Its spec file is gone; resumes if it comes back unchanged.
    Removed,
    /// A newer version of the kernel replaced it.
    Superseded,
    /// Reached the configured generation limit.
    Finished,
    /// Cannot run: the message says why (bad spec, unparsable IR, ...).
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    /// `<project>/<name>`.
    pub kernel: String,
    /// The job id in the store; empty for a spec that never made a job.
    pub job: String,
    /// 1 for the kernel's first spec+IR content, counting up.
    pub version: u64,
    pub spec: PathBuf,
    pub state: JobState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub backend: String,
    pub target: String,
    pub generations: u64,
    pub evaluations: u64,
    pub validated: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_speedup: Option<f64>,
    /// The version this job was seeded from, when patches were carried over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<JobOrigin>,
    /// The generated held-out tests and what the user's tests miss, once
    /// the job has started (none for harness specs, and from a daemon
    /// that predates them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<GeneratedTests>,
    /// Set while the scheduler gives the job less than a plain job's share
    /// of the slots because its search stopped finding (docs/daemon.md,
    /// "Scheduling and idle GPUs"); absent at a full share and from a
    /// daemon that predates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduced_share: Option<ReducedShare>,
    /// The launch configuration a `[tune]` spec's version runs
    /// (`BLOCK_X=64 BLOCK_Y=2`); absent for other specs and from a daemon
    /// that predates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<String>,
}

/// Why a job's share of the slots is reduced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReducedShare {
    /// Its stride weight: 1 is a plain job's share, 0.25 a quarter of it.
    pub weight: f64,
    /// Committed generations since its search last found a lower train
    /// cost or its best validated variant.
    pub generations_without: u64,
    /// That generation; absent when nothing was found yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_found: Option<u64>,
}

/// A job's generated held-out tests (docs/evolve.md): derived from the
/// spec's parameters once per job, kept where the original kernel runs
/// cleanly on the simulator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratedTests {
    pub kept: Vec<GeneratedTest>,
    /// Not kept, each with its reason (the original fails there, a cap).
    pub dropped: Vec<GeneratedTest>,
    /// What the user's own tests miss: no partial block, parameters equal
    /// in every test.
    #[serde(default)]
    pub lints: Vec<String>,
    /// The original's simulator cost summed over the kept tests: what each
    /// validation pays for them.
    #[serde(default)]
    pub cost_per_validation: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratedTest {
    /// `generated[3]`.
    pub test: String,
    /// What it covers: `n = 7: one partial block`, `rx != ry (rx = 4, ry = 5)`.
    pub why: String,
    /// Kept: the original's simulator cost on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<u64>,
    /// Dropped: why (`the original fails there: out-of-bounds ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where a job's first population came from: the previous version's
/// validated patches and elite, carried to this version's IR.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobOrigin {
    /// The previous version's job id and version number.
    pub job: String,
    pub version: u64,
    /// Patches carried over (seeds of the first population).
    pub patches: usize,
    /// Edits kept and dropped over all carried patches.
    pub kept: usize,
    pub dropped: usize,
}

/// Where a speedup of a job on `backend` was measured, for headlines:
/// ` on the simulator` (`sim`), ` on the GPU` (`cuda`), else nothing.
pub fn measured_on(backend: &str) -> &'static str {
    match backend {
        "sim" => " on the simulator",
        "cuda" => " on the GPU",
        _ => "",
    }
}

/// [`measured_on`], and for the simulator what its number is: a ratio of
/// the simulator's cost model, not a time measured on a GPU.
pub fn measured_on_long(backend: &str) -> &'static str {
    match backend {
        "sim" => " on the simulator (a cost-model ratio, not a GPU speedup)",
        other => measured_on(other),
    }
}

/// The best validated variant of a kernel for one target, as exported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestRecord {
    pub kernel: String,
    pub job: String,
    pub version: u64,
    pub target: String,
    pub backend: String,
    pub speedup: f64,
    /// 95% interval of the speedup.
    pub interval: (f64, f64),
    pub generation: u64,
    /// SHA-256 (hex) of the PTX text.
    pub ptx_hash: String,
    pub spec_hash: String,
    pub ir_hash: String,
    /// Seconds since the Unix epoch.
    pub validated_at: u64,
    /// The `[tune]` constants the PTX was built with (docs/spec.md): a
    /// build that uses it defines them so; none for an untuned kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<std::collections::BTreeMap<String, i64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Best {
    #[serde(flatten)]
    pub record: BestRecord,
    pub ptx: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pareto {
    pub kernel: String,
    pub job: String,
    pub points: Vec<ParetoPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParetoPoint {
    /// Train cost relative to the original (below 1 is faster).
    pub cost: f64,
    pub error: f64,
    pub edits: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    pub kernel: String,
    pub job: String,
    pub speedup: f64,
    /// The minimized patch's edits, one line each.
    pub edits: Vec<String>,
    /// Unified diff of the kernel's IR, original to variant.
    pub diff: String,
    /// The changed instructions with a few lines of context: the diff of
    /// the IR with its value numbers set aside, so that renumbering alone
    /// is no change (empty from a daemon that predates it).
    #[serde(default)]
    pub changes: String,
    /// The job's backend: `sim` (speedups are simulator cost ratios) or
    /// `cuda` (GPU speedups); empty from a daemon that predates it.
    #[serde(default)]
    pub backend: String,
    /// Each held-out test's cost ratio, variant over original.
    #[serde(default)]
    pub tests: Vec<TestRatio>,
    /// Why the job's latest rejected candidates were not validated, newest
    /// first.
    #[serde(default)]
    pub rejections: Vec<String>,
    /// Where the job was seeded from, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<JobOrigin>,
    /// Indices into `edits` of the edits carried over from the previous
    /// version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transplanted: Vec<usize>,
    /// The minimized patch's edits in CUDA source terms (empty from a
    /// daemon that predates them: `edits` then stands alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_edits: Vec<crate::explain::SourceEdit>,
    /// Whether the kernel's IR has line tables.
    #[serde(default)]
    pub line_tables: bool,
    /// The generated held-out tests the variant passed, each with what it
    /// covers (`generated[0] (n = 7: one partial block)`): run on the
    /// simulator, at promotion or in selection (empty for a harness spec,
    /// or from a daemon that predates it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generated_passed: Vec<String>,
    /// The edit contributions `gevod explain-edits` stored for this
    /// variant, when it ran (absent from a daemon that predates them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contributions: Option<ContributionSummary>,
}

/// A validated variant's edit contributions, as `explain` shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContributionSummary {
    /// Where they were measured: `sim` or `cuda`.
    pub backend: String,
    /// The device or arch they were measured on (`NVIDIA H200`, `sm_90`);
    /// empty from a daemon that predates it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    /// The tests: `heldout`, `train`, `all`.
    pub set: String,
    /// The full patch's cost ratio.
    pub full: f64,
    pub edits: Vec<EditContributionLine>,
}

/// One edit's contribution and what it relies on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditContributionLine {
    /// Its index in the patch (0-based).
    pub index: usize,
    /// The kernel it edits.
    pub kernel: String,
    /// `carries speed`, `enabling` or `neutral`.
    pub class: String,
    /// Why, in one line.
    pub why: String,
    /// What it relies on, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relies_on: Vec<String>,
}

/// The patch of a kernel's best validated variant, in the versioned JSON
/// form `gevod run --patch` replays (docs/patches.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchFile {
    pub kernel: String,
    pub job: String,
    pub speedup: f64,
    /// `sim` (a simulator cost ratio) or `cuda` (a GPU speedup).
    pub backend: String,
    /// The patch file's text.
    pub patch: String,
}

/// A kernel's HTML report (one self-contained page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportPage {
    pub kernel: String,
    pub job: String,
    pub html: String,
}

/// One held-out test's cost ratio with its 95% interval (the point itself
/// on the simulator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRatio {
    pub test: String,
    pub ratio: f64,
    pub lo: f64,
    pub hi: f64,
    /// The test's sizes (`n = 4096, m = 64`); empty from a daemon that
    /// predates them.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sizes: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_a_flat_readable_form() {
        let r = Request::new(Command::Best {
            kernel: "app/stencil".into(),
            arch: Some("sm_90".into()),
            spec: None,
            spec_hash: None,
        });
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(
            line,
            r#"{"version":1,"command":"best","kernel":"app/stencil","arch":"sm_90"}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), r);
        let pause: Request = serde_json::from_str(r#"{"version":1,"command":"pause"}"#).unwrap();
        assert_eq!(pause.command, Command::Pause { kernel: None });
        // `jobs` without a kernel reads as it always did.
        let jobs = Request::new(Command::Jobs { kernel: None });
        let line = serde_json::to_string(&jobs).unwrap();
        assert_eq!(line, r#"{"version":1,"command":"jobs"}"#);
    }

    /// A daemon that predates `jobs <kernel>` (a unit `jobs` command)
    /// still reads the request, ignoring the kernel; a client that predates
    /// the generated tests still reads a job carrying them, and a new client
    /// reads an old daemon's job without them.
    #[test]
    fn jobs_with_generated_tests_talk_to_older_peers() {
        #[derive(Debug, Deserialize)]
        #[serde(tag = "command", rename_all = "snake_case")]
        enum OldCommand {
            Status,
            Jobs,
        }
        #[derive(Debug, Deserialize)]
        struct OldRequest {
            #[allow(dead_code)]
            version: u32,
            #[serde(flatten)]
            command: OldCommand,
        }
        let line = serde_json::to_string(&Request::new(Command::Jobs {
            kernel: Some("app/stencil".into()),
        }))
        .unwrap();
        let old: OldRequest = serde_json::from_str(&line).unwrap();
        assert!(matches!(old.command, OldCommand::Jobs), "{old:?}");
        assert!(serde_json::from_str::<OldRequest>(r#"{"version":1,"command":"status"}"#).is_ok());

        let old_job = r#"{"kernel":"app/k","job":"j1","version":1,"spec":"/s.gevo.toml","state":"running","backend":"sim","target":"sm_90","generations":2,"evaluations":10,"validated":0}"#;
        let job: JobInfo = serde_json::from_str(old_job).unwrap();
        assert_eq!((&job.generated, &job.reduced_share), (&None, &None));
        let mut new = job.clone();
        new.reduced_share = Some(ReducedShare {
            weight: 0.25,
            generations_without: 120,
            last_found: Some(3),
        });
        new.generated = Some(GeneratedTests {
            kept: vec![GeneratedTest {
                test: "generated[0]".into(),
                why: "n = 64: exactly one block".into(),
                cost: Some(7),
                reason: None,
            }],
            dropped: vec![],
            lints: vec!["no test has a partial block".into()],
            cost_per_validation: 7,
        });
        let line = serde_json::to_string(&new).unwrap();
        #[derive(Deserialize)]
        struct OldJobInfo {
            kernel: String,
            validated: usize,
        }
        let old: OldJobInfo = serde_json::from_str(&line).unwrap();
        assert_eq!((old.kernel.as_str(), old.validated), ("app/k", 0));
        assert_eq!(serde_json::from_str::<JobInfo>(&line).unwrap(), new);
    }

    #[test]
    fn responses_round_trip() {
        for response in [
            Response::ok(Reply::Done("paused 2 jobs".into())),
            Response::error(ErrorCode::UnknownKernel, "no kernel named x"),
        ] {
            let line = serde_json::to_string(&response).unwrap();
            assert_eq!(serde_json::from_str::<Response>(&line).unwrap(), response);
        }
        let line = serde_json::to_string(&Response::error(ErrorCode::Refused, "uid 7")).unwrap();
        assert_eq!(
            line,
            r#"{"version":1,"error":{"code":"refused","message":"uid 7"}}"#
        );
    }
}
