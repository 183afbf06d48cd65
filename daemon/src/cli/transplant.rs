//! `gevod transplant`: carries a patch made for one version of a kernel's
//! IR to another version (the daemon does the same for every rebuild).

use super::output::{load_kernel, read_patch, write_output};
use anyhow::{Context as _, Result};
use gevo_ir::transplant::Transplanter;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct TransplantArgs {
    /// The IR the patch was made for.
    old_ir: PathBuf,
    /// The IR to carry it to.
    new_ir: PathBuf,
    #[arg(long)]
    patch: PathBuf,
    /// The kernel in the new IR (default: the patch's name, or the only one).
    #[arg(long)]
    kernel: Option<String>,
    /// Fail, writing nothing, when any edit cannot be carried over; one
    /// line per dropped edit on stderr.
    #[arg(long)]
    strict: bool,
    /// Output file for the new patch (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

impl TransplantArgs {
    pub fn run(self) -> Result<i32> {
        let patch = read_patch(&self.patch)?;
        let named: Vec<String> = patch.kernel_list().iter().map(|k| k.to_string()).collect();
        let old = load_kernel(&self.old_ir, &named, Some(&patch))?;
        let wanted = match &self.kernel {
            Some(k) => vec![k.clone()],
            None => named,
        };
        let new = match load_kernel(&self.new_ir, &wanted, None) {
            // The kernel renamed in a one-kernel module: take that one.
            Err(_) if self.kernel.is_none() => load_kernel(&self.new_ir, &[], None)?,
            other => other?,
        };
        let transplanter = Transplanter::new(&old, &new)
            .with_context(|| format!("{} -> {}", self.old_ir.display(), self.new_ir.display()))?;
        let result = transplanter
            .transplant(&patch)
            .with_context(|| self.patch.display().to_string())?;
        if self.strict && !result.dropped.is_empty() {
            for d in &result.dropped {
                eprintln!("gevod: {}: {d}", self.patch.display());
            }
            return Ok(1);
        }
        let (matched, total) = transplanter.matched();
        write_output(self.output.as_deref(), &(result.patch.to_json() + "\n"))?;
        eprintln!(
            "transplant: {} of {} edits kept, {} dropped ({matched} of {total} instructions matched)",
            result.kept.len(),
            patch.edits.len(),
            result.dropped.len()
        );
        for d in &result.dropped {
            eprintln!(
                "  dropped {}",
                gevo_client::text::escape_terminal(&d.to_string())
            );
        }
        Ok(0)
    }
}
