//! `gevod explain-edits`: the edit contributions of a job's validated
//! variant (`gevo_search::contrib`), measured on the simulator from the job's own
//! spec and IR snapshots (`gevod::explain_edits`, which the daemon shares),
//! or on the GPU with `--backend cuda` (`super::explain_gpu`), stored
//! beside the variant and printed.

use super::output::default_workers;
use super::{resolve, BackendChoice};
use anyhow::{bail, Context as _, Result};
use gevo_ir::{KernelIr, Patch};
use gevo_model::access::Reader;
use gevo_model::device::DeviceSelector;
use gevo_search::contrib::{Contributions, Options};
use gevo_search::store::Store;
use gevod::explain_edits::Simulated;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ExplainEditsArgs {
    /// The state directory (`gevod evolve --state`, or the daemon's).
    state: PathBuf,
    /// The job: its id, or a daemon kernel name (`project/name`) for its
    /// newest version [default: the only job]
    #[arg(long)]
    job: Option<String>,
    /// Which validated variant, by its number in the job's list (1 is the
    /// first validated) [default: the best]
    #[arg(long)]
    variant: Option<usize>,
    /// Instead, a member of the search's Pareto front, by its number in
    /// the front as `gevod evolve` lists it (1 is the first); its patch as
    /// the search found it (not minimized, not validated).
    #[arg(long, conflicts_with = "variant")]
    pareto: Option<usize>,
    /// Measure again even when the store holds the result.
    #[arg(long)]
    again: bool,
    /// Where to measure: the simulator (deterministic, the daemon's), the
    /// GPU (timed like promotion, with intervals), or auto (the GPU when one
    /// is present). A stored result from another backend is measured again.
    #[arg(long, value_enum, default_value = "sim")]
    backend: BackendChoice,
    /// GPU by ordinal or UUID (GPU-...).
    #[arg(long, default_value = "0")]
    device: DeviceSelector,
    /// Compile workers on the GPU (default: all cores).
    #[arg(long)]
    workers: Option<usize>,
    /// libdevice to link (default: searched for).
    #[arg(long)]
    libdevice: Option<PathBuf>,
    /// The relative cost difference under which two subsets count as
    /// equally fast, and an edit as neutral [default: minimization's, 0.01].
    /// A variant whose whole speedup is under it has only neutral edits:
    /// lower it to see which edits carry a small GPU gain.
    #[arg(long, value_parser = parse_threshold)]
    threshold: Option<f64>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_threshold(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if t > 0.0 && t < 1.0 => Ok(t),
        _ => Err(format!("{text:?}: a fraction between 0 and 1 (0.01 is 1%)")),
    }
}

impl ExplainEditsArgs {
    pub fn run(self) -> Result<()> {
        if !self.state.join(gevo_search::store::FILE_NAME).is_file() {
            bail!(
                "{}: no {} here (is it a state directory?)",
                self.state.display(),
                gevo_search::store::FILE_NAME
            );
        }
        let store = Store::open(&self.state)?;
        let id = gevod::report::pick_job(&store, self.job.as_deref())?;
        let job = store
            .job(&id)?
            .with_context(|| format!("job {id}: no record"))?;
        let (ptx_hash, patch) = match self.pareto {
            Some(n) => pareto_member(&store, &id, n)?,
            None => validated_variant(&store, &id, self.variant)?,
        };
        let device = resolve(self.backend, &self.device)?;
        let wanted = if device.is_some() { "cuda" } else { "sim" };
        let options = Options {
            threshold: self.threshold.unwrap_or(Options::default().threshold),
            ..Options::default()
        };
        let stored = store.contributions(&id, &ptx_hash)?;
        // A stored result from another backend or threshold, or of another
        // patch of the same PTX (`gevod evolve` explains the minimized one;
        // `--pareto` asks for the patch as found), is measured again.
        let result = match stored.filter(|c| {
            !self.again
                && c.scope.backend == wanted
                && c.threshold == options.threshold
                && c.patch == patch
        }) {
            // Stored before the relies-on lines existed: add them.
            Some(mut c) if c.relies_cost.is_none() => {
                let sim = Simulated::new(&job, &Reader::Caller, &c.patch)?;
                c.attach_relies(sim.relies_on(&c.patch)?);
                store.put_contributions(&id, &ptx_hash, &c)?;
                c
            }
            Some(c) => c,
            None => {
                let edits = patch.edits.len();
                let c = match device {
                    Some(device) => {
                        tracing::info!(job = %id, edits, device = %device.name, "measuring edit contributions on the GPU");
                        super::explain_gpu::measure(
                            &job,
                            &patch,
                            device,
                            self.workers.unwrap_or_else(default_workers),
                            self.libdevice.as_deref(),
                            &options,
                        )?
                    }
                    None => {
                        tracing::info!(job = %id, edits, "measuring edit contributions");
                        let never = || false;
                        gevod::explain_edits::measure(
                            &job,
                            &Reader::Caller,
                            &patch,
                            &options,
                            self.libdevice.clone(),
                            &never,
                        )?
                    }
                };
                store.put_contributions(&id, &ptx_hash, &c)?;
                c
            }
        };
        if self.json {
            println!("{}", serde_json::to_string_pretty(&result)?);
        } else {
            // The edits in CUDA source terms where the IR has line tables.
            let ir = KernelIr::parse_for_patch(&job.id, job.ir_text.as_bytes(), &result.patch)?;
            let summaries: Vec<String> = ir
                .describe(&result.patch)?
                .into_iter()
                .map(|story| story.summary)
                .collect();
            print!("{}", contributions_text(&id, &result, &summaries));
        }
        Ok(())
    }
}

/// The `n`th validated variant of job `id` (the best: the highest speedup)
/// as its PTX hash and minimized patch.
fn validated_variant(store: &Store, id: &str, n: Option<usize>) -> Result<(String, Patch)> {
    let all = store.validated(id)?;
    let variant = match n {
        None => all.iter().max_by(|a, b| a.speedup.total_cmp(&b.speedup)),
        Some(n) if n == 0 || n > all.len() => {
            bail!(
                "--variant {n}: job {id} has {} validated variants",
                all.len()
            )
        }
        Some(n) => all.get(n - 1),
    };
    let Some(variant) = variant else {
        bail!("job {id} has no validated variant yet");
    };
    Ok((variant.ptx_hash.clone(), variant.minimized.clone()))
}

/// The `n`th member of job `id`'s Pareto front (numbered as `gevod evolve`
/// lists the front: the archive's members with objectives) as its PTX hash
/// and patch.
fn pareto_member(store: &Store, id: &str, n: usize) -> Result<(String, Patch)> {
    let engine = store
        .checkpoint(id)?
        .with_context(|| format!("job {id}: no checkpoint"))?;
    let front: Vec<_> = engine
        .archive()
        .iter()
        .filter(|m| m.outcome.objectives().is_some())
        .collect();
    let member = n
        .checked_sub(1)
        .and_then(|i| front.get(i))
        .with_context(|| {
            format!(
                "--pareto {n}: job {id}'s Pareto front has {} members",
                front.len()
            )
        })?;
    if member.patch.edits.is_empty() {
        bail!("--pareto {n}: that member is the original (no edits)");
    }
    let hash = member
        .ptx_hash
        .clone()
        .with_context(|| format!("--pareto {n}: that member has no PTX hash"))?;
    Ok((hash, member.patch.clone()))
}

/// The result as a table, one edit a line, then the pairs (`gevod
/// explain-edits`, and `gevod evolve`'s report).
pub(super) fn contributions_text(job: &str, c: &Contributions, summaries: &[String]) -> String {
    let mut out = format!(
        "edit contributions of job {job}: {} edits, full patch cost ratio {:.4} on the {} tests ({} {}); {} variants measured in {:.1} s\n",
        c.edits.len(),
        c.full.estimate,
        if c.set == "heldout" { "held-out" } else { &c.set },
        c.scope.backend,
        c.scope.target,
        c.variants_measured,
        c.seconds,
    );
    for e in &c.edits {
        out.push_str(&format!(
            "#{} {:<13} {} [{}]\n    alone: {}\n    without it: {}\n    {}\n",
            e.index + 1,
            e.class.name(),
            summaries.get(e.index).unwrap_or(&e.edit),
            e.kernel,
            e.alone.phrase(),
            e.without.phrase(),
            e.why,
        ));
        for r in &e.relies_on {
            out.push_str(&format!("    relies on: {}\n", r.line));
        }
    }
    if let Some(cost) = c.relies_cost {
        out.push_str(&format!(
            "relies-on lines: {} simulator test runs in {:.1} s\n",
            cost.runs, cost.seconds
        ));
    }
    if !c.pairs.is_empty() {
        out.push_str("pairs:\n");
        for p in &c.pairs {
            let names: Vec<String> = p.edits.iter().map(|i| format!("#{}", i + 1)).collect();
            out.push_str(&format!(
                "    {}: {}\n",
                names.join(" + "),
                p.outcome.phrase()
            ));
        }
    }
    gevo_client::text::escape_terminal(&out).into_owned()
}
