//! Pipelines: a spec's launches as written (`[[launches]]` with loops, or the
//! single `[launch]`), and their expansion per test into the flat list of
//! launches a backend runs, buffer swaps resolved.

use super::error::{Location, SpecError};
use super::expr::{format_number, Expr};
use super::model::*;
use std::collections::BTreeMap;

/// Most launches one test may make, over the whole pipeline (repeats and
/// loop iterations included). A spec that exceeds it in any test is refused
/// at load.
pub const MAX_LAUNCHES: usize = 65_536;

/// One entry of a pipeline.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Launch(LaunchSpec),
    Loop(LoopSpec),
}

/// One launch as written: which kernel, its geometry, its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    /// Index into [`Spec::kernels`].
    pub kernel: usize,
    /// Grid, block, shared memory and `repeat`.
    pub geometry: Launch,
    /// One entry per kernel parameter, in order.
    pub args: Vec<LaunchArg>,
    /// `launch` (the single-kernel form) or `launches[2]`, `launches[1].body[0]`.
    pub field: String,
}

/// A kernel parameter's value in one launch.
#[derive(Debug, Clone, PartialEq)]
pub enum LaunchArg {
    /// A declared `[[args]]` entry (buffer or scalar), by index.
    Named(usize),
    /// A scalar of this launch; its expression may use loop variables.
    Scalar {
        name: Option<String>,
        ty: ElemType,
        value: Located<Expr>,
    },
}

/// `for = "k"`: runs `body` for k = from, from + by, ... while below `to`
/// (above it when `by` is negative).
#[derive(Debug, Clone, PartialEq)]
pub struct LoopSpec {
    pub var: String,
    pub from: Located<Expr>,
    pub to: Located<Expr>,
    pub by: Located<Expr>,
    /// Buffer argument pairs exchanged between iterations (not after the last).
    pub swap: Vec<(usize, usize)>,
    pub(crate) swap_at: Vec<Location>,
    pub body: Vec<Step>,
    pub field: String,
    pub(crate) at: Location,
}

/// One launch of a test, as a backend runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchInstance {
    /// Index into [`Spec::kernels`].
    pub kernel: usize,
    /// Names the launch in messages: `launches[1].body[0] (lu_perimeter,
    /// k = 16)`; empty for the single-kernel form's one launch.
    pub label: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    /// One per kernel parameter.
    pub params: Vec<LaunchParam>,
}

/// A launch's parameter value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LaunchParam {
    /// The buffer now bound to argument `arg`: the memory of argument
    /// `slot`'s initial contents (they differ after swaps).
    Buffer {
        arg: usize,
        slot: usize,
    },
    Scalar(Scalar),
}

/// What a test's pipeline expands to.
pub(crate) struct Expanded {
    pub(crate) launches: Vec<LaunchInstance>,
    /// Per argument: the memory it is bound to after the last launch.
    pub(crate) final_binding: Vec<usize>,
}

/// Walks a pipeline for one test.
pub(crate) struct Expander<'s> {
    pub(crate) spec: &'s Spec,
    pub(crate) lens: &'s [usize],
    pub(crate) scalars: &'s [Option<Scalar>],
    pub(crate) binding: Vec<usize>,
    pub(crate) out: Vec<LaunchInstance>,
    /// Loop iterations and launches so far (bounds loops of empty loops).
    pub(crate) steps: usize,
    /// Whether labels carry the launch's place (more than one launch).
    pub(crate) labelled: bool,
}

/// A test with loop variables bound: what expressions inside a loop see.
pub(crate) struct Scope<'t> {
    pub(crate) test: &'t TestCase,
    /// `train[0], k = 16`, for messages.
    pub(crate) case: TestCase,
    pub(crate) vars: Vec<(String, i128)>,
}

impl<'t> Scope<'t> {
    pub(crate) fn new(test: &'t TestCase) -> Self {
        Scope {
            test,
            case: test.clone(),
            vars: Vec::new(),
        }
    }

    fn with(&self, var: &str, v: i128) -> Scope<'t> {
        let mut vars = self.vars.clone();
        vars.push((var.to_string(), v));
        let mut params: BTreeMap<String, f64> = self.test.params.clone();
        for (k, x) in &vars {
            params.insert(k.clone(), *x as f64);
        }
        let name = std::iter::once(self.test.name.clone())
            .chain(vars.iter().map(|(k, x)| format!("{k} = {x}")))
            .collect::<Vec<_>>()
            .join(", ");
        Scope {
            test: self.test,
            case: TestCase {
                name,
                seed: self.test.seed,
                params,
            },
            vars,
        }
    }
}

impl Expander<'_> {
    pub(crate) fn run(mut self, steps: &[Step], test: &TestCase) -> Result<Expanded, SpecError> {
        self.walk(steps, &Scope::new(test))?;
        Ok(Expanded {
            launches: self.out,
            final_binding: self.binding,
        })
    }

    fn count(&mut self, at: &Location, scope: &Scope) -> Result<(), SpecError> {
        self.steps += 1;
        if self.out.len() > MAX_LAUNCHES || self.steps > 4 * MAX_LAUNCHES {
            return Err(at.error(
                &self.spec.path,
                format!(
                    "the pipeline makes more than {MAX_LAUNCHES} launches (or loop iterations) in test {}, the most one test may make; use smaller tests or fewer steps",
                    scope.test.name
                ),
            ));
        }
        Ok(())
    }

    fn walk(&mut self, steps: &[Step], scope: &Scope) -> Result<(), SpecError> {
        for step in steps {
            match step {
                Step::Launch(l) => self.launch(l, scope)?,
                Step::Loop(l) => self.each(l, scope)?,
            }
        }
        Ok(())
    }

    fn launch(&mut self, l: &LaunchSpec, scope: &Scope) -> Result<(), SpecError> {
        let spec = self.spec;
        let g = spec.geometry(&l.geometry, &scope.case)?;
        let mut params = Vec::with_capacity(l.args.len());
        for a in &l.args {
            params.push(match a {
                LaunchArg::Named(i) => match self.scalars[*i] {
                    Some(s) => LaunchParam::Scalar(s),
                    None => LaunchParam::Buffer {
                        arg: *i,
                        slot: self.binding[*i],
                    },
                },
                LaunchArg::Scalar { ty, value, .. } => {
                    LaunchParam::Scalar(spec.eval_scalar(*ty, value, &scope.case)?)
                }
            });
        }
        let swaps = l.geometry.repeat.as_ref().map(|r| {
            for (&(a, b), at) in r.swap.iter().zip(&r.swap_at) {
                spec.check_swap(a, b, at, self.lens, &scope.case)?;
            }
            Ok::<_, SpecError>(&r.swap)
        });
        let swaps = swaps.transpose()?;
        for r in 0..g.count {
            self.count(&l.geometry.block_at, scope)?;
            let mut label = if self.labelled {
                l.field.clone()
            } else {
                String::new()
            };
            if self.labelled {
                let mut context = vec![self.spec.kernels[l.kernel].clone()];
                context.extend(scope.vars.iter().map(|(k, v)| format!("{k} = {v}")));
                if g.count > 1 {
                    context.push(format!("repeat {} of {}", r + 1, g.count));
                }
                label.push_str(&format!(" ({})", context.join(", ")));
            }
            // Buffers follow the swaps made so far.
            let params = params
                .iter()
                .map(|p| match *p {
                    LaunchParam::Buffer { arg, .. } => LaunchParam::Buffer {
                        arg,
                        slot: self.binding[arg],
                    },
                    s => s,
                })
                .collect();
            self.out.push(LaunchInstance {
                kernel: l.kernel,
                label,
                grid: g.grid,
                block: g.block,
                shared_bytes: g.shared_bytes,
                params,
            });
            if r + 1 < g.count {
                for &(a, b) in swaps.into_iter().flatten() {
                    self.binding.swap(a, b);
                }
            }
        }
        Ok(())
    }

    fn each(&mut self, l: &LoopSpec, scope: &Scope) -> Result<(), SpecError> {
        let spec = self.spec;
        if let Some(p) = scope.test.params.get(&l.var) {
            return Err(l.at.error(
                &spec.path,
                format!(
                    "loop variable `{}` has the name of a parameter of test {} (= {}); rename one",
                    l.var,
                    scope.test.name,
                    format_number(*p)
                ),
            ));
        }
        let range = -(super::expr::MAX_EXACT_INT as i128)..=super::expr::MAX_EXACT_INT as i128;
        let (lo, hi) = (*range.start(), *range.end());
        let from = spec.eval_int(&l.from, &scope.case, lo, hi)?;
        let to = spec.eval_int(&l.to, &scope.case, lo, hi)?;
        let by = spec.eval_int(&l.by, &scope.case, lo, hi)?;
        if by == 0 {
            return Err(l.by.at.error(
                &spec.path,
                format!("a loop step of 0 never ends, in test {}", scope.case.name),
            ));
        }
        for (&(a, b), at) in l.swap.iter().zip(&l.swap_at) {
            spec.check_swap(a, b, at, self.lens, &scope.case)?;
        }
        let mut k = from;
        while (by > 0 && k < to) || (by < 0 && k > to) {
            self.count(&l.at, scope)?;
            self.walk(&l.body, &scope.with(&l.var, k))?;
            k += by;
            let more = (by > 0 && k < to) || (by < 0 && k > to);
            if more {
                for &(a, b) in &l.swap {
                    self.binding.swap(a, b);
                }
            }
        }
        Ok(())
    }
}

/// A launch's geometry for one test.
pub(crate) struct Geometry {
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) shared_bytes: u32,
    pub(crate) count: u32,
}

impl Spec {
    /// Every launch as written, depth first (loop bodies in place).
    pub fn launch_specs(&self) -> Vec<&LaunchSpec> {
        fn walk<'a>(steps: &'a [Step], out: &mut Vec<&'a LaunchSpec>) {
            for s in steps {
                match s {
                    Step::Launch(l) => out.push(l),
                    Step::Loop(l) => walk(&l.body, out),
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.pipeline, &mut out);
        out
    }

    /// Per kernel of `kernels`, the most threads its blocks have in x, y
    /// and z over every launch: known only where every launch of it gives
    /// its block as numbers (none where a block depends on a test's sizes
    /// or a tunable constant, or where nothing launches the kernel, as in
    /// harness mode, where the application does). A guarded build takes
    /// thread indices to be below these (`KernelIr::with_block_bounds`).
    pub fn block_bounds(&self) -> Vec<Option<[u64; 3]>> {
        let launches = self.launch_specs();
        (0..self.kernels.len())
            .map(|kernel| {
                if self.harness.is_some() {
                    return None;
                }
                let mut most = None::<[u64; 3]>;
                for launch in launches.iter().filter(|l| l.kernel == kernel) {
                    let mut block = [1u64; 3];
                    for (d, size) in launch.geometry.block.iter().enumerate().take(3) {
                        let value = size.value.constant()?;
                        if !(value >= 1.0 && value.fract() == 0.0) {
                            return None;
                        }
                        block[d] = value as u64;
                    }
                    let so_far = most.get_or_insert(block);
                    for d in 0..3 {
                        so_far[d] = so_far[d].max(block[d]);
                    }
                }
                most
            })
            .collect()
    }

    /// Whether the spec is the single-kernel form (one `[launch]`).
    pub fn is_single_launch(&self) -> bool {
        matches!(self.pipeline.as_slice(), [Step::Launch(l)] if l.field == "launch")
    }
}
