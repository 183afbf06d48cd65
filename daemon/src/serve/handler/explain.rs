//! `gevo-client explain <kernel>`: the served variant's edits, diff, held-out
//! and generated tests (with their sizes), edit contributions and latest
//! rejections.

use super::{ApiHandler, Outcome};
use gevo_client::proto::{
    ContributionSummary, EditContributionLine, ErrorCode, Explanation, Reply, TestRatio,
};
use gevo_ir::KernelIr;

impl ApiHandler {
    pub(super) fn explain(&self, kernel: &str) -> Outcome {
        let kernel = self.resolve(kernel)?;
        let (id, validated, ir_text, spec_path, spec_text, root, origin, backend, generated) = {
            let registry = self.shared.registry();
            // A version sharing another's search explains that one's.
            let versions = registry.shown_versions(&kernel);
            let Some(job) = versions.iter().find(|j| j.best.is_some()) else {
                // Why there is none: the job's error (a finding about the
                // kernel, whole), else its latest rejected candidate.
                let why = match versions.first() {
                    Some(j) => match &j.error {
                        Some(error) => format!(": {error}"),
                        None => self
                            .rejections(&j.id)
                            .into_iter()
                            .next()
                            .map_or(String::new(), |r| format!("; latest rejection: {r}")),
                    },
                    None => String::new(),
                };
                return Err((
                    ErrorCode::NoValidated,
                    format!("{kernel}: no validated variant yet{why}"),
                ));
            };
            (
                job.id.clone(),
                job.best.clone().expect("found").0,
                job.record.ir_text.clone(),
                job.record.spec_path.clone(),
                job.record.spec_text.clone(),
                job.daemon.root.clone(),
                job.daemon.origin.clone(),
                job.record.backend.clone(),
                // A validated variant passed every kept generated test.
                job.generated.as_ref().map_or_else(Vec::new, |g| {
                    g.kept
                        .iter()
                        .map(|t| format!("{} ({})", t.test, t.why))
                        .collect()
                }),
            )
        };
        let internal = |e: String| (ErrorCode::Internal, format!("{id}: {e}"));
        let reader = gevo_model::access::Reader::for_spec(&spec_path, &root)
            .map_err(|e| internal(e.to_string()))?;
        let spec = gevo_model::spec::parse_as(&spec_path, &spec_text, &reader)
            .map_err(|e| internal(e.to_string()))?;
        let ir = KernelIr::parse_kernels(&id, ir_text.as_bytes(), &spec.kernels)
            .map_err(|e| internal(e.to_string()))?;
        let variant = ir
            .apply(&validated.minimized)
            .map_err(|e| internal(e.to_string()))?;
        let (original, variant) = (
            gevo_ir::source::without_debug_locations(ir.text()),
            gevo_ir::source::without_debug_locations(&variant),
        );
        let diff = similar::TextDiff::from_lines(&original, &variant)
            .unified_diff()
            .context_radius(3)
            .header("original", "variant")
            .to_string();
        let changes = crate::report::diff::changed_instructions(&original, &variant);
        let rejections = self.rejections(&id);
        let mut files = gevo_ir::SourceFiles::near(reader, &[&spec.ir, &spec_path]);
        let source_edits =
            crate::report::edits::source_edits(&ir, &validated.minimized, &mut files)
                .map_err(|e| internal(e.to_string()))?;
        let contributions = self.contributions(&id, &validated.ptx_hash);
        let sizes = crate::report::heldout_sizes(&spec, &backend);
        Ok(Reply::Explain(Explanation {
            kernel,
            job: id,
            speedup: validated.speedup,
            edits: validated
                .minimized
                .edits
                .iter()
                .map(|e| e.to_string())
                .collect(),
            diff,
            changes,
            backend,
            tests: validated
                .heldout
                .iter()
                .filter_map(|t| {
                    let i = t.cost_interval()?;
                    Some(TestRatio {
                        test: t.test.clone(),
                        ratio: i.estimate,
                        lo: i.lo,
                        hi: i.hi,
                        sizes: sizes.get(&t.test).cloned().unwrap_or_default(),
                    })
                })
                .collect(),
            rejections,
            transplanted: origin.as_ref().map_or_else(Vec::new, |o| {
                (0..validated.minimized.edits.len())
                    .filter(|&i| o.edits.contains(&validated.minimized.edits[i]))
                    .collect()
            }),
            origin: origin.map(|o| o.info),
            source_edits,
            generated_passed: generated,
            line_tables: ir.has_line_tables(),
            contributions,
        }))
    }

    /// The edit contributions stored for a variant (by the daemon, `gevod
    /// evolve` or `gevod explain-edits`), with where they were measured and
    /// what each edit relies on.
    fn contributions(&self, id: &str, ptx_hash: &str) -> Option<ContributionSummary> {
        let c = self.shared.store.contributions(id, ptx_hash).ok()??;
        Some(ContributionSummary {
            backend: c.scope.backend.clone(),
            target: c.scope.target.clone(),
            set: c.set.clone(),
            full: c.full.estimate,
            edits: c
                .edits
                .iter()
                .map(|e| EditContributionLine {
                    index: e.index,
                    kernel: e.kernel.clone(),
                    class: e.class.name().to_string(),
                    why: e.why.clone(),
                    relies_on: e.relies_on.iter().map(|r| r.line.clone()).collect(),
                })
                .collect(),
        })
    }

    /// The reasons of a job's three latest promotion failures, newest first.
    pub(super) fn rejections(&self, id: &str) -> Vec<String> {
        let failures = self.shared.store.promotion_failures(id).unwrap_or_default();
        failures
            .iter()
            .rev()
            .take(3)
            .map(|f| f.reason.clone())
            .collect()
    }
}
