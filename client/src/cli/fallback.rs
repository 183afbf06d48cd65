//! The commands a build runs, `best` and `report`: the daemon's answer,
//! else the export in a state directory when the daemon cannot be reached
//! or turns the client away as busy (`CallError::is_unreachable`).

use super::daemon::{call, ExportDir, Settings};
use super::render::{json_text, reply_kind};
use crate::{exit, print_out, say, EXIT_ERROR, EXIT_NO_VARIANT, EXIT_UNREACHABLE};
use anyhow::{bail, Context, Result};
use gevo_client::export::{self, ExportError};
use gevo_client::files;
use gevo_client::proto::{Best, Body, Command, ErrorCode, Reply, Request};
use gevo_client::transport::CallError;
use std::path::Path;

/// Where a `best` answer came from.
enum Source {
    Daemon,
    /// The export in this state dir (with the daemon record that named
    /// it); why the daemon did not answer ([`no_answer`]).
    Export(ExportDir, String),
}

/// Why the daemon did not answer, as the fallback says it: "daemon
/// unreachable: no socket there", "daemon busy: too many connections ...".
fn no_answer(e: &CallError) -> String {
    let what = if e.is_busy() { "busy" } else { "unreachable" };
    format!("daemon {what}: {}", e.reason())
}

/// The first export `read` takes among the state directories the
/// settings name (`Settings::export_dirs`), with its directory; else why
/// none could be used: each directory's reason, and each daemon record's
/// that could not be used.
fn first_export<T>(
    settings: &Settings,
    kernel: &str,
    read: impl Fn(&Path) -> Result<T, ExportError>,
) -> Result<(T, ExportDir), String> {
    let (dirs, notes) = settings.export_dirs();
    let mut why = Vec::new();
    for dir in dirs {
        match read(&dir.state) {
            Ok(found) => return Ok((found, dir)),
            Err(e) => {
                let failure = export_failure(&e, kernel, &dir.state);
                why.push(match &dir.record {
                    Some(r) => format!("{failure} (the state directory {} names)", r.display()),
                    None => failure,
                });
            }
        }
    }
    why.extend(notes);
    Err(why.join("; "))
}

/// `in <state>`, and the record that named it.
fn export_place(dir: &ExportDir) -> String {
    match &dir.record {
        Some(r) => format!(
            "{} (the state directory {} names)",
            dir.state.display(),
            r.display()
        ),
        None => dir.state.display().to_string(),
    }
}

/// The most of a spec file `best --spec` reads to hash it (specs are a few
/// kilobytes).
const SPEC_CAP: u64 = 1 << 20;

/// What `best` asks for.
pub struct Query<'a> {
    pub kernel: &'a str,
    pub arch: Option<&'a str>,
    /// The build's spec file, for the daemon to say what it knows of it.
    pub spec: Option<&'a Path>,
}

pub fn best(settings: &Settings, query: &Query, output: Option<&Path>, json: bool) -> Result<()> {
    let (kernel, arch) = (query.kernel, query.arch);
    // The spec as this build sees it; unreadable, the daemon says less.
    let spec_hash = query
        .spec
        .and_then(|p| gevo_client::files::read_capped(p, SPEC_CAP).ok())
        .map(|bytes| gevo_client::export::sha256_hex(&bytes));
    let request = Request::new(Command::Best {
        kernel: kernel.to_string(),
        arch: arch.map(str::to_string),
        spec: query.spec.map(Path::to_path_buf),
        spec_hash,
    });
    let (best, source) = match call(settings, &request) {
        Ok(response) => match response.body {
            Body::Ok(Reply::Best(best)) => (best, Source::Daemon),
            Body::Ok(other) => bail!("gevod answered best with {}", reply_kind(&other)),
            Body::Error(e) => {
                let code = match e.code {
                    ErrorCode::NoValidated | ErrorCode::UnknownKernel | ErrorCode::Pending => {
                        EXIT_NO_VARIANT
                    }
                    _ => EXIT_ERROR,
                };
                return Err(exit(code, e.message));
            }
        },
        Err(e) if e.is_unreachable() => {
            match first_export(settings, kernel, |state| export::read(state, kernel, arch)) {
                Ok((best, dir)) => (best, Source::Export(dir, no_answer(&e))),
                Err(why) => return Err(exit(EXIT_UNREACHABLE, format!("{e}; {why}"))),
            }
        }
        Err(e) => return Err(e.into()),
    };
    check_best(&best, arch)?;

    let r = &best.record;
    let (lo, hi) = r.interval;
    let from = match &source {
        Source::Daemon => "from the daemon".to_string(),
        Source::Export(dir, why) => format!("from the export in {}, {why}", export_place(dir)),
    };
    let mut note = format!(
        "{} {}: validated variant, speedup {:.3}x [{lo:.2}, {hi:.2}]{} ({from})",
        r.kernel,
        r.target,
        r.speedup,
        gevo_client::proto::measured_on_long(&r.backend)
    );
    if let Some(c) = &r.configuration {
        let constants: Vec<String> = c.iter().map(|(k, v)| format!("{k}={v}")).collect();
        note += &format!(
            "; built with {} (the spec's [tune] constants: a build that uses this PTX defines them so)",
            constants.join(" ")
        );
    }
    if let Some(path) = output {
        let changed = write_if_changed(path, best.ptx.as_bytes())?;
        let verb = if changed { "wrote" } else { "unchanged:" };
        note += &format!("; {verb} {}", path.display());
    }
    if json {
        let mut value = serde_json::to_value(&best).expect("best serializes");
        let tag = match source {
            Source::Daemon => "daemon",
            Source::Export(..) => "export",
        };
        value["source"] = tag.into();
        print_out(&json_text(&value))?;
    } else if output.is_none() {
        print_out(&best.ptx)?;
    }
    say(&note);
    Ok(())
}

/// The minimized patch of the kernel's best validated variant, as the
/// JSON file `gevod run --patch` replays; only from the daemon (the
/// export holds PTX, not patches).
pub fn patch(settings: &Settings, kernel: &str, output: Option<&Path>, json: bool) -> Result<()> {
    let command = Command::Patch {
        kernel: kernel.to_string(),
    };
    let file = match super::daemon::ask(settings, command)? {
        Reply::Patch(file) => file,
        other => bail!("gevod answered patch with {}", reply_kind(&other)),
    };
    let note = format!(
        "{} (job {}): the patch of the validated variant, speedup {:.3}x{}",
        file.kernel,
        file.job,
        file.speedup,
        gevo_client::proto::measured_on_long(&file.backend)
    );
    match output {
        Some(path) => {
            refuse_special(path).context("cannot write the patch")?;
            export::write_atomic(path, file.patch.as_bytes()).context("cannot write the patch")?;
            say(&format!("{note}; wrote {}", path.display()));
        }
        None if json => print_out(&json_text(
            &serde_json::to_value(&file).expect("a patch serializes"),
        ))?,
        None => {
            print_out(&file.patch)?;
            if !file.patch.ends_with('\n') {
                print_out("\n")?;
            }
            say(&note);
        }
    }
    Ok(())
}

/// The kernel's HTML report from the daemon, else the one exported with its
/// best variant (as of that variant).
pub fn report(settings: &Settings, kernel: &str, output: Option<&Path>) -> Result<()> {
    let request = Request::new(Command::Report {
        kernel: kernel.to_string(),
    });
    let (html, from) = match call(settings, &request) {
        Ok(response) => match response.body {
            Body::Ok(Reply::Report(page)) => {
                (page.html, format!("job {}, from the daemon", page.job))
            }
            Body::Ok(other) => bail!("gevod answered report with {}", reply_kind(&other)),
            Body::Error(e) => return Err(exit(EXIT_ERROR, e.message)),
        },
        Err(e) if e.is_unreachable() => {
            match first_export(settings, kernel, |state| export::read_report(state, kernel)) {
                Ok(((html, path), dir)) => {
                    let named = match &dir.record {
                        Some(r) => format!(" (the state directory {} names)", r.display()),
                        None => String::new(),
                    };
                    (
                        html,
                        format!(
                            "the report exported with the best variant, {}{named}; {}",
                            path.display(),
                            no_answer(&e)
                        ),
                    )
                }
                Err(why) => return Err(exit(EXIT_UNREACHABLE, format!("{e}; {why}"))),
            }
        }
        Err(e) => return Err(e.into()),
    };
    match output {
        Some(path) => {
            refuse_special(path).context("cannot write the report")?;
            export::write_atomic(path, html.as_bytes()).context("cannot write the report")?;
            say(&format!("wrote {} ({from})", path.display()));
        }
        None => {
            print_out(&html)?;
            say(&format!("report of {kernel} ({from})"));
        }
    }
    Ok(())
}

/// A build must never link a PTX other than the one the record describes.
fn check_best(best: &Best, arch: Option<&str>) -> Result<()> {
    if export::ptx_hash(&best.ptx) != best.record.ptx_hash {
        bail!(
            "gevod sent a PTX for {} that does not match its record's hash",
            best.record.kernel
        );
    }
    if let Some(arch) = arch {
        if best.record.target != arch {
            bail!(
                "asked for {arch}, gevod answered with a variant for {}",
                best.record.target
            );
        }
    }
    Ok(())
}

fn export_failure(e: &ExportError, kernel: &str, state: &Path) -> String {
    match e {
        ExportError::NotFound { .. } | ExportError::NoArch { .. } => e.to_string(),
        // A full name whose directory does not exist is simply not exported.
        ExportError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            format!(
                "no exported variant of {kernel} in {}",
                state.join(export::EXPORTS_DIR).display()
            )
        }
        // Someone else's file is no export at all: as if there were none,
        // and why.
        ExportError::Untrusted { .. } => format!(
            "no exported variant of {kernel} in {} (not using {e})",
            state.join(export::EXPORTS_DIR).display()
        ),
        _ => format!("cannot use the export: {e}"),
    }
}

/// Rewrites `path` only when its content differs, so that a build system
/// sees an unchanged file when the answer is unchanged. Returns whether it
/// wrote.
fn write_if_changed(path: &Path, content: &[u8]) -> Result<bool> {
    refuse_special(path).context("cannot write the PTX")?;
    if files::read_capped(path, files::PTX_CAP).is_ok_and(|old| old == content) {
        return Ok(false);
    }
    export::write_atomic(path, content).context("cannot write the PTX")?;
    Ok(true)
}

/// An output path that names a symlink, a FIFO, a device or a directory is
/// a mistake: the rename would replace it (as root, `-o /dev/null` would
/// replace the device with a PTX). The check gevod's `-o` makes too.
fn refuse_special(path: &Path) -> Result<()> {
    Ok(files::check_output(path)?)
}
