//! A worker process's loop: the greeting, then one answer per request line.

use super::{Fault, FaultKind, Request, Response, PROTOCOL};
use gevo_model::device::DeviceInfo;
use gevo_model::utilization::StartUp;
use gevo_search::evolve::Scope;
use std::io::{BufRead, Write};

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
        let compile_request = !matches!(request, Request::Measure { .. });
        let cpu_before = compile_request.then(process_cpu_s);
        match handler.handle(request) {
            Ok((response, exit)) => {
                let response = match cpu_before {
                    Some(before) => response.with_compile_cpu(process_cpu_s() - before),
                    None => response,
                };
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

/// This process's CPU seconds, user and system, with those of its children
/// waited for (a compile worker's ptxas and nvlink runs).
fn process_cpu_s() -> f64 {
    let seconds = |who| {
        // SAFETY: getrusage writes one rusage into the zeroed value it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut usage) } != 0 {
            return 0.0;
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        tv(usage.ru_utime) + tv(usage.ru_stime)
    };
    seconds(libc::RUSAGE_SELF) + seconds(libc::RUSAGE_CHILDREN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gevo_model::spec::TestSet;
    use gevo_model::utilization::Spent;

    /// Burns about 60 ms of CPU on each request, and answers how it did.
    struct Burner;

    impl Handler for Burner {
        fn scope(&self) -> Scope {
            Scope {
                backend: "test".into(),
                target: "-".into(),
            }
        }
        fn handle(&mut self, request: Request) -> Result<(Response, bool), String> {
            let until = std::time::Instant::now() + std::time::Duration::from_millis(60);
            let mut spins = 0u64;
            while std::time::Instant::now() < until {
                spins = std::hint::black_box(spins + 1);
            }
            Ok((
                Response::CompileFailed {
                    id: request.id(),
                    reason: format!("{spins} spins"),
                    spent: Spent::default(),
                },
                false,
            ))
        }
    }

    /// A compile worker's answers carry the CPU its request took; a GPU
    /// worker's measurements do not (their host time is the GPU's phases).
    #[test]
    fn compile_requests_are_answered_with_their_cpu_seconds() {
        let patch: gevo_ir::Patch = serde_json::from_value(serde_json::json!({
            "format": 1, "ir_hash": "00", "kernel": "k", "edits": []
        }))
        .unwrap();
        let measure = Request::Measure {
            id: 2,
            ptx: String::new(),
            cubin: None,
            guarded: None,
            set: TestSet::Train,
            race: None,
        };
        let lines: Vec<String> = [Request::compile(1, patch), measure]
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        let mut output = Vec::new();
        serve(
            Ok(&mut Burner),
            None,
            lines.join("\n").as_bytes(),
            &mut output,
        )
        .unwrap();
        let answers: Vec<Response> = String::from_utf8(output)
            .unwrap()
            .lines()
            .skip(1) // the greeting
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let cpu: Vec<f64> = answers
            .iter()
            .map(|a| a.spent().unwrap().compile_cpu_s)
            .collect();
        assert!((0.03..1.0).contains(&cpu[0]), "{cpu:?}");
        assert_eq!(cpu[1], 0.0);
    }
}
