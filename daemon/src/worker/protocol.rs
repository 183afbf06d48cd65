//! The wire protocol between the engine's process and its workers: one
//! JSON object per line, requests in, the greeting and answers out
//! (ARCHITECTURE.md, "Worker protocol").

use crate::config::Prescreen;
use crate::cuda::guarded::GuardedBuild;
use crate::cuda::toolkit::Cubin;
use gevo_ir::Patch;
use gevo_model::assessment::Assessment;
use gevo_model::device::DeviceInfo;
use gevo_model::spec::TestSet;
use gevo_model::utilization::{Spent, StartUp};
use gevo_search::evolve::{Build, Scope};
use serde::{Deserialize, Serialize};

/// Wire protocol version, sent in the worker's greeting (5: guard sites
/// carry their id; 6: guarded builds poison shared memory, the guard
/// table's pattern word the worker fills; 7: `prescreen` names a
/// placement; 8: `known` and `skip_known`; 9: `forget`; 10: a variant the
/// pre-screen rejects comes without PTX, keyed by its IR).
pub const PROTOCOL: u32 = 10;

/// A request from the engine's process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// PTX for the patch; with `prescreen` (a placement: `all`,
    /// `smallest`; `true` and `false` read as `all` and `off`), also runs
    /// of the train tests on the simulator, whose faults and mismatches
    /// reject the variant before it costs GPU time; with `cubin_for` (a GPU architecture,
    /// `sm_90`), a variant that passes is also assembled by ptxas, when
    /// the worker finds one, so the GPU worker loads no PTX.
    Compile {
        id: u64,
        patch: Patch,
        #[serde(default = "off", deserialize_with = "crate::config::prescreen")]
        prescreen: Prescreen,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cubin_for: Option<String>,
        /// A variant that passes also gets its guarded build (and that
        /// assembled too, with `cubin_for`), for the GPU worker's checks.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        guarded: bool,
        /// With `guarded` and `cubin_for`: only the guarded build is
        /// assembled; the GPU worker assembles the variant itself while
        /// the guarded build is checked, and stops when the check fails
        /// (a search's variants, few of which pass; promotion's all do).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        defer_assembly: bool,
        /// Cache keys the search knows (PTX hashes, and the IR keys of the
        /// pre-screen's rejections; its fitness cache holds them), new
        /// since this worker's previous request: the pool adds them as it
        /// sends (`WorkerPool::note_known`); the worker keeps them all.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        known: Vec<String>,
        /// PTX hashes the search is about to forget (`WorkerPool::
        /// forget_known`), since this worker's previous request: the worker
        /// drops them, so those variants are checked again in full.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        forget: Vec<String>,
        /// A search's variant whose IR key or PTX the worker was told is
        /// known is answered right after its replay or its code generation:
        /// the search takes its cached fitness and measures nothing, so the
        /// rest would be spent for nothing.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        skip_known: bool,
    },
    /// The patch run on the simulator.
    Assess { id: u64, patch: Patch, set: TestSet },
    /// PTX checked and timed on the GPU (GPU workers only). With `race`,
    /// the timing may stop early once the variant is confidently on one
    /// side of that train cost (adaptive measurement).
    Measure {
        id: u64,
        ptx: String,
        /// The PTX assembled for the worker's GPU, where a compile worker
        /// could (`Compile::cubin_for`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cubin: Option<Cubin>,
        /// Its guarded build: the outputs are checked through it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        guarded: Option<GuardedBuild>,
        set: TestSet,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        race: Option<f64>,
    },
}

fn off() -> Prescreen {
    Prescreen::Off
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Request {
    pub fn id(&self) -> u64 {
        match self {
            Request::Compile { id, .. }
            | Request::Assess { id, .. }
            | Request::Measure { id, .. } => *id,
        }
    }

    /// The patch's PTX, and nothing more.
    pub fn compile(id: u64, patch: Patch) -> Request {
        Request::Compile {
            id,
            patch,
            prescreen: Prescreen::Off,
            cubin_for: None,
            guarded: false,
            defer_assembly: false,
            known: Vec::new(),
            forget: Vec::new(),
            skip_known: false,
        }
    }

    /// A variant the GPU workers will measure: pre-screened where asked,
    /// with its guarded build, both assembled for `cubin_for`. A search's
    /// (`searching`) leaves the variant's assembly to the GPU worker
    /// (`defer_assembly`) and stops early where its IR key or PTX is known
    /// (`skip_known`); promotion's measures every patch it is given.
    pub fn compile_measured(
        id: u64,
        patch: Patch,
        prescreen: Prescreen,
        cubin_for: Option<String>,
        searching: bool,
    ) -> Request {
        Request::Compile {
            id,
            patch,
            prescreen,
            cubin_for,
            guarded: true,
            defer_assembly: searching,
            known: Vec::new(),
            forget: Vec::new(),
            skip_known: searching,
        }
    }

    /// The same request numbered `id` (a request made away from its pool
    /// is numbered when the pool takes it).
    pub fn with_id(mut self, new: u64) -> Self {
        match &mut self {
            Request::Compile { id, .. }
            | Request::Assess { id, .. }
            | Request::Measure { id, .. } => *id = new,
        }
        self
    }
}

/// A worker's line: its greeting, or the answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    /// Sent once the spec is loaded; `Fatal` instead when it cannot be.
    Ready {
        protocol: u32,
        scope: Scope,
        /// The GPU a GPU worker measures on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device: Option<DeviceInfo>,
        /// What a GPU worker's start took, by part.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_up: Option<StartUp>,
    },
    Built {
        id: u64,
        /// Its PTX and hash; no PTX, and its IR's hash as the key
        /// (`in_process::screened_key`), where the pre-screen rejected it
        /// before code generation or the search knows it by its IR.
        build: Build,
        /// The PTX assembled, when `cubin_for` asked, ptxas took it and
        /// `defer_assembly` did not leave it to the GPU worker.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cubin: Option<Cubin>,
        /// The pre-screen's result when it rejects the variant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        screened_out: Option<Assessment>,
        /// The guarded build, when `Compile::guarded` asked and it built.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        guarded: Option<GuardedBuild>,
        #[serde(default, skip_serializing_if = "Spent::is_zero")]
        spent: Spent,
        /// Answered early: its PTX (after code generation) or its IR (before)
        /// is one the worker was told the search knows (`Compile::skip_known`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        known: bool,
    },
    CompileFailed {
        id: u64,
        reason: String,
        #[serde(default, skip_serializing_if = "Spent::is_zero")]
        spent: Spent,
    },
    Assessed {
        id: u64,
        assessment: Assessment,
        /// The worker exits after this answer (a GPU worker whose context
        /// the variant broke); the pool replaces it at once.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        exiting: bool,
        /// The worker's time on the request, by phase.
        #[serde(default, skip_serializing_if = "Spent::is_zero")]
        spent: Spent,
        /// GPU: timing rounds per test, and whether they stopped before
        /// the full count (adaptive measurement).
        #[serde(default, skip_serializing_if = "is_zero")]
        rounds: u32,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stopped_early: bool,
        /// Of such a stop, that the variant was confidently better than
        /// the threshold (else confidently no better).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stopped_better: bool,
    },
    /// The worker cannot go on (its spec broke); it exits after this.
    Fatal { message: String },
}

impl Response {
    /// The request this answers (none for a greeting or a fatal error).
    pub fn id(&self) -> Option<u64> {
        match self {
            Response::Built { id, .. }
            | Response::CompileFailed { id, .. }
            | Response::Assessed { id, .. } => Some(*id),
            Response::Ready { .. } | Response::Fatal { .. } => None,
        }
    }

    /// A short name for logs: which answer, and for a build what it holds.
    pub fn kind(&self) -> &'static str {
        match self {
            Response::Ready { .. } => "ready",
            Response::Built { known: true, .. } => "built_known",
            Response::Built {
                screened_out: Some(_),
                ..
            } => "screened_out",
            Response::Built {
                guarded: Some(_), ..
            } => "built_guarded",
            Response::Built { .. } => "built",
            Response::CompileFailed { .. } => "compile_failed",
            Response::Assessed { .. } => "assessed",
            Response::Fatal { .. } => "fatal",
        }
    }

    /// The worker's time on the request, where the answer carries it.
    pub fn spent(&self) -> Option<&Spent> {
        match self {
            Response::Built { spent, .. }
            | Response::CompileFailed { spent, .. }
            | Response::Assessed { spent, .. } => Some(spent),
            Response::Ready { .. } | Response::Fatal { .. } => None,
        }
    }

    fn spent_mut(&mut self) -> Option<&mut Spent> {
        match self {
            Response::Built { spent, .. }
            | Response::CompileFailed { spent, .. }
            | Response::Assessed { spent, .. } => Some(spent),
            Response::Ready { .. } | Response::Fatal { .. } => None,
        }
    }

    /// Sets the CPU seconds the compile worker's request took
    /// (`Spent::compile_cpu_s`).
    pub fn with_compile_cpu(mut self, cpu_s: f64) -> Self {
        if let Some(spent) = self.spent_mut() {
            spent.compile_cpu_s = cpu_s;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gevo_ir::guard::{GuardSite, SiteKind};
    use gevo_model::assessment::TestSummary;
    use gevo_model::stats::Timing;

    fn device() -> DeviceInfo {
        DeviceInfo {
            ordinal: 1,
            uuid: "GPU-58cba95d-ca2a-6e6a-c26d-68000d48365c".into(),
            name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            driver_version: "13.0".into(),
            l2_bytes: 52_428_800,
        }
    }

    fn assessment() -> Assessment {
        Assessment {
            tests: vec![
                TestSummary {
                    test: "train[0]".into(),
                    failure: None,
                    cost: Some(4960),
                    original_cost: 4800,
                    error: Some(0.0),
                    timing: Some(Timing {
                        original_ns: vec![4800.0, 4812.5],
                        variant_ns: vec![4960.0, 4950.25],
                    }),
                    kernels: Vec::new(),
                },
                TestSummary::failed(
                    "train[1]",
                    "cuda_error",
                    "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
                ),
            ],
            device: Some(device()),
        }
    }

    /// Every message survives the wire unchanged, and the requests' text is
    /// the documented one (ARCHITECTURE.md, "worker protocol").
    #[test]
    fn messages_round_trip() {
        let scope = Scope {
            backend: "cuda".into(),
            target: device().target(),
        };
        let build = Build {
            ptx_hash: "ab".repeat(32),
            ptx: ".version 8.0\n.target sm_90\n".into(),
        };
        let empty_patch = Patch {
            format: 1,
            ir_hash: "00".into(),
            kernel: "k".into(),
            kernels: Vec::new(),
            edits: Vec::new(),
        };
        let requests = [
            (
                Request::Measure {
                    id: 7,
                    ptx: build.ptx.clone(),
                    cubin: None,
                    guarded: None,
                    set: TestSet::Heldout,
                    race: None,
                },
                r#"{"op":"measure","id":7,"ptx":".version 8.0\n.target sm_90\n","set":"heldout"}"#,
            ),
            (
                Request::Measure {
                    id: 9,
                    ptx: "x".into(),
                    cubin: Some(Cubin(b"\x7fELF".to_vec())),
                    guarded: Some(GuardedBuild {
                        ptx: "g".into(),
                        cubin: None,
                        sites: vec![GuardSite {
                            id: 1 << 20,
                            kind: SiteKind::Load,
                            instruction: Some(12),
                            function: "k".into(),
                            block: "bb1".into(),
                            source: Some("k.cu:7".into()),
                            bytes: 4,
                            argument: Some(0),
                        }],
                        protects_inputs: true,
                        poisons_shared: true,
                    }),
                    set: TestSet::Train,
                    race: Some(0.97),
                },
                r#"{"op":"measure","id":9,"ptx":"x","cubin":"f0VMRg==","guarded":{"ptx":"g","sites":[{"id":1048576,"kind":"load","instruction":12,"function":"k","block":"bb1","source":"k.cu:7","bytes":4,"argument":0}],"protects_inputs":true,"poisons_shared":true},"set":"train","race":0.97}"#,
            ),
            (
                Request::Compile {
                    id: 10,
                    patch: empty_patch.clone(),
                    prescreen: Prescreen::Smallest,
                    cubin_for: Some("sm_90".into()),
                    guarded: true,
                    defer_assembly: true,
                    known: vec!["ab".into(), "cd".into()],
                    forget: vec!["ef".into()],
                    skip_known: true,
                },
                r#"{"op":"compile","id":10,"patch":{"format":1,"ir_hash":"00","kernel":"k","edits":[]},"prescreen":"smallest","cubin_for":"sm_90","guarded":true,"defer_assembly":true,"known":["ab","cd"],"forget":["ef"],"skip_known":true}"#,
            ),
            (
                Request::Assess {
                    id: 8,
                    patch: empty_patch.clone(),
                    set: TestSet::Train,
                },
                r#"{"op":"assess","id":8,"patch":{"format":1,"ir_hash":"00","kernel":"k","edits":[]},"set":"train"}"#,
            ),
        ];
        for (request, text) in requests {
            assert_eq!(serde_json::to_string(&request).unwrap(), text);
            assert_eq!(serde_json::from_str::<Request>(text).unwrap(), request);
        }
        // A compile request from protocol 1 (no prescreen) still reads.
        let old = r#"{"op":"compile","id":3,"patch":{"format":1,"ir_hash":"00","kernel":"k","edits":[]}}"#;
        assert!(matches!(
            serde_json::from_str::<Request>(old).unwrap(),
            Request::Compile {
                prescreen: Prescreen::Off,
                ..
            }
        ));
        // One from protocol 5 (a switch) reads as the placement it meant.
        let switch = r#"{"op":"compile","id":3,"patch":{"format":1,"ir_hash":"00","kernel":"k","edits":[]},"prescreen":true}"#;
        assert!(matches!(
            serde_json::from_str::<Request>(switch).unwrap(),
            Request::Compile {
                prescreen: Prescreen::All,
                ..
            }
        ));
        let responses = [
            Response::Ready {
                protocol: PROTOCOL,
                scope: scope.clone(),
                device: Some(device()),
                start_up: Some(StartUp {
                    inputs_s: 1.5,
                    upload_s: 0.1,
                    ..StartUp::default()
                }),
            },
            Response::Built {
                id: 1,
                build: build.clone(),
                cubin: None,
                screened_out: Some(assessment()),
                guarded: None,
                spent: Spent {
                    compile_s: 0.02,
                    prescreen_s: 0.5,
                    ..Spent::default()
                },
                known: false,
            },
            Response::Built {
                id: 2,
                build: build.clone(),
                cubin: Some(Cubin(vec![0x7f, b'E', b'L', b'F', 1, 2])),
                screened_out: None,
                guarded: None,
                spent: Spent {
                    assemble_s: 0.03,
                    ..Spent::default()
                },
                known: false,
            },
            Response::Built {
                id: 5,
                build,
                cubin: None,
                screened_out: None,
                guarded: None,
                spent: Spent::default(),
                known: true,
            },
            Response::CompileFailed {
                id: 3,
                reason: "no".into(),
                spent: Spent::default(),
            },
            Response::Assessed {
                id: 4,
                assessment: assessment(),
                exiting: true,
                spent: Spent {
                    jit_load_s: 0.001,
                    check_s: 0.01,
                    timing_s: 0.25,
                    ..Spent::default()
                },
                rounds: 5,
                stopped_early: true,
                stopped_better: true,
            },
            Response::Fatal {
                message: "spec broke".into(),
            },
        ];
        // An answer as protocol 2 wrote it (no times, no rounds) still reads.
        let old = r#"{"assessed":{"id":4,"assessment":{"tests":[]}}}"#;
        assert!(matches!(
            serde_json::from_str::<Response>(old).unwrap(),
            Response::Assessed {
                rounds: 0,
                stopped_early: false,
                stopped_better: false,
                ..
            }
        ));
        // The request each answers, what the pool's trace log names it, and
        // the time it carries.
        let named: Vec<(Option<u64>, &str, Option<f64>)> = responses
            .iter()
            .map(|r| {
                (
                    r.id(),
                    r.kind(),
                    r.spent().map(|s| s.compile_worker_s() + s.gpu_s()),
                )
            })
            .collect();
        assert_eq!(
            named,
            [
                (None, "ready", None),
                (Some(1), "screened_out", Some(0.52)),
                (Some(2), "built", Some(0.03)),
                (Some(5), "built_known", Some(0.0)),
                (Some(3), "compile_failed", Some(0.0)),
                (Some(4), "assessed", Some(0.261)),
                (None, "fatal", None),
            ]
        );
        for response in responses {
            let text = serde_json::to_string(&response).unwrap();
            assert!(!text.contains('\n'), "one line: {text}");
            assert_eq!(serde_json::from_str::<Response>(&text).unwrap(), response);
        }
    }
}
