//! Fault injection for the supervision tests (`GEVOD_WORKER_FAULT`).

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
