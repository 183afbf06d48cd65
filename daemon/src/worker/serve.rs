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
