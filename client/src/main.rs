//! The `gevo-client` command line. docs/client.md is its manual; the exit
//! codes below are part of its contract with build scripts.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use gevo_client::export::{self, ExportError};
use gevo_client::locate::{self, Place};
use gevo_client::proto::{
    Best, Body, Command, ErrorCode, Explanation, JobInfo, JobState, Pareto, Reply, Request,
    Response, Status,
};
use gevo_client::transport::{self, CallError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Usage errors, daemon errors other than "nothing validated", anything else.
const EXIT_ERROR: i32 = 1;
/// The daemon could not be reached (and, for `best`, no export could be used).
const EXIT_UNREACHABLE: i32 = 2;
/// `best`: the kernel has no validated variant (yet), or the daemon does not know it.
const EXIT_NO_VARIANT: i32 = 3;

#[derive(Parser)]
#[command(
    name = "gevo-client",
    version,
    about = "Asks the gevo daemon for the best validated PTX of a kernel, and manages its jobs",
    after_help = "Exit codes: 0 ok; 1 error; 2 daemon unreachable (best: and no usable export); \
                  3 best: no validated variant yet."
)]
struct Cli {
    /// gevod's config file; only [daemon] socket and state_dir are read
    /// [default: the mode's gevod.toml, if it exists]
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The daemon's socket, and no other [default: $GEVO_SOCKET, else the
    /// config's, else the first that answers of your user daemon's and the
    /// system daemon's]
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The daemon's state directory, read by `best` when the daemon is down
    /// [default: from the config, else the mode's of each daemon tried]
    #[arg(long, global = true, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Print the answer as JSON instead of a table
    #[arg(long, global = true)]
    json: bool,
    /// Seconds to wait for the daemon to accept and answer [default: 30]
    #[arg(long, global = true, value_name = "SECONDS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The daemon: pid, uptime, paths, watch roots, GPU slots and jobs
    Status,
    /// Every job with its progress and best speedup
    Jobs,
    /// Write the best validated PTX of a kernel (from the daemon, else its export)
    Best {
        /// `<project>/<name>`, or `<name>` when only one project has it
        kernel: String,
        /// The target, e.g. sm_90 [default: the variant with the highest speedup]
        #[arg(long, value_name = "sm_XX")]
        arch: Option<String>,
        /// Write the PTX here (only when it changed) instead of to stdout
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// The Pareto front (cost, error, edits) of a kernel's current job
    Pareto { kernel: String },
    /// What the best variant changed: its edits and the IR diff
    Explain { kernel: String },
    /// Write a kernel's HTML report (from the daemon, else its export)
    Report {
        kernel: String,
        /// The HTML file to write [default: stdout]
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Have the daemon watch a build directory for kernel specs
    Watch { dir: PathBuf },
    /// Stop watching a directory added with `watch`
    Unwatch { dir: PathBuf },
    /// Pause a kernel's job, or every job
    Pause { kernel: Option<String> },
    /// Resume a kernel's job, or every job
    Resume { kernel: Option<String> },
    /// Ask the daemon to exit
    Shutdown,
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if !(secs > 0.0 && secs.is_finite()) {
        return Err("must be a positive number of seconds".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// An error that ends the program with a particular exit code.
#[derive(Debug)]
struct Exit {
    code: i32,
    message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

fn exit(code: i32, message: impl Into<String>) -> anyhow::Error {
    Exit {
        code,
        message: message.into(),
    }
    .into()
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap exits 2 on usage errors; here 2 means "daemon unreachable".
            let code = if e.use_stderr() { EXIT_ERROR } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if let Err(e) = run(cli) {
        eprintln!("gevo-client: {e:#}");
        let code = e.downcast_ref::<Exit>().map_or(EXIT_ERROR, |x| x.code);
        std::process::exit(code);
    }
}

/// Where the daemon may be, after flags, `GEVO_SOCKET`, configs and the
/// search order (`gevo_client::locate`).
struct Settings {
    places: Vec<Place>,
    timeout: Duration,
}

impl Settings {
    /// The sockets to try, each with how an error names it.
    fn sockets(&self) -> Vec<(PathBuf, Option<String>)> {
        self.places
            .iter()
            .map(|p| (p.socket.clone(), p.origin.label()))
            .collect()
    }

    /// The state directories whose exports stand in for the daemon, in the
    /// places' order, each once.
    fn states(&self) -> Vec<&Path> {
        let mut states: Vec<&Path> = Vec::new();
        for place in &self.places {
            if !states.contains(&place.state.as_path()) {
                states.push(&place.state);
            }
        }
        states
    }
}

fn run(cli: Cli) -> Result<()> {
    let settings = settings(&cli)?;
    let json = cli.json;
    let request = match cli.command {
        Cmd::Best {
            kernel,
            arch,
            output,
        } => return best(&settings, &kernel, arch.as_deref(), output.as_deref(), json),
        Cmd::Report { kernel, output } => return report(&settings, &kernel, output.as_deref()),
        Cmd::Status => Command::Status,
        Cmd::Jobs => Command::Jobs,
        Cmd::Pareto { kernel } => Command::Pareto { kernel },
        Cmd::Explain { kernel } => Command::Explain { kernel },
        Cmd::Watch { dir } => Command::Watch {
            dir: absolute_dir(&dir)?,
        },
        Cmd::Unwatch { dir } => Command::Unwatch {
            dir: unwatched_dir(&dir)?,
        },
        Cmd::Pause { kernel } => Command::Pause { kernel },
        Cmd::Resume { kernel } => Command::Resume { kernel },
        Cmd::Shutdown => Command::Shutdown,
    };
    let reply = ask(&settings, request)?;
    let text = if json {
        reply_json(&reply)
    } else {
        render(&reply)
    };
    print_out(&text)
}

fn settings(cli: &Cli) -> Result<Settings> {
    let located =
        locate::places_for_process(cli.socket.clone(), cli.state.clone(), cli.config.clone())?;
    for warning in &located.warnings {
        eprintln!("gevo-client: warning: {warning}");
    }
    Ok(Settings {
        places: located.places,
        timeout: cli.timeout.unwrap_or(transport::DEFAULT_TIMEOUT),
    })
}

/// The daemon resolves nothing relative to the client's directory, so the
/// client sends a canonical path; a typo fails here, not in the daemon.
fn absolute_dir(dir: &Path) -> Result<PathBuf> {
    let abs = std::fs::canonicalize(dir)
        .with_context(|| format!("cannot use the directory {}", dir.display()))?;
    if !abs.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    Ok(abs)
}

/// Like [`absolute_dir`], except that a directory deleted since it was
/// watched can still be unwatched (by its absolute path).
fn unwatched_dir(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        return absolute_dir(dir);
    }
    std::path::absolute(dir).with_context(|| format!("cannot use the directory {}", dir.display()))
}

/// Sends a command that needs the daemon and returns its reply.
fn ask(settings: &Settings, command: Command) -> Result<Reply> {
    match call(settings, &Request::new(command)) {
        Ok(response) => match response.body {
            Body::Ok(reply) => Ok(reply),
            Body::Error(e) => Err(exit(EXIT_ERROR, e.message)),
        },
        Err(e) if e.is_connect_failure() => Err(exit(
            EXIT_UNREACHABLE,
            format!("{e} (is it running? start it with: gevod serve)"),
        )),
        Err(e) if e.is_unreachable() => Err(exit(EXIT_UNREACHABLE, e.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// The request to the first place that answers.
fn call(settings: &Settings, request: &Request) -> Result<Response, CallError> {
    transport::call_first(&settings.sockets(), request, settings.timeout).map(|(_, r)| r)
}

/// Where a `best` answer came from.
enum Source {
    Daemon,
    /// The export in this state dir; the daemon was unreachable for this reason.
    Export(PathBuf, String),
}

/// The first usable export of kernel among the places' state directories,
/// with its directory; else why none could be used, each directory's reason.
fn read_export(
    settings: &Settings,
    kernel: &str,
    arch: Option<&str>,
) -> Result<(Best, PathBuf), String> {
    let mut why = Vec::new();
    for state in settings.states() {
        match export::read(state, kernel, arch) {
            Ok(best) => return Ok((best, state.to_path_buf())),
            Err(e) => why.push(export_failure(&e, kernel, state)),
        }
    }
    Err(why.join("; "))
}

fn best(
    settings: &Settings,
    kernel: &str,
    arch: Option<&str>,
    output: Option<&Path>,
    json: bool,
) -> Result<()> {
    let request = Request::new(Command::Best {
        kernel: kernel.to_string(),
        arch: arch.map(str::to_string),
    });
    let (best, source) = match call(settings, &request) {
        Ok(response) => match response.body {
            Body::Ok(Reply::Best(best)) => (best, Source::Daemon),
            Body::Ok(other) => bail!("gevod answered best with {}", reply_kind(&other)),
            Body::Error(e) => {
                let code = match e.code {
                    ErrorCode::NoValidated | ErrorCode::UnknownKernel => EXIT_NO_VARIANT,
                    _ => EXIT_ERROR,
                };
                return Err(exit(code, e.message));
            }
        },
        Err(e) if e.is_unreachable() => match read_export(settings, kernel, arch) {
            Ok((best, state)) => (best, Source::Export(state, e.reason())),
            Err(why) => return Err(exit(EXIT_UNREACHABLE, format!("{e}; {why}"))),
        },
        Err(e) => return Err(e.into()),
    };
    check_best(&best, arch)?;

    let r = &best.record;
    let (lo, hi) = r.interval;
    let from = match &source {
        Source::Daemon => "from the daemon".to_string(),
        Source::Export(state, why) => format!(
            "from the export in {}, daemon unreachable: {why}",
            state.display()
        ),
    };
    let mut note = format!(
        "{} {}: validated variant, speedup {:.3}x [{lo:.2}, {hi:.2}] ({from})",
        r.kernel, r.target, r.speedup
    );
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
        print_out(&(serde_json::to_string_pretty(&value).expect("json serializes") + "\n"))?;
    } else if output.is_none() {
        print_out(&best.ptx)?;
    }
    eprintln!("gevo-client: {note}");
    Ok(())
}

/// The kernel's HTML report from the daemon, else the one exported with its
/// best variant (as of that variant).
fn report(settings: &Settings, kernel: &str, output: Option<&Path>) -> Result<()> {
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
            let mut why = Vec::new();
            let mut found = None;
            for state in settings.states() {
                match export::read_report(state, kernel) {
                    Ok(page) => {
                        found = Some(page);
                        break;
                    }
                    Err(err) => why.push(export_failure(&err, kernel, state)),
                }
            }
            match found {
                Some((html, path)) => (
                    html,
                    format!(
                        "the report exported with the best variant, {}; daemon unreachable: {}",
                        path.display(),
                        e.reason()
                    ),
                ),
                None => return Err(exit(EXIT_UNREACHABLE, format!("{e}; {}", why.join("; ")))),
            }
        }
        Err(e) => return Err(e.into()),
    };
    match output {
        Some(path) => {
            export::write_atomic(path, html.as_bytes()).context("cannot write the report")?;
            eprintln!("gevo-client: wrote {} ({from})", path.display());
        }
        None => {
            print_out(&html)?;
            eprintln!("gevo-client: report of {kernel} ({from})");
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
        _ => format!("cannot use the export: {e}"),
    }
}

/// Rewrites `path` only when its content differs, so that a build system
/// sees an unchanged file when the answer is unchanged. Returns whether it
/// wrote.
fn write_if_changed(path: &Path, content: &[u8]) -> Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == content) {
        return Ok(false);
    }
    export::write_atomic(path, content).context("cannot write the PTX")?;
    Ok(true)
}

fn print_out(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

fn reply_kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Status(_) => "a status",
        Reply::Jobs(_) => "a job list",
        Reply::Best(_) => "a best variant",
        Reply::Pareto(_) => "a Pareto front",
        Reply::Explain(_) => "an explanation",
        Reply::Report(_) => "a report",
        Reply::Done(_) => "a confirmation",
    }
}

/// The reply's payload as pretty JSON (for `done`, a JSON string).
fn reply_json(reply: &Reply) -> String {
    let value = match reply {
        Reply::Status(s) => serde_json::to_value(s),
        Reply::Jobs(j) => serde_json::to_value(j),
        Reply::Best(b) => serde_json::to_value(b),
        Reply::Pareto(p) => serde_json::to_value(p),
        Reply::Explain(e) => serde_json::to_value(e),
        Reply::Report(r) => serde_json::to_value(r),
        Reply::Done(d) => serde_json::to_value(d),
    };
    serde_json::to_string_pretty(&value.expect("replies serialize")).expect("json serializes")
        + "\n"
}

fn render(reply: &Reply) -> String {
    match reply {
        Reply::Status(s) => render_status(s),
        Reply::Jobs(jobs) => render_jobs(jobs),
        Reply::Best(b) => b.ptx.clone(),
        Reply::Pareto(p) => render_pareto(p),
        Reply::Explain(e) => render_explain(e),
        Reply::Report(r) => r.html.clone(),
        Reply::Done(message) => format!("{message}\n"),
    }
}

fn render_status(s: &Status) -> String {
    let mut out = format!(
        "gevod {} (pid {}), up {}\nsocket:    {}\nstate dir: {}\n\n",
        s.daemon_version,
        s.pid,
        uptime(s.uptime_s),
        s.socket.display(),
        s.state_dir.display()
    );
    if s.watch_roots.is_empty() {
        out += "no watch roots (add one with: gevo-client watch <dir>)\n";
    } else {
        let rows: Vec<Vec<String>> = s
            .watch_roots
            .iter()
            .map(|w| {
                let exists = if w.exists { "yes" } else { "no" };
                vec![
                    w.path.display().to_string(),
                    w.source.clone(),
                    exists.into(),
                ]
            })
            .collect();
        out += &table(&["WATCH ROOT", "SOURCE", "EXISTS"], &rows);
    }
    out += "\n";
    if s.slots.is_empty() {
        out += "no slots\n";
    } else {
        let rows: Vec<Vec<String>> = s
            .slots
            .iter()
            .map(|slot| vec![slot.name.clone(), slot.state.clone()])
            .collect();
        out += &table(&["SLOT", "STATE"], &rows);
    }
    out += "\n";
    out += &render_jobs(&s.jobs);
    out
}

fn render_jobs(jobs: &[JobInfo]) -> String {
    if jobs.is_empty() {
        return "no jobs\n".into();
    }
    let with_message = jobs.iter().any(|j| j.message.is_some());
    let with_origin = jobs.iter().any(|j| j.origin.is_some());
    let mut header = vec![
        "KERNEL",
        "VERSION",
        "STATE",
        "GENERATIONS",
        "EVALUATIONS",
        "VALIDATED",
        "BEST",
        "BACKEND/TARGET",
    ];
    if with_origin {
        header.push("FROM");
    }
    if with_message {
        header.push("MESSAGE");
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            let mut row = vec![
                j.kernel.clone(),
                j.version.to_string(),
                state_name(j.state).into(),
                j.generations.to_string(),
                j.evaluations.to_string(),
                j.validated.to_string(),
                j.best_speedup
                    .map_or_else(|| "-".into(), |s| format!("{s:.3}x")),
                // A spec that never made a job has no backend yet.
                if j.backend.is_empty() {
                    "-".into()
                } else {
                    format!("{}/{}", j.backend, j.target)
                },
            ];
            if with_origin {
                // Seeded from the previous version: which, and what survived.
                row.push(j.origin.as_ref().map_or_else(
                    || "-".into(),
                    |o| format!("v{} ({} kept, {} dropped)", o.version, o.kept, o.dropped),
                ));
            }
            if with_message {
                // A table row is one line: a finding's first line says what
                // and where; `explain` shows all of it.
                let message = j.message.as_deref().unwrap_or_default();
                row.push(message.lines().next().unwrap_or_default().to_string());
            }
            row
        })
        .collect();
    table(&header, &rows)
}

fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Running => "running",
        JobState::Queued => "queued",
        JobState::Paused => "paused",
        JobState::Removed => "removed",
        JobState::Superseded => "superseded",
        JobState::Finished => "finished",
        JobState::Error => "error",
    }
}

fn render_pareto(p: &Pareto) -> String {
    let mut out = format!(
        "{} (job {}): {} point{} on the Pareto front\n",
        p.kernel,
        p.job,
        p.points.len(),
        if p.points.len() == 1 { "" } else { "s" }
    );
    let rows: Vec<Vec<String>> = p
        .points
        .iter()
        .map(|pt| {
            let error = if pt.error == 0.0 {
                "0".to_string()
            } else {
                format!("{:.3e}", pt.error)
            };
            vec![format!("{:.4}", pt.cost), error, pt.edits.to_string()]
        })
        .collect();
    if !rows.is_empty() {
        out += &table(&["COST", "ERROR", "EDITS"], &rows);
    }
    out
}

fn render_explain(e: &Explanation) -> String {
    let mut out = format!(
        "{} (job {}): speedup {:.3}x with {} edit{}\n",
        e.kernel,
        e.job,
        e.speedup,
        e.edits.len(),
        if e.edits.len() == 1 { "" } else { "s" }
    );
    if let Some(o) = &e.origin {
        out += &format!(
            "seeded from version {} (job {}): {} patch{} carried over, {} edit{} kept, {} dropped\n",
            o.version,
            o.job,
            o.patches,
            if o.patches == 1 { "" } else { "es" },
            o.kept,
            if o.kept == 1 { "" } else { "s" },
            o.dropped
        );
    }
    let carried = |i: usize| match &e.origin {
        Some(o) if e.transplanted.contains(&i) => format!("  (from version {})", o.version),
        _ => String::new(),
    };
    if e.source_edits.is_empty() {
        for (i, edit) in e.edits.iter().enumerate() {
            out += &format!("  {}. {edit}{}\n", i + 1, carried(i));
        }
    } else {
        out += &gevo_client::explain::render_edits(&e.source_edits, e.line_tables, "  ");
        let from: Vec<String> = (0..e.edits.len())
            .filter(|&i| !carried(i).is_empty())
            .map(|i| (i + 1).to_string())
            .collect();
        if let (Some(o), false) = (&e.origin, from.is_empty()) {
            out += &format!("  edits {} (from version {})\n", from.join(", "), o.version);
        }
    }
    if !e.tests.is_empty() {
        out += "held-out tests (cost ratio, variant over original, 95% interval):\n";
        for t in &e.tests {
            out += &format!(
                "  {:<12} {:.4}  [{:.4}, {:.4}]\n",
                t.test, t.ratio, t.lo, t.hi
            );
        }
    }
    if !e.rejections.is_empty() {
        out += "latest rejected candidates:\n";
        for r in &e.rejections {
            out += &format!("  - {r}\n");
        }
    }
    if !e.diff.is_empty() {
        out += "\n";
        out += &e.diff;
        if !e.diff.ends_with('\n') {
            out += "\n";
        }
    }
    out
}

/// Left-aligned columns two spaces apart, no trailing blanks.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (cell, w) in cells.iter().zip(&widths) {
            s += &format!("{cell:<w$}  ");
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

fn uptime(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    let (d, h, m, s) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s:02}s"),
        (0, _, _) => format!("{h}h {m:02}m {s:02}s"),
        _ => format!("{d}d {h:02}h {m:02}m"),
    }
}
