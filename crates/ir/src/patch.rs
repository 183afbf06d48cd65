//! Patches: the ordered list of GEVO edits that, replayed on the original IR,
//! rebuilds a variant. Plain data with a versioned JSON form; no LLVM here.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The patch format this build writes and reads. Older formats are read by
/// migrating them; newer ones are refused (see `Patch::check_format`).
pub const PATCH_FORMAT: u32 = 1;

/// Names one instruction of the kernel function. Instructions present on load
/// are numbered 0.. in function order (blocks in order, instructions in block
/// order); an instruction created by an edit gets the id recorded in that edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InstId(pub u32);

impl fmt::Display for InstId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "i{}", self.0)
    }
}

/// A value an operand can be set to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueRef {
    /// The result of an instruction.
    Inst(InstId),
    /// The kernel's n-th parameter.
    Arg(u32),
    /// A constant of the operand's type.
    Const(ConstKind),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstKind {
    /// `zeroinitializer`: 0, 0.0, null.
    Zero,
    /// 1 or 1.0 (integer and floating-point types only).
    One,
}

impl fmt::Display for ValueRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueRef::Inst(id) => write!(f, "{id}"),
            ValueRef::Arg(n) => write!(f, "arg{n}"),
            ValueRef::Const(ConstKind::Zero) => f.write_str("zero"),
            ValueRef::Const(ConstKind::One) => f.write_str("one"),
        }
    }
}

/// One operand set by SSA repair (or, for a copy, the wiring of the clone's
/// result into a later use). Recorded so that replay needs no randomness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Repair {
    pub user: InstId,
    pub operand: u32,
    pub value: ValueRef,
}

/// The six GEVO edit kinds. Positions are "before instruction X"; X may have
/// been deleted by an earlier edit, in which case the position it had is used.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum EditKind {
    /// Clone `src` and insert the clone, named `clone`, before `before`.
    Copy {
        src: InstId,
        before: InstId,
        clone: InstId,
    },
    /// Remove `target`; its uses are repaired first.
    Delete { target: InstId },
    /// Move `src` to just before `before`.
    Move { src: InstId, before: InstId },
    /// Put a clone of `with`, named `clone`, in place of `target` (same result type).
    Replace {
        target: InstId,
        with: InstId,
        clone: InstId,
    },
    /// Exchange the positions of `a` and `b`.
    Swap { a: InstId, b: InstId },
    /// Set operand `operand` of `user` to `value`.
    OperandReplace {
        user: InstId,
        operand: u32,
        value: ValueRef,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Edit {
    #[serde(flatten)]
    pub kind: EditKind,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<Repair>,
}

impl fmt::Display for Edit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            EditKind::Copy { src, before, clone } => {
                write!(f, "copy {src} before {before} as {clone}")?
            }
            EditKind::Delete { target } => write!(f, "delete {target}")?,
            EditKind::Move { src, before } => write!(f, "move {src} before {before}")?,
            EditKind::Replace {
                target,
                with,
                clone,
            } => write!(f, "replace {target} with a clone of {with} as {clone}")?,
            EditKind::Swap { a, b } => write!(f, "swap {a} and {b}")?,
            EditKind::OperandReplace {
                user,
                operand,
                value,
            } => write!(f, "set operand {operand} of {user} to {value}")?,
        }
        for r in &self.repairs {
            write!(
                f,
                "; repair operand {} of {} := {}",
                r.operand, r.user, r.value
            )?;
        }
        Ok(())
    }
}

impl Edit {
    /// The id this edit gives to the instruction it creates (Copy, Replace).
    pub fn created_id(&self) -> Option<InstId> {
        match self.kind {
            EditKind::Copy { clone, .. } | EditKind::Replace { clone, .. } => Some(clone),
            _ => None,
        }
    }

    /// Every instruction id this edit mentions (positions, values, created
    /// ids, repairs), in a fixed order.
    pub fn ids(&self) -> Vec<InstId> {
        let mut copy = self.clone();
        copy.ids_mut().into_iter().map(|id| *id).collect()
    }

    /// Renames every instruction id this edit mentions through `map`.
    pub fn remap_ids(&mut self, mut map: impl FnMut(InstId) -> InstId) {
        for id in self.ids_mut() {
            *id = map(*id);
        }
    }

    fn ids_mut(&mut self) -> Vec<&mut InstId> {
        let mut ids: Vec<&mut InstId> = match &mut self.kind {
            EditKind::Copy { src, before, clone } => vec![src, before, clone],
            EditKind::Delete { target } => vec![target],
            EditKind::Move { src, before } => vec![src, before],
            EditKind::Replace {
                target,
                with,
                clone,
            } => vec![target, with, clone],
            EditKind::Swap { a, b } => vec![a, b],
            EditKind::OperandReplace { user, value, .. } => {
                let mut v = vec![user];
                if let ValueRef::Inst(id) = value {
                    v.push(id);
                }
                v
            }
        };
        for r in &mut self.repairs {
            ids.push(&mut r.user);
            if let ValueRef::Inst(id) = &mut r.value {
                ids.push(id);
            }
        }
        ids
    }
}

/// A variant of one kernel: the edits to replay on the original IR.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Patch {
    pub format: u32,
    /// Content hash of the original IR the edits were made against
    /// (`KernelIr::ir_hash`): replaying on other IR is refused.
    pub ir_hash: String,
    /// The kernel's symbol (mangled) in that IR; a pipeline's first kernel.
    pub kernel: String,
    /// A pipeline's kernels, all of them in order (the first is `kernel`);
    /// empty for one kernel, so single-kernel patches read as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<String>,
    pub edits: Vec<Edit>,
}

impl Patch {
    pub fn new(ir_hash: impl Into<String>, kernel: impl Into<String>) -> Self {
        Patch {
            format: PATCH_FORMAT,
            ir_hash: ir_hash.into(),
            kernel: kernel.into(),
            kernels: Vec::new(),
            edits: Vec::new(),
        }
    }

    /// Parse the JSON form, refusing formats newer than this build's.
    pub fn from_json(text: &str) -> Result<Self, PatchFormatError> {
        let json = |e: serde_json::Error| PatchFormatError::Json(e.to_string());
        // serde reads a struct from a list too ("invalid length 0, expected
        // struct Header"): say what a patch is instead.
        let value: serde_json::Value = serde_json::from_str(text).map_err(json)?;
        let Some(object) = value.as_object() else {
            return Err(PatchFormatError::Json(format!(
                "{}, not {}",
                PATCH_SHAPE,
                json_kind(&value)
            )));
        };
        let format = match object.get("format") {
            Some(f) => f.as_u64().and_then(|f| u32::try_from(f).ok()).ok_or_else(|| {
                PatchFormatError::Json(format!(
                    "\"format\" is the patch format's version, a whole number like {PATCH_FORMAT}, not {f}"
                ))
            })?,
            None => {
                return Err(PatchFormatError::Json(format!(
                    "{PATCH_SHAPE}; this one has no \"format\""
                )))
            }
        };
        if format > PATCH_FORMAT {
            return Err(PatchFormatError::TooNew {
                found: format,
                supported: PATCH_FORMAT,
            });
        }
        // Format 1 is the first; a future format 2 would migrate older ones here.
        serde_json::from_str(text).map_err(json)
    }

    /// The kernels the patch spans: `kernels`, or `kernel` alone.
    pub fn kernel_list(&self) -> Vec<&str> {
        if self.kernels.is_empty() {
            vec![self.kernel.as_str()]
        } else {
            self.kernels.iter().map(String::as_str).collect()
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("patch serialization cannot fail")
    }
}

/// What a patch file is, in the format's words (docs/patches.md).
const PATCH_SHAPE: &str =
    "a patch is a JSON object with \"format\", \"ir_hash\", \"kernel\" and \"edits\" (docs/patches.md)";

/// `an array`, `a string`: what a JSON value is, for messages.
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "true or false",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchFormatError {
    #[error("not a valid patch: {0}")]
    Json(String),
    #[error("patch format {found} is newer than this gevod supports (format {supported})")]
    TooNew { found: u32, supported: u32 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_shape() {
        let mut patch = Patch::new("abc", "k");
        patch.edits.push(Edit {
            kind: EditKind::Copy {
                src: InstId(3),
                before: InstId(7),
                clone: InstId(100),
            },
            repairs: vec![Repair {
                user: InstId(100),
                operand: 1,
                value: ValueRef::Arg(0),
            }],
        });
        patch.edits.push(Edit {
            kind: EditKind::OperandReplace {
                user: InstId(9),
                operand: 0,
                value: ValueRef::Const(ConstKind::One),
            },
            repairs: vec![],
        });
        let json = patch.to_json();
        assert!(json.contains(r#""op": "copy""#), "{json}");
        assert!(
            json.contains(r#""value": "one""#) || json.contains(r#""const": "one""#),
            "{json}"
        );
        assert_eq!(Patch::from_json(&json).unwrap(), patch);
    }

    #[test]
    fn newer_format_is_refused() {
        let err = Patch::from_json(r#"{"format": 7, "ir_hash": "x", "kernel": "k", "edits": []}"#)
            .unwrap_err();
        assert_eq!(
            err,
            PatchFormatError::TooNew {
                found: 7,
                supported: 1
            }
        );
        assert!(matches!(
            Patch::from_json("{"),
            Err(PatchFormatError::Json(_))
        ));
    }

    #[test]
    fn what_is_not_a_patch_is_told_in_the_format_s_words() {
        let shape = "not a valid patch: a patch is a JSON object with \"format\", \"ir_hash\", \"kernel\" and \"edits\" (docs/patches.md)";
        for (text, expected) in [
            ("[]", format!("{shape}, not an array")),
            ("[1, 2]", format!("{shape}, not an array")),
            ("\"patch\"", format!("{shape}, not a string")),
            ("null", format!("{shape}, not null")),
            ("{}", format!("{shape}; this one has no \"format\"")),
            (
                r#"{"format": "1"}"#,
                "not a valid patch: \"format\" is the patch format's version, a whole number like 1, not \"1\"".into(),
            ),
            (
                r#"{"format": 1, "kernel": "k", "edits": []}"#,
                "not a valid patch: missing field `ir_hash` at line 1 column 41".into(),
            ),
        ] {
            let err = Patch::from_json(text).unwrap_err().to_string();
            assert_eq!(err, expected, "{text}");
        }
    }
}
