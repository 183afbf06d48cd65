//! Evaluation workers. Code generation (LLVM can abort) and simulation run
//! in child processes (`gevod eval-worker`), driven by the engine's process
//! through [`pool::WorkerPool`] over JSON lines on stdin/stdout. A crash or a
//! hang costs one variant and a respawn, never the engine.
//!
//! [`InProcess`] is the same backend without processes: the worker's request
//! handler, and a backend for tests. GPU workers (`gevod gpu-worker`) speak
//! the same protocol through their own [`Handler`]; [`gpu`] is the engine's
//! side of them. [`setup`] chooses, for `gevod evolve` and the daemon alike,
//! which of these evaluates a job.

pub mod gpu;
pub mod launch;
pub mod pool;
mod process;
pub mod sanitize;
pub mod setup;

use crate::busy::{Spent, StartUp};
use crate::cuda::toolkit::{Assembler, Cubin};
use crate::device::DeviceInfo;
use crate::eval::{Assessment, Evaluator, TestResult};
use crate::evolve::{Backend, BackendError, Build, Scope};
use crate::harness::{HarnessEvaluator, Runner};
use crate::ir::{CodegenOptions, Patch};
use crate::spec::{Spec, TestCase, TestSet};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::time::Instant;

/// Wire protocol version, sent in the worker's greeting.
pub const PROTOCOL: u32 = 3;

/// A request from the engine's process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// PTX for the patch; with `prescreen`, also runs of the train tests
    /// on the simulator, whose memory and loop faults reject the variant
    /// before it costs GPU time; with `cubin_for` (a GPU architecture,
    /// `sm_90`), a variant that passes is also assembled by ptxas, when
    /// the worker finds one, so the GPU worker loads no PTX.
    Compile {
        id: u64,
        patch: Patch,
        #[serde(default)]
        prescreen: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cubin_for: Option<String>,
    },
    /// The patch run on the simulator.
    Assess { id: u64, patch: Patch, set: TestSet },
    /// PTX checked and timed on the GPU (GPU workers only). With `race`,
    /// the timing may stop early once the variant is confidently no better
    /// than that train cost (adaptive measurement).
    Measure {
        id: u64,
        ptx: String,
        /// The PTX assembled for the worker's GPU, where a compile worker
        /// could (`Compile::cubin_for`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cubin: Option<Cubin>,
        set: TestSet,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        race: Option<f64>,
    },
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
        build: Build,
        /// The PTX assembled, when `cubin_for` asked and ptxas took it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cubin: Option<Cubin>,
        /// The pre-screen's result when it rejects the variant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        screened_out: Option<Assessment>,
        #[serde(default, skip_serializing_if = "Spent::is_zero")]
        spent: Spent,
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
    },
    /// The worker cannot go on (its spec broke); it exits after this.
    Fatal { message: String },
}

/// Compiles with LLVM and runs on the simulator (or, for harness specs,
/// runs the kernel's application), in this process.
pub struct InProcess {
    evaluation: Evaluation,
    codegen: CodegenOptions,
    /// ptxas, for `Compile::cubin_for`; found when first asked.
    assembler: Option<Option<Assembler>>,
    /// The train tests the pre-screen runs, least input first.
    screen_tests: Vec<TestCase>,
}

/// Simulator verdicts that reject a variant in the pre-screen: undefined
/// behaviour or a runaway loop on the GPU. Mismatches and unsupported
/// instructions are left for the GPU to judge.
const SCREENED_OUT: [&str; 6] = [
    "out_of_bounds",
    "race",
    "global_race",
    "uninitialized_shared",
    "step_budget",
    "unreachable",
];

/// How variants are run: the spec's own launches on the simulator, or the
/// spec's harness command.
enum Evaluation {
    // Boxed: both are large, and of different sizes.
    Kernel(Box<Evaluator>),
    Harness(Box<HarnessEvaluator>),
}

impl InProcess {
    /// A harness spec's worker: its command runs each variant.
    pub fn harness(
        spec: Spec,
        codegen: CodegenOptions,
        runner: Runner,
        user: Option<(u32, u32)>,
    ) -> Result<Self, crate::harness::HarnessError> {
        Ok(InProcess {
            evaluation: Evaluation::Harness(Box::new(HarnessEvaluator::new(
                spec,
                codegen.clone(),
                runner,
                user,
            )?)),
            codegen,
            screen_tests: Vec::new(),
            assembler: None,
        })
    }

    pub fn new(spec: Spec, codegen: CodegenOptions) -> Result<Self, crate::eval::EvalError> {
        let mut by_size = Vec::new();
        for test in spec.tests(TestSet::Train) {
            by_size.push((spec.buffer_bytes(test)?, test.clone()));
        }
        by_size.sort_by_key(|(bytes, _)| *bytes);
        let screen_tests = by_size.into_iter().map(|(_, t)| t).collect();
        // One simulator thread: parallelism comes from running several workers.
        let evaluator = Evaluator::new(spec, 1)?;
        Ok(InProcess {
            evaluation: Evaluation::Kernel(Box::new(evaluator)),
            codegen,
            screen_tests,
            assembler: None,
        })
    }

    /// The pre-screen: the patch on the simulator's train tests, least
    /// input first; the assessment of the first test where a fault rejects
    /// the variant. Every train test, not only the smallest: a loop that
    /// runs away or an index that leaves its buffer often shows only at
    /// a larger size, and each such variant that reaches the GPU costs a
    /// GPU worker (a timeout or a lost context), whose replacement spends
    /// seconds uploading its tests; compile workers have the time.
    pub fn screen(&self, patch: &Patch) -> Result<Option<Assessment>, BackendError> {
        let Evaluation::Kernel(evaluator) = &self.evaluation else {
            return Ok(None);
        };
        let screened_out = |r: &TestResult| {
            r.failure
                .as_ref()
                .is_some_and(|f| SCREENED_OUT.contains(&f.kind()))
        };
        let tests: Vec<&TestCase> = self.screen_tests.iter().collect();
        let results = evaluator
            .evaluate_until(patch, &tests, screened_out)
            .map_err(|e| {
                BackendError::Failed(format!(
                    "the GPU backend's pre-screen (each new variant runs on the simulator's train tests before the GPU; --no-prescreen or [gpu] prescreen = false skips it) cannot judge variants: {e}"
                ))
            })?;
        let Some(rejecting) = results.last().filter(|r| screened_out(r)) else {
            return Ok(None);
        };
        let mut a = Assessment::new(std::slice::from_ref(rejecting));
        let (kind, message) = a.tests[0].failure.take().expect("rejected");
        a.tests[0].failure = Some((kind, format!("pre-screen on the simulator: {message}")));
        Ok(Some(a))
    }

    /// `ptx` assembled for `arch`, or none where no ptxas is found or it
    /// rejects the PTX (the GPU worker then loads the PTX its own way).
    fn assemble(&mut self, ptx: &str, arch: &str) -> Option<Cubin> {
        let assembler = self
            .assembler
            .get_or_insert_with(Assembler::find)
            .as_ref()?;
        assembler
            .assemble(ptx, arch)
            .inspect_err(|e| tracing::debug!("no cubin: {e}"))
            .ok()
    }

    pub fn compile_one(&self, patch: &Patch) -> Result<Build, String> {
        let ir = match &self.evaluation {
            Evaluation::Kernel(e) => e.ir(),
            Evaluation::Harness(h) => h.ir(),
        };
        ir.compile(patch, &self.codegen)
            .map(|c| Build {
                ptx_hash: c.ptx_hash,
                ptx: c.ptx,
            })
            .map_err(|e| e.to_string())
    }

    pub fn assess_one(&self, patch: &Patch, set: TestSet) -> Result<Assessment, BackendError> {
        match &self.evaluation {
            Evaluation::Kernel(e) => e
                .evaluate(patch, set)
                .map(|r| Assessment::new(&r))
                .map_err(|e| BackendError::Failed(e.to_string())),
            Evaluation::Harness(h) => h
                .assess(patch, set)
                .map_err(|e| BackendError::Failed(e.to_string())),
        }
    }

    fn spec(&self) -> &Spec {
        match &self.evaluation {
            Evaluation::Kernel(e) => e.spec(),
            Evaluation::Harness(h) => h.spec(),
        }
    }
}

impl Backend for InProcess {
    fn scope(&self) -> Scope {
        let backend = match &self.evaluation {
            Evaluation::Kernel(_) => "sim",
            Evaluation::Harness(h) => h.runner().backend_name(),
        };
        Scope {
            backend: backend.into(),
            target: self.codegen.arch.clone(),
        }
    }

    fn test_set_hash(&self, set: TestSet) -> String {
        self.spec().test_set_hash(set)
    }

    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        Ok(patches.iter().map(|p| self.compile_one(p)).collect())
    }

    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError> {
        patches.iter().map(|p| self.assess_one(p, set)).collect()
    }
}

/// A planted misbehaviour, for the supervision tests: on a compile request
/// whose patch has `edits` edits, the worker aborts, hangs, or answers a line
/// that is not JSON. Set through `GEVOD_WORKER_FAULT=<kind>:<edits>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub edits: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Abort,
    Hang,
    Garbage,
}

impl std::str::FromStr for Fault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected abort|hang|garbage:<edits>, not {s:?}");
        let (kind, edits) = s.split_once(':').ok_or_else(bad)?;
        let kind = match kind {
            "abort" => FaultKind::Abort,
            "hang" => FaultKind::Hang,
            "garbage" => FaultKind::Garbage,
            _ => return Err(bad()),
        };
        Ok(Fault {
            kind,
            edits: edits.parse().map_err(|_| bad())?,
        })
    }
}

/// What a worker process does with requests.
pub trait Handler {
    fn scope(&self) -> Scope;
    /// The GPU it measures on, for the greeting.
    fn device(&self) -> Option<DeviceInfo> {
        None
    }
    /// What the worker's start took, for the greeting (GPU workers).
    fn start_up(&self) -> Option<StartUp> {
        None
    }
    /// The response, and whether the worker must exit after sending it; an
    /// `Err` ends the worker with `Fatal`.
    fn handle(&mut self, request: Request) -> Result<(Response, bool), String>;
}

impl Handler for InProcess {
    fn scope(&self) -> Scope {
        Backend::scope(self)
    }

    fn handle(&mut self, request: Request) -> Result<(Response, bool), String> {
        let response = match request {
            Request::Compile {
                id,
                patch,
                prescreen,
                cubin_for,
            } => {
                let mut spent = Spent::default();
                let started = Instant::now();
                let built = self.compile_one(&patch);
                spent.compile_s = started.elapsed().as_secs_f64();
                match built {
                    Ok(build) => {
                        let started = Instant::now();
                        let screened_out = if prescreen {
                            self.screen(&patch).map_err(|e| e.to_string())?
                        } else {
                            None
                        };
                        spent.prescreen_s = started.elapsed().as_secs_f64();
                        let started = Instant::now();
                        let cubin = match (&cubin_for, &screened_out) {
                            (Some(arch), None) => self.assemble(&build.ptx, arch),
                            _ => None,
                        };
                        spent.assemble_s = started.elapsed().as_secs_f64();
                        Response::Built {
                            id,
                            build,
                            cubin,
                            screened_out,
                            spent,
                        }
                    }
                    Err(reason) => Response::CompileFailed { id, reason, spent },
                }
            }
            Request::Assess { id, patch, set } => Response::Assessed {
                id,
                assessment: self.assess_one(&patch, set).map_err(|e| e.to_string())?,
                exiting: false,
                spent: Spent::default(),
                rounds: 0,
                stopped_early: false,
            },
            Request::Measure { .. } => {
                return Err("this worker has no GPU; measure requests go to gpu-worker".into())
            }
        };
        Ok((response, false))
    }
}

/// The worker's loop: greet, then answer each request line until stdin
/// closes. A request that is not valid JSON ends the worker with `Fatal`.
pub fn serve(
    handler: Result<&mut dyn Handler, String>,
    fault: Option<Fault>,
    input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    fn send(output: &mut impl Write, r: &Response) -> std::io::Result<()> {
        serde_json::to_writer(&mut *output, r)?;
        output.write_all(b"\n")?;
        output.flush()
    }
    let handler = match handler {
        Ok(h) => h,
        Err(message) => return send(&mut output, &Response::Fatal { message }),
    };
    send(
        &mut output,
        &Response::Ready {
            protocol: PROTOCOL,
            scope: handler.scope(),
            device: handler.device(),
            start_up: handler.start_up(),
        },
    )?;
    for line in input.lines() {
        let line = line?;
        let request: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                return send(
                    &mut output,
                    &Response::Fatal {
                        message: format!("unreadable request: {e}"),
                    },
                )
            }
        };
        if let (Some(f), Request::Compile { patch, .. }) = (fault, &request) {
            if patch.edits.len() == f.edits {
                match f.kind {
                    FaultKind::Abort => std::process::abort(),
                    FaultKind::Hang => loop {
                        std::thread::sleep(std::time::Duration::from_secs(3600));
                    },
                    FaultKind::Garbage => {
                        output.write_all(b"this is not a response\n")?;
                        output.flush()?;
                        continue;
                    }
                }
            }
        }
        match handler.handle(request) {
            Ok((response, exit)) => {
                send(&mut output, &response)?;
                if exit {
                    return Ok(());
                }
            }
            Err(message) => return send(&mut output, &Response::Fatal { message }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::TestSummary;
    use crate::stats::Timing;

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
                    set: TestSet::Train,
                    race: Some(0.97),
                },
                r#"{"op":"measure","id":9,"ptx":"x","cubin":"f0VMRg==","set":"train","race":0.97}"#,
            ),
            (
                Request::Compile {
                    id: 10,
                    patch: empty_patch.clone(),
                    prescreen: true,
                    cubin_for: Some("sm_90".into()),
                },
                r#"{"op":"compile","id":10,"patch":{"format":1,"ir_hash":"00","kernel":"k","edits":[]},"prescreen":true,"cubin_for":"sm_90"}"#,
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
                prescreen: false,
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
                spent: Spent {
                    compile_s: 0.02,
                    prescreen_s: 0.5,
                    ..Spent::default()
                },
            },
            Response::Built {
                id: 2,
                build,
                cubin: Some(Cubin(vec![0x7f, b'E', b'L', b'F', 1, 2])),
                screened_out: None,
                spent: Spent {
                    assemble_s: 0.03,
                    ..Spent::default()
                },
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
                ..
            }
        ));
        for response in responses {
            let text = serde_json::to_string(&response).unwrap();
            assert!(!text.contains('\n'), "one line: {text}");
            assert_eq!(serde_json::from_str::<Response>(&text).unwrap(), response);
        }
    }
}
