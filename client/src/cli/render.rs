//! The daemon's replies as text: tables for people, pretty JSON with
//! `--json`.
//!
//! Every string in a reply may come from a file someone else wrote (a
//! spec's name, a CUDA line, an error quoting either), so the text forms
//! print each through [`escape_controls`]: no control character but the
//! line breaks the rendering itself puts reaches the terminal. `--json`
//! keeps the strings (JSON escapes them, [`json_text`]); `best`'s PTX and
//! `report`'s HTML are printed as they are: they are the payload a build
//! asked for.

use gevo_client::explain::{SourceEdit, SourceLine};
use gevo_client::proto::{
    measured_on, measured_on_long, ContributionSummary, Explanation, JobInfo, JobState, Pareto,
    ReducedShare, Reply, Status,
};
use gevo_client::text::{escape_controls, escape_path, escape_terminal};

/// Short for the one-line fields.
fn esc(s: &str) -> String {
    escape_controls(s).into_owned()
}

pub fn reply_kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Status(_) => "a status",
        Reply::Jobs(_) => "a job list",
        Reply::Best(_) => "a best variant",
        Reply::Pareto(_) => "a Pareto front",
        Reply::Explain(_) => "an explanation",
        Reply::Report(_) => "a report",
        Reply::Patch(_) => "a patch",
        Reply::Done(_) => "a confirmation",
    }
}

/// The reply's payload as pretty JSON (for `done`, a JSON string).
pub fn reply_json(reply: &Reply) -> String {
    let value = match reply {
        Reply::Status(s) => serde_json::to_value(s),
        Reply::Jobs(j) => serde_json::to_value(j),
        Reply::Best(b) => serde_json::to_value(b),
        Reply::Pareto(p) => serde_json::to_value(p),
        Reply::Explain(e) => serde_json::to_value(e),
        Reply::Report(r) => serde_json::to_value(r),
        Reply::Patch(p) => serde_json::to_value(p),
        Reply::Done(d) => serde_json::to_value(d),
    };
    json_text(&value.expect("replies serialize"))
}

/// `value` as pretty JSON and a newline. serde_json escapes C0 controls
/// but writes DEL and C1 (U+0080..U+009F, where a terminal may read CSI)
/// as they are; they can only be inside strings, so they become `\u00XX`
/// there: the same JSON value, nothing a terminal acts on.
pub fn json_text(value: &serde_json::Value) -> String {
    let text = serde_json::to_string_pretty(value).expect("json serializes");
    let mut out = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        if ('\u{7f}'..='\u{9f}').contains(&c) {
            out += &format!("\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out + "\n"
}

pub fn render(reply: &Reply) -> String {
    render_with(reply, false)
}

/// [`render`]; `full_diff`: an explanation shows the whole IR diff instead
/// of the changed instructions.
pub fn render_with(reply: &Reply, full_diff: bool) -> String {
    match reply {
        Reply::Status(s) => render_status(s),
        Reply::Jobs(jobs) => render_jobs(jobs),
        Reply::Best(b) => b.ptx.clone(),
        Reply::Pareto(p) => render_pareto(p),
        Reply::Explain(e) => render_explain(e, full_diff),
        Reply::Report(r) => r.html.clone(),
        Reply::Patch(p) => p.patch.clone(),
        Reply::Done(message) => format!("{}\n", escape_terminal(message)),
    }
}

fn render_status(s: &Status) -> String {
    let mut out = format!(
        "gevod {} (pid {}), up {}\nsocket:    {}\nstate dir: {}\n\n",
        esc(&s.daemon_version),
        s.pid,
        uptime(s.uptime_s),
        escape_path(&s.socket),
        escape_path(&s.state_dir)
    );
    let roots: Vec<Vec<String>> = s
        .watch_roots
        .iter()
        .map(|w| {
            let exists = if w.exists { "yes" } else { "no" };
            vec![escape_path(&w.path), esc(&w.source), exists.into()]
        })
        .collect();
    out += &table_or(
        "no watch roots (add one with: gevo-client watch <dir>)",
        &["WATCH ROOT", "SOURCE", "EXISTS"],
        &roots,
    );
    out += "\n";
    let slots: Vec<Vec<String>> = s
        .slots
        .iter()
        .map(|slot| {
            let share = 100.0 * slot.held_s / s.uptime_s.max(f64::MIN_POSITIVE);
            vec![
                esc(&slot.name),
                esc(&slot.state),
                format!("{} ({share:.0}%)", uptime(slot.held_s)),
            ]
        })
        .collect();
    out += &table_or("no slots", &["SLOT", "STATE", "HELD"], &slots);
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
    let with_share = jobs.iter().any(|j| j.reduced_share.is_some());
    let with_configuration = jobs.iter().any(|j| j.configuration.is_some());
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
    if with_share {
        header.push("SHARE");
    }
    if with_configuration {
        header.push("CONFIGURATION");
    }
    if with_message {
        header.push("MESSAGE");
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            let mut row = vec![
                esc(&j.kernel),
                j.version.to_string(),
                state_name(j.state).into(),
                j.generations.to_string(),
                j.evaluations.to_string(),
                j.validated.to_string(),
                j.best_speedup.map_or_else(
                    || "-".into(),
                    |s| format!("{s:.3}x{}", measured_on(&j.backend)),
                ),
                // A spec that never made a job has no backend yet.
                if j.backend.is_empty() {
                    "-".into()
                } else {
                    format!("{}/{}", esc(&j.backend), esc(&j.target))
                },
            ];
            if with_origin {
                // Seeded from the previous version: which, and what survived.
                row.push(j.origin.as_ref().map_or_else(
                    || "-".into(),
                    |o| format!("v{} ({} kept, {} dropped)", o.version, o.kept, o.dropped),
                ));
            }
            if with_share {
                // Reduced because the search stopped finding.
                row.push(j.reduced_share.as_ref().map_or_else(
                    || "-".into(),
                    |r| {
                        format!(
                            "{} (found nothing in {} gen.)",
                            fraction(r.weight),
                            r.generations_without
                        )
                    },
                ));
            }
            if with_configuration {
                // A `[tune]` spec's version: the constants it is built with.
                row.push(j.configuration.as_deref().map_or_else(|| "-".into(), esc));
            }
            if with_message {
                // A table row is one line: a finding's first line says what
                // and where; `explain` shows all of it.
                let message = j.message.as_deref().unwrap_or_default();
                row.push(esc(message.lines().next().unwrap_or_default()));
            }
            row
        })
        .collect();
    table(&header, &rows)
}

/// `jobs <kernel>`'s answer, kept to that kernel's jobs: a daemon that
/// predates the filter answers every job.
pub fn only_kernel(reply: Reply, kernel: &str) -> Reply {
    match reply {
        Reply::Jobs(mut jobs) => {
            jobs.retain(|j| {
                j.kernel == kernel
                    || (!kernel.contains('/') && j.kernel.rsplit('/').next() == Some(kernel))
            });
            Reply::Jobs(jobs)
        }
        other => other,
    }
}

/// `jobs <kernel>`: the jobs' table, then per job its generated held-out
/// tests (kept with the original's cost, dropped with why) and the lint
/// lines.
pub fn render_job_details(reply: &Reply) -> String {
    let Reply::Jobs(jobs) = reply else {
        return render(reply);
    };
    let mut out = render_jobs(jobs);
    for j in jobs {
        if j.job.is_empty() {
            continue;
        }
        out += &format!("\n{} version {}: ", esc(&j.kernel), j.version);
        out += &generated_lines(j);
        if let Some(c) = &j.configuration {
            out += &format!(
                "launch configuration: {} (the fastest its sweep measured)\n",
                esc(c)
            );
        }
        if let Some(r) = &j.reduced_share {
            out += &share_line(r);
        }
    }
    out
}

/// A weight as a share of a plain job's: `1/4`, else `0.30`.
fn fraction(weight: f64) -> String {
    let inverse = 1.0 / weight;
    if inverse.fract() == 0.0 && inverse < 1e6 {
        format!("1/{inverse}")
    } else {
        format!("{weight:.2}")
    }
}

/// `jobs <kernel>`'s line on a reduced share: how much and why.
fn share_line(r: &ReducedShare) -> String {
    let since = r
        .last_found
        .map_or_else(|| "ever".into(), |g| format!("since generation {g}"));
    format!(
        "share of the slots: {} of a plain job's: no lower train cost and no better validated variant {since} ({} generations)\n",
        fraction(r.weight),
        r.generations_without
    )
}

/// A job's generated held-out tests, kept and dropped, and the lint lines.
fn generated_lines(j: &JobInfo) -> String {
    let Some(g) = &j.generated else {
        return "generated held-out tests: not derived yet (they are when the job first runs; none for harness specs)\n".into();
    };
    let mut out = String::new();
    out += &format!(
        "generated held-out tests: {} kept, {} dropped; the original costs {} on the kept ones (per validation)\n",
        g.kept.len(),
        g.dropped.len(),
        g.cost_per_validation
    );
    let width = g
        .kept
        .iter()
        .chain(&g.dropped)
        .map(|t| t.test.len())
        .max()
        .unwrap_or(0);
    for t in &g.kept {
        let cost = t.cost.map_or(String::new(), |c| format!(" (cost {c})"));
        out += &format!("kept     {:<width$}  {}{cost}\n", esc(&t.test), esc(&t.why));
    }
    for t in &g.dropped {
        let reason = t.reason.as_deref().unwrap_or("-");
        out += &format!(
            "dropped  {:<width$}  {}: {}\n",
            esc(&t.test),
            esc(&t.why),
            esc(reason)
        );
    }
    for l in &g.lints {
        out += &format!("lint: {}\n", esc(l));
    }
    out
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
        esc(&p.kernel),
        esc(&p.job),
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

fn render_explain(e: &Explanation, full_diff: bool) -> String {
    let mut out = format!(
        "{} (job {}): speedup {:.3}x{} with {} edit{}\n",
        esc(&e.kernel),
        esc(&e.job),
        e.speedup,
        measured_on_long(&e.backend),
        e.edits.len(),
        if e.edits.len() == 1 { "" } else { "s" }
    );
    if let Some(o) = &e.origin {
        out += &format!(
            "seeded from version {} (job {}): {} patch{} carried over, {} edit{} kept, {} dropped\n",
            o.version,
            esc(&o.job),
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
            out += &format!("  {}. {}{}\n", i + 1, esc(edit), carried(i));
        }
    } else {
        let edits: Vec<SourceEdit> = e.source_edits.iter().map(escape_edit).collect();
        out += &gevo_client::explain::render_edits(&edits, e.line_tables, "  ");
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
                "  {:<12} {:.4}  [{:.4}, {:.4}]{}\n",
                esc(&t.test),
                t.ratio,
                t.lo,
                t.hi,
                if t.sizes.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", esc(&t.sizes))
                }
            );
        }
    }
    if !e.generated_passed.is_empty() {
        out += "generated held-out tests passed (on the simulator):\n";
        for t in &e.generated_passed {
            out += &format!("  {}\n", esc(t));
        }
    }
    if let Some(c) = &e.contributions {
        out += &render_contributions(c);
        // A GPU speedup is never explained by the simulator's cost model
        // without saying so: it does not see what a barrier costs a GPU.
        if e.backend == "cuda" && c.backend == "sim" {
            out += "  (measured on the simulator, not on the GPU that found the speedup: its cost model does not see what barriers and memory cost a GPU, so the GPU's classes may differ; the daemon measures them on the job's GPU at the end of its next slice, `gevod explain-edits --backend cuda` does now)\n";
        }
    }
    if !e.rejections.is_empty() {
        out += "latest rejected candidates:\n";
        for r in &e.rejections {
            out += &format!("  - {}\n", esc(r));
        }
    }
    // The changed instructions, unless asked for the whole diff or the
    // daemon predates them.
    let (diff, heading) = if full_diff || e.changes.is_empty() {
        (&e.diff, "")
    } else {
        (
            &e.changes,
            "changed IR instructions (value numbers set aside; --full-diff for the whole diff):\n",
        )
    };
    if !diff.is_empty() {
        out += "\n";
        out += heading;
        out += &escape_terminal(diff);
        if !diff.ends_with('\n') {
            out += "\n";
        }
    }
    out
}

/// The stored edit contributions: each edit's class, why, and what it
/// relies on.
fn render_contributions(c: &ContributionSummary) -> String {
    let mut out = format!(
        "edit contributions ({}{}, {} tests; full patch cost ratio {:.4}):\n",
        esc(&c.backend),
        if c.target.is_empty() || c.backend == "sim" {
            String::new()
        } else {
            format!(" on {}", esc(&c.target))
        },
        if c.set == "heldout" {
            "held-out".to_string()
        } else {
            esc(&c.set)
        },
        c.full
    );
    for e in &c.edits {
        out += &format!(
            "  #{} {} [{}]: {}\n",
            e.index + 1,
            esc(&e.class),
            esc(&e.kernel),
            esc(&e.why)
        );
        for r in &e.relies_on {
            out += &format!("     relies on: {}\n", esc(r));
        }
    }
    out
}

/// `edit` with each of its strings escaped, for
/// [`render_edits`](gevo_client::explain::render_edits), which the daemon
/// shares.
fn escape_edit(edit: &SourceEdit) -> SourceEdit {
    SourceEdit {
        summary: esc(&edit.summary),
        ir: esc(&edit.ir),
        lines: edit
            .lines
            .iter()
            .map(|l| SourceLine {
                location: esc(&l.location),
                text: l.text.as_deref().map(esc),
            })
            .collect(),
        repairs: edit.repairs.iter().map(|r| esc(r)).collect(),
        kernel: edit.kernel.as_deref().map(esc),
    }
}

/// [`table`], or the line `none` when there are no rows.
fn table_or(none: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    if rows.is_empty() {
        format!("{none}\n")
    } else {
        table(header, rows)
    }
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
