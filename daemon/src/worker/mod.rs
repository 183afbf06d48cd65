//! Evaluation workers. Code generation (LLVM can abort) and simulation run
//! in child processes (`gevod eval-worker`), driven by the engine's process
//! through [`pool::WorkerPool`] over JSON lines on stdin/stdout. A crash or a
//! hang costs one variant and a respawn, never the engine.
//!
//! [`InProcess`] is the same backend without processes: the worker's request
//! handler, and a backend for tests.

pub mod pool;

use crate::eval::{Assessment, Evaluator};
use crate::evolve::{Backend, BackendError, Build, Scope};
use crate::ir::{CodegenOptions, Patch};
use crate::spec::{Spec, TestSet};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// Wire protocol version, sent in the worker's greeting.
pub const PROTOCOL: u32 = 1;

/// A request from the engine's process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Compile { id: u64, patch: Patch },
    Assess { id: u64, patch: Patch, set: TestSet },
}

impl Request {
    pub fn id(&self) -> u64 {
        match self {
            Request::Compile { id, .. } | Request::Assess { id, .. } => *id,
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
    },
    Built {
        id: u64,
        build: Build,
    },
    CompileFailed {
        id: u64,
        reason: String,
    },
    Assessed {
        id: u64,
        assessment: Assessment,
    },
    /// The worker cannot go on (its spec broke); it exits after this.
    Fatal {
        message: String,
    },
}

/// Compiles with LLVM and runs on the simulator, in this process.
pub struct InProcess {
    evaluator: Evaluator,
    codegen: CodegenOptions,
}

impl InProcess {
    pub fn new(spec: Spec, codegen: CodegenOptions) -> Result<Self, crate::eval::EvalError> {
        // One simulator thread: parallelism comes from running several workers.
        let evaluator = Evaluator::new(spec, 1)?;
        Ok(InProcess { evaluator, codegen })
    }

    pub fn compile_one(&self, patch: &Patch) -> Result<Build, String> {
        self.evaluator
            .ir()
            .compile(patch, &self.codegen)
            .map(|c| Build {
                ptx_hash: c.ptx_hash,
                ptx: c.ptx,
            })
            .map_err(|e| e.to_string())
    }

    pub fn assess_one(&self, patch: &Patch, set: TestSet) -> Result<Assessment, BackendError> {
        self.evaluator
            .evaluate(patch, set)
            .map(|r| Assessment::new(&r))
            .map_err(|e| BackendError::Failed(e.to_string()))
    }
}

impl Backend for InProcess {
    fn scope(&self) -> Scope {
        Scope {
            backend: "sim".into(),
            target: self.codegen.arch.clone(),
        }
    }

    fn test_set_hash(&self, set: TestSet) -> String {
        self.evaluator.spec().test_set_hash(set)
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

/// The worker's loop: greet, then answer each request line until stdin
/// closes. A request that is not valid JSON ends the worker with `Fatal`.
pub fn serve(
    backend: Result<InProcess, String>,
    fault: Option<Fault>,
    input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    fn send(output: &mut impl Write, r: &Response) -> std::io::Result<()> {
        serde_json::to_writer(&mut *output, r)?;
        output.write_all(b"\n")?;
        output.flush()
    }
    let backend = match backend {
        Ok(b) => b,
        Err(message) => return send(&mut output, &Response::Fatal { message }),
    };
    send(
        &mut output,
        &Response::Ready {
            protocol: PROTOCOL,
            scope: backend.scope(),
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
        let response = match request {
            Request::Compile { id, patch } => match backend.compile_one(&patch) {
                Ok(build) => Response::Built { id, build },
                Err(reason) => Response::CompileFailed { id, reason },
            },
            Request::Assess { id, patch, set } => match backend.assess_one(&patch, set) {
                Ok(assessment) => Response::Assessed { id, assessment },
                Err(e) => {
                    return send(
                        &mut output,
                        &Response::Fatal {
                            message: e.to_string(),
                        },
                    )
                }
            },
        };
        send(&mut output, &response)?;
    }
    Ok(())
}
