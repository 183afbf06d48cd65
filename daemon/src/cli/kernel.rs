//! The edit engine's commands: `gevod ptx`, `mutate`, `ids`, `edits`.

use super::output::{load_kernel, read_patch, write_output};
use anyhow::{Context as _, Result};
use gevo_ir::source::without_debug_locations;
use gevo_ir::{CodegenOptions, KernelIr, SourceFiles, DEFAULT_ARCH};
use gevo_model::access::Reader;
use rand::SeedableRng;
use std::path::PathBuf;

/// The stencil fixture, compiled in so `gevod ptx` has something to show on a
/// fresh machine.
const BUNDLED_KERNEL: &str = include_str!("../../../tests/fixtures/kernels/stencil.ll");
const BUNDLED_NAME: &str = "<bundled stencil.ll>";

#[derive(clap::Args)]
pub struct PtxArgs {
    /// Kernel IR (.ll or .bc); the bundled stencil kernel when omitted.
    kernel_ir: Option<PathBuf>,
    /// Kernel name, mangled or demangled (default: the patch's, or the only
    /// one); repeat it for a pipeline's kernels, in the spec's order.
    #[arg(long)]
    kernel: Vec<String>,
    #[arg(long)]
    patch: Option<PathBuf>,
    #[arg(long, default_value = DEFAULT_ARCH)]
    arch: String,
    /// libdevice.10.bc to link for __nv_* calls (default: searched).
    #[arg(long, env = "GEVO_LIBDEVICE")]
    libdevice: Option<PathBuf>,
    /// Also write the patched, verified IR here.
    #[arg(long)]
    emit_ir: Option<PathBuf>,
    /// The guarded check build's PTX instead (docs/evolve.md, "Guarded
    /// check builds"): what the GPU worker checks a variant's outputs with,
    /// but with no block bounds (a search's build, which has its spec's,
    /// may leave tile accesses unchecked).
    #[arg(long, conflicts_with = "emit_ir")]
    guarded: bool,
    /// Output file (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

impl PtxArgs {
    pub fn run(self) -> Result<()> {
        let patch_file = self.patch;
        let patch = patch_file.as_deref().map(read_patch).transpose()?;
        let ir = match &self.kernel_ir {
            Some(path) => load_kernel(path, &self.kernel, patch.as_ref())?,
            None => KernelIr::parse_kernels(BUNDLED_NAME, BUNDLED_KERNEL.as_bytes(), &self.kernel)?,
        };
        let patch = patch.unwrap_or_else(|| ir.empty_patch());
        let options = CodegenOptions {
            arch: self.arch,
            libdevice: self.libdevice,
        };
        let source = || match &patch_file {
            Some(p) => format!("{} with patch {}", ir.source(), p.display()),
            None => ir.source().to_string(),
        };
        if self.guarded {
            let guarded = ir.compile_guarded(&patch, &options).with_context(source)?;
            tracing::info!(
                sites = guarded.sites.len(),
                edits = patch.edits.len(),
                "emitted guarded PTX"
            );
            return write_output(self.output.as_deref(), &guarded.ptx);
        }
        let compiled = ir.compile(&patch, &options).with_context(source)?;
        if let Some(path) = self.emit_ir {
            write_output(Some(&path), &compiled.ir)?;
        }
        tracing::info!(ptx_hash = %compiled.ptx_hash, edits = patch.edits.len(), "emitted PTX");
        write_output(self.output.as_deref(), &compiled.ptx)
    }
}

#[derive(clap::Args)]
pub struct MutateArgs {
    kernel_ir: PathBuf,
    /// Kernel name; repeat it for a pipeline's kernels, in the spec's order.
    #[arg(long)]
    kernel: Vec<String>,
    #[arg(long)]
    seed: u64,
    #[arg(long, default_value_t = 1)]
    edits: usize,
    #[arg(short, long)]
    output: Option<PathBuf>,
}

impl MutateArgs {
    pub fn run(self) -> Result<()> {
        let ir = load_kernel(&self.kernel_ir, &self.kernel, None)?;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
        let patch = ir
            .mutate(&mut rng, self.edits)
            .with_context(|| self.kernel_ir.display().to_string())?;
        write_output(self.output.as_deref(), &(patch.to_json() + "\n"))
    }
}

#[derive(clap::Args)]
pub struct IdsArgs {
    kernel_ir: PathBuf,
    /// Kernel name; repeat it for a pipeline's kernels, in the spec's order.
    #[arg(long)]
    kernel: Vec<String>,
}

impl IdsArgs {
    pub fn run(self) -> Result<()> {
        let ir = load_kernel(&self.kernel_ir, &self.kernel, None)?;
        let kernels = ir.chosen_kernels();
        let mut out = String::new();
        let mut current = None;
        for (id, text) in ir.listing()? {
            // Several kernels: a header line where each one's ids begin.
            let k = ir.kernel_of(id);
            if kernels.len() > 1 && k != current {
                current = k;
                out += &format!("; kernel {}\n", k.map_or("?", |k| kernels[k]));
            }
            out += &format!("{id:>6}  {text}\n");
        }
        write_output(None, &out)
    }
}

#[derive(clap::Args)]
pub struct EditsArgs {
    kernel_ir: PathBuf,
    /// Kernel name; repeat it for a pipeline's kernels, in the spec's order.
    #[arg(long)]
    kernel: Vec<String>,
    #[arg(long)]
    patch: PathBuf,
}

impl EditsArgs {
    pub fn run(self) -> Result<()> {
        let patch = read_patch(&self.patch)?;
        let ir = load_kernel(&self.kernel_ir, &self.kernel, Some(&patch))?;
        let steps = ir
            .explain(&patch)
            .with_context(|| self.patch.display().to_string())?;
        let mut files = SourceFiles::near(Reader::Caller, &[&self.kernel_ir]);
        let words = gevod::report::edits::source_edits(&ir, &patch, &mut files)
            .with_context(|| self.patch.display().to_string())?;
        let mut out = String::new();
        if !ir.has_line_tables() && !steps.is_empty() {
            out += &format!("({})\n", gevo_client::explain::NO_LINE_TABLES);
        }
        let mut before = without_debug_locations(ir.text());
        for (i, (step, told)) in steps.iter().zip(&words).enumerate() {
            match (&step.kernel, ir.chosen_kernels().len() > 1) {
                (Some(k), true) => out += &format!("edit {i} (in {k}): {}\n", told.summary),
                _ => out += &format!("edit {i}: {}\n", told.summary),
            }
            for line in &told.lines {
                let text = line.text.as_deref().unwrap_or("(source not readable)");
                out += &format!("  {} | {text}\n", line.location);
            }
            for r in &told.repairs {
                out += &format!("  repair: {r}\n");
            }
            out += &format!("  IR: {}\n", step.edit);
            for (id, text) in &step.operands {
                let text = without_debug_locations(text);
                out += &format!("  {id} = {}\n", text.trim());
            }
            let after = without_debug_locations(&step.ir_after);
            let diff = similar::TextDiff::from_lines(&before, &after);
            out += &diff
                .unified_diff()
                .context_radius(2)
                .header("before", "after")
                .to_string();
            out += "\n";
            before = after;
        }
        ir.apply(&patch)
            .with_context(|| self.patch.display().to_string())?;
        write_output(None, &out)
    }
}
