//! Reaching the daemon: where it may be (flags, `GEVO_SOCKET`, configs, the
//! search order), one request to the first place that answers, and the
//! directories sent to it.

use crate::{exit, say, Cli, EXIT_ERROR, EXIT_UNREACHABLE};
use anyhow::{bail, Context, Result};
use gevo_client::locate::{self, Place};
use gevo_client::proto::{Body, Command, Reply, Request, Response};
use gevo_client::record;
use gevo_client::transport::{self, CallError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the daemon may be, after flags, `GEVO_SOCKET`, configs and the
/// search order (`gevo_client::locate`).
pub struct Settings {
    places: Vec<Place>,
    timeout: Duration,
    /// `--state` was given: that directory, and no daemon's record.
    named_state: bool,
}

/// A state directory whose exports may stand in for the daemon, and the
/// daemon record that named it, if one did.
pub struct ExportDir {
    pub state: PathBuf,
    pub record: Option<PathBuf>,
}

impl Settings {
    /// The sockets to try, each with how an error names it.
    fn sockets(&self) -> Vec<(PathBuf, Option<String>)> {
        self.places
            .iter()
            .map(|p| (p.socket.clone(), p.origin.label()))
            .collect()
    }

    /// The state directories whose exports stand in for the daemon, each
    /// once: the places' own, in their order, then, unless `--state` named
    /// one, those recorded beside the places' sockets by the daemons that
    /// last listened there (`gevo_client::record`); and why a record
    /// looked for could not be used (none there, not trusted).
    pub fn export_dirs(&self) -> (Vec<ExportDir>, Vec<String>) {
        let mut dirs: Vec<ExportDir> = Vec::new();
        let mut notes = Vec::new();
        for place in &self.places {
            if !dirs.iter().any(|d| d.state == place.state) {
                dirs.push(ExportDir {
                    state: place.state.clone(),
                    record: None,
                });
            }
        }
        if self.named_state {
            return (dirs, notes);
        }
        for place in &self.places {
            match record::read(&place.socket) {
                Ok(r) if dirs.iter().any(|d| d.state == r.state_dir) => {}
                Ok(r) => dirs.push(ExportDir {
                    state: r.state_dir,
                    record: Some(record::path_for(&place.socket)),
                }),
                Err(e) => notes.push(e.to_string()),
            }
        }
        (dirs, notes)
    }
}

pub fn settings(cli: &Cli) -> Result<Settings> {
    let located =
        locate::places_for_process(cli.socket.clone(), cli.state.clone(), cli.config.clone())?;
    for warning in &located.warnings {
        say(&format!("warning: {warning}"));
    }
    Ok(Settings {
        places: located.places,
        timeout: cli.timeout.unwrap_or(transport::DEFAULT_TIMEOUT),
        named_state: cli.state.is_some(),
    })
}

/// The daemon resolves nothing relative to the client's directory, so the
/// client sends a canonical path; a typo fails here, not in the daemon.
pub fn absolute_dir(dir: &Path) -> Result<PathBuf> {
    let abs = std::fs::canonicalize(dir)
        .with_context(|| format!("cannot use the directory {}", dir.display()))?;
    if !abs.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    Ok(abs)
}

/// Like [`absolute_dir`], except that a directory deleted since it was
/// watched can still be unwatched (by its absolute path).
pub fn unwatched_dir(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        return absolute_dir(dir);
    }
    std::path::absolute(dir).with_context(|| format!("cannot use the directory {}", dir.display()))
}

/// Sends a command that needs the daemon and returns its reply.
pub fn ask(settings: &Settings, command: Command) -> Result<Reply> {
    match call(settings, &Request::new(command)) {
        Ok(response) => match response.body {
            Body::Ok(reply) => Ok(reply),
            Body::Error(e) => Err(exit(EXIT_ERROR, e.message)),
        },
        // Neither a path of another kind nor a refusal means it is down.
        Err(e) if e.is_connect_failure() && !e.is_not_a_socket() && !e.is_permission_denied() => {
            Err(exit(
                EXIT_UNREACHABLE,
                format!("{e} (is it running? start it with: gevod serve)"),
            ))
        }
        Err(e) if e.is_unreachable() => Err(exit(EXIT_UNREACHABLE, e.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// The request to the first place that answers.
pub fn call(settings: &Settings, request: &Request) -> Result<Response, CallError> {
    transport::call_first(&settings.sockets(), request, settings.timeout).map(|(_, r)| r)
}
