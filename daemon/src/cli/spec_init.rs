//! `gevod spec init`: a spec skeleton for a kernel, from its IR.

use super::output::write_output;
use anyhow::{bail, Result};
use gevo_ir::{KernelIr, Param};
use gevo_model::spec::skeleton::{
    elem_from_c_type, elem_from_ir_type, guess_role, render_checked, LaunchSource, ParamSketch,
    Sketch, SketchKind,
};
use std::path::{Component, Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum SpecCommand {
    /// Write a spec skeleton for a kernel: one [[args]] per parameter, in
    /// order, with kinds and types from the IR, the launches from the CUDA
    /// source that makes them, and placeholders for the rest.
    Init(InitArgs),
}

#[derive(clap::Args)]
pub struct InitArgs {
    /// Kernel IR (.ll or .bc).
    kernel_ir: PathBuf,
    /// Kernel name, mangled or demangled (default: the only one).
    #[arg(long)]
    kernel: Option<String>,
    /// Target arch to record in the spec.
    #[arg(long)]
    arch: Option<String>,
    /// A CUDA or C++ source to read the kernel's <<<...>>> launches from
    /// (repeatable; default: the file the IR's debug info names, then the
    /// other .cu files beside it).
    #[arg(long = "source", value_name = "FILE")]
    sources: Vec<PathBuf>,
    /// The spec file to write (default: stdout). An existing file is left
    /// alone unless --force.
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[arg(long, requires = "output")]
    force: bool,
}

impl SpecCommand {
    pub fn run(self) -> Result<()> {
        match self {
            SpecCommand::Init(args) => args.run(),
        }
    }
}

impl InitArgs {
    fn run(self) -> Result<()> {
        if let Some(out) = &self.output {
            if out.exists() && !self.force {
                bail!("{}: exists; pass --force to overwrite it", out.display());
            }
        }
        let ir = KernelIr::load(&self.kernel_ir, self.kernel.as_deref())?;
        let params = ir.parameters()?;
        let launches = super::spec_init_sources::launches(&ir, &self.sources)?;
        let said = match &launches {
            LaunchSource::Found(f) => format!("launches read from {}", f.file),
            LaunchSource::NotFound { searched } => {
                format!("no launch found in {}", searched.join(", "))
            }
            LaunchSource::NoSource => "no CUDA source to read launches from".to_string(),
        };
        let sketch = Sketch {
            ir: ir_path_from(self.output.as_deref(), &self.kernel_ir),
            kernel: ir.kernel().to_string(),
            arch: self.arch.clone(),
            params: params.iter().enumerate().map(sketch_param).collect(),
            launches,
        };
        // Read back before anything is written or "wrote" is said.
        let text = render_checked(&sketch)?;
        write_output(self.output.as_deref(), &text)?;
        if let Some(out) = &self.output {
            eprintln!(
                "wrote {} ({} parameters); {}; fill in its TODO values, then `gevod run {}`",
                out.display(),
                params.len(),
                gevo_client::text::escape_terminal(&said),
                out.display()
            );
        }
        Ok(())
    }
}

fn sketch_param((i, p): (usize, &Param)) -> ParamSketch {
    let from_source = p.source_type.as_deref().and_then(elem_from_c_type);
    let kind = if p.is_pointer {
        SketchKind::Buffer {
            elem: from_source.or_else(|| p.accessed_as.as_deref().and_then(elem_from_ir_type)),
            role: guess_role(p.readonly, p.writeonly),
        }
    } else {
        SketchKind::Scalar {
            ty: from_source.or_else(|| elem_from_ir_type(&p.ir_type)),
        }
    };
    let mut described = match &p.source_type {
        Some(t) => t.clone(),
        None => p.ir_type.clone(),
    };
    for (flag, word) in [(p.readonly, "readonly"), (p.writeonly, "writeonly")] {
        if flag {
            described += &format!(", {word} in the IR");
        }
    }
    if let (true, Some(t)) = (p.is_pointer, &p.accessed_as) {
        described += &format!(", accessed as {t}");
    }
    ParamSketch {
        name: p.source_name.clone().unwrap_or_else(|| format!("arg{i}")),
        kind,
        described,
    }
}

/// The IR path as the spec names it: relative to the spec's directory when
/// the IR lies under it or both paths are relative to here, else absolute.
fn ir_path_from(spec: Option<&Path>, ir: &Path) -> String {
    let spec_dir = spec
        .and_then(Path::parent)
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    if let Ok(inside) = absolute(ir).strip_prefix(absolute(spec_dir)) {
        return inside.display().to_string();
    }
    let plain = |p: &Path| {
        p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    };
    if plain(spec_dir) && plain(ir) {
        let mut path = PathBuf::new();
        for _ in spec_dir
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
        {
            path.push("..");
        }
        path.push(ir);
        return path.display().to_string();
    }
    absolute(ir).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ir_is_named_relative_to_the_spec() {
        for (spec, ir, expected) in [
            (None, "k.ll", "k.ll"),
            (Some("k.gevo.toml"), "build/k.ll", "build/k.ll"),
            (Some("build/k.gevo.toml"), "build/k.ll", "k.ll"),
            (Some("specs/k.gevo.toml"), "build/k.ll", "../build/k.ll"),
            (Some("/abs/k.gevo.toml"), "/x/k.ll", "/x/k.ll"),
            (Some("/abs/k.gevo.toml"), "/abs/ir/k.ll", "ir/k.ll"),
        ] {
            assert_eq!(
                ir_path_from(spec.map(Path::new), Path::new(ir)),
                expected,
                "{spec:?} {ir}"
            );
        }
    }
}
