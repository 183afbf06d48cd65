//! Kernel names and targets as path components of the export: checked
//! before any path is formed, so a name never leaves `<state>/exports`.

use super::ExportError;

/// What a kernel name may be: the daemon's `<project>/<name>` (each part
/// made of these characters, serve/scan.rs's `sanitize`), or a bare
/// `<name>` that one project has.
const KERNEL_RULE: &str =
    "a kernel is <project>/<name> or <name>, of letters, digits, '.', '_' and '-'";
const TARGET_RULE: &str = "a target is one name of letters, digits, '.', '_' and '-', like sm_90";

/// Why `name` cannot be a path of at most `parts` components below a
/// directory, or `None` when it can.
fn name_fault(name: &str, parts: usize) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    if name.contains('\0') {
        return Some("it holds a NUL byte".into());
    }
    if name.starts_with('/') {
        return Some("it is an absolute path".into());
    }
    let components: Vec<&str> = name.split('/').collect();
    for part in &components {
        match *part {
            "" => return Some("it has an empty component".into()),
            "." | ".." => return Some(format!("it has a {part:?} component")),
            _ => {}
        }
        let allowed = |c: &char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if let Some(c) = part.chars().find(|c| !allowed(c)) {
            return Some(format!("it holds {c:?}"));
        }
    }
    if components.len() > parts {
        return Some(format!("it has {} components", components.len()));
    }
    None
}

/// A kernel name as a command line or a request gives it: `<project>/<name>`
/// or `<name>`, each part of `[A-Za-z0-9._-]` and neither `.` nor `..`.
/// Anything else (`../x`, `/abs/x`, `a//b`, `a/../../b`) is
/// [`ExportError::BadName`] quoting it: it would name a directory outside
/// the export.
pub fn check_kernel_name(name: &str) -> Result<(), ExportError> {
    match name_fault(name, 2) {
        None => Ok(()),
        Some(why) => Err(ExportError::BadName {
            what: "kernel name",
            name: name.to_string(),
            why,
            rule: KERNEL_RULE,
        }),
    }
}

/// A target (`sm_90`) as `--arch` or a record gives it: one file name's
/// worth of `[A-Za-z0-9._-]`.
pub fn check_target(target: &str) -> Result<(), ExportError> {
    match name_fault(target, 1) {
        None => Ok(()),
        Some(why) => Err(ExportError::BadName {
            what: "target",
            name: target.to_string(),
            why,
            rule: TARGET_RULE,
        }),
    }
}
