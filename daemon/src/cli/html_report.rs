//! `gevod report`: a search's HTML report (or its numbers as JSON) from its
//! state directory.

use super::output::write_output;
use anyhow::{Context as _, Result};
use gevo_model::access::Reader;
use gevo_search::store::Store;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The state directory (`gevod evolve --state`, or the daemon's).
    state: PathBuf,
    /// The job: its id, or a daemon kernel name (`project/name`) for its
    /// newest version [default: the only job]
    #[arg(long)]
    job: Option<String>,
    /// The HTML file to write (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write the report's numbers as JSON instead (the job, its counts, the
    /// best variant's speedup, the GPU workers' utilization summed over its
    /// generations), for scripts.
    #[arg(long)]
    json: bool,
}

impl ReportArgs {
    pub fn run(self) -> Result<()> {
        if !self.state.join(gevo_search::store::FILE_NAME).is_file() {
            anyhow::bail!(
                "{}: no {} here (is it a state directory?)",
                self.state.display(),
                gevo_search::store::FILE_NAME
            );
        }
        let store = Store::open(&self.state)?;
        let job = gevod::report::pick_job(&store, self.job.as_deref())?;
        // The CUDA sources are read as the user running this command.
        let data = gevod::report::gather(&store, &job, Reader::Caller)?;
        let text = if self.json {
            let mut text = serde_json::to_string_pretty(&gevod::report::summary_json(&data))?;
            text.push('\n');
            text
        } else {
            gevod::report::render(&data)
        };
        write_output(self.output.as_deref(), &text)
            .with_context(|| format!("writing the report of {job}"))?;
        if let Some(path) = &self.output {
            eprintln!("gevod: wrote the report of {job} to {}", path.display());
        }
        Ok(())
    }
}
