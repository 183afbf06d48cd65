//! [`InProcess`]: the backend without processes, compiling with LLVM and
//! running on the simulator (or a harness spec's command) in this process;
//! an `eval-worker`'s request handler, and a backend for tests.

use super::known::KnownPtx;
use super::{Handler, Request, Response};
use crate::config::Prescreen;
use crate::cuda::guarded::GuardedBuild;
use crate::cuda::part_assembly::PartAssembler;
use crate::cuda::toolkit::{Assembler, CheckAssembly, Cubin};
use crate::harness::{HarnessEvaluator, Runner};
use gevo_ir::{CodegenOptions, IrError, Patch};
use gevo_model::assessment::{Assessment, TestResult};
use gevo_model::sim::code::Program;
use gevo_model::spec::{Spec, TestCase, TestSet};
use gevo_model::utilization::Spent;
use gevo_search::eval::Evaluator;
use gevo_search::evolve::{Backend, BackendError, Build, Scope};
use std::time::Instant;

/// Compiles with LLVM and runs on the simulator (or, for harness specs,
/// runs the kernel's application), in this process.
pub struct InProcess {
    evaluation: Evaluation,
    codegen: CodegenOptions,
    /// ptxas, for `Compile::cubin_for`; found when first asked.
    assembler: Option<Option<Assembler>>,
    /// The same for guarded builds, a pipeline's a kernel at a time, the
    /// parts kept across variants (`cuda::parts`); decided when first
    /// asked, none when not asked for.
    parts: Option<Option<PartAssembler>>,
    /// The train tests the pre-screen runs, least input first.
    screen_tests: Vec<TestCase>,
    /// Cache keys the search knows (PTX hashes and [`screened_key`]s), as
    /// its compile requests told them (`Compile::known`): a search's variant
    /// with one is answered early (`Compile::skip_known`).
    known: KnownPtx,
}

/// Simulator verdicts that reject a variant in the pre-screen: undefined
/// behaviour or a runaway loop on the GPU, and outputs that differ from
/// the original's on a train test (the variant computes something else;
/// the GPU need not confirm it with a guarded build and a check run).
/// Unsupported instructions are left for the GPU to judge.
const SCREENED_OUT: [&str; 7] = [
    "mismatch",
    "out_of_bounds",
    "race",
    "global_race",
    "uninitialized_shared",
    "step_budget",
    "unreachable",
];

/// What the pre-screen made of a variant.
#[derive(Debug, Default)]
pub struct Screened {
    /// The assessment of the test whose fault or mismatch rejects it.
    pub rejected: Option<Assessment>,
    /// Whether it passed every train test it ran, outputs too: it likely
    /// passes its GPU check.
    pub passed: bool,
    /// Train tests run on the simulator.
    pub runs: usize,
}

/// The fitness-cache key of a variant the pre-screen rejected before code
/// generation: its IR's hash, marked so that it never equals a PTX hash.
pub fn screened_key(ir_hash: &str) -> String {
    format!("ir:{ir_hash}")
}

/// What a search's compile request came to before its guarded build.
enum Screening {
    /// Did not replay, verify or generate code.
    Failed(String),
    /// The search knows it, by its IR or its PTX: nothing more to do. A
    /// variant known by its IR has no PTX.
    Known(Build),
    /// Rejected by the pre-screen, with no PTX (keyed by its IR).
    ScreenedOut(Build, Assessment),
    /// Built; whether it passed every train test the pre-screen ran.
    Passed {
        build: Build,
        passed_simulator: bool,
    },
}

/// How variants are run: the spec's own launches on the simulator, or the
/// spec's harness command.
enum Evaluation {
    // Boxed: both are large, and of different sizes.
    Kernel(Box<Evaluator>),
    Harness(Box<HarnessEvaluator>),
}

impl InProcess {
    /// A harness spec's worker: its command runs each variant.
    pub fn harness(
        spec: Spec,
        codegen: CodegenOptions,
        runner: Runner,
        user: Option<(u32, u32)>,
    ) -> Result<Self, crate::harness::HarnessError> {
        Ok(InProcess {
            evaluation: Evaluation::Harness(Box::new(HarnessEvaluator::new(
                spec,
                codegen.clone(),
                runner,
                user,
            )?)),
            codegen,
            screen_tests: Vec::new(),
            assembler: None,
            parts: None,
            known: KnownPtx::default(),
        })
    }

    pub fn new(spec: Spec, codegen: CodegenOptions) -> Result<Self, gevo_search::eval::EvalError> {
        let mut by_size = Vec::new();
        for test in spec.tests(TestSet::Train) {
            by_size.push((spec.buffer_bytes(test)?, test.clone()));
        }
        by_size.sort_by_key(|(bytes, _)| *bytes);
        let screen_tests = by_size.into_iter().map(|(_, t)| t).collect();
        // One simulator thread: parallelism comes from running several workers.
        let evaluator = Evaluator::new(spec, 1)?;
        Ok(InProcess {
            evaluation: Evaluation::Kernel(Box::new(evaluator)),
            codegen,
            screen_tests,
            assembler: None,
            parts: None,
            known: KnownPtx::default(),
        })
    }

    /// The pre-screen: the patch on the simulator's train tests that
    /// `placement` names, least input first (docs/evolve.md, "The
    /// pre-screen"): `all` also sees a loop that runs away or an index that
    /// leaves its buffer only at a larger size, each of which costs a GPU
    /// worker (a timeout or a lost context) when it reaches the GPU;
    /// `smallest` costs the compile workers a fraction of that.
    pub fn screen(&self, patch: &Patch, placement: Prescreen) -> Result<Screened, BackendError> {
        if !self.screens(placement) {
            return Ok(Screened::default());
        }
        self.screen_lowered(patch, &self.ir().lower_all(patch), placement)
    }

    /// Whether `placement` runs any simulator test on this worker's variants.
    fn screens(&self, placement: Prescreen) -> bool {
        matches!(self.evaluation, Evaluation::Kernel(_))
            && placement.tests(self.screen_tests.len()) > 0
    }

    /// [`InProcess::screen`] on `patch` lowered from a replay made for
    /// other work too.
    fn screen_lowered(
        &self,
        patch: &Patch,
        program: &Result<Vec<Program>, IrError>,
        placement: Prescreen,
    ) -> Result<Screened, BackendError> {
        let Evaluation::Kernel(evaluator) = &self.evaluation else {
            return Ok(Screened::default());
        };
        let screened_out = |r: &TestResult| {
            r.failure
                .as_ref()
                .is_some_and(|f| SCREENED_OUT.contains(&f.kind()))
        };
        let count = placement.tests(self.screen_tests.len());
        if count == 0 {
            return Ok(Screened::default());
        }
        let tests: Vec<&TestCase> = self.screen_tests[..count].iter().collect();
        let results = evaluator
            .evaluate_lowered(patch, program, &tests, screened_out)
            .map_err(|e| {
                BackendError::Failed(format!(
                    "the GPU backend's pre-screen (each new variant runs on the simulator's train tests before the GPU; --prescreen off or [gpu] prescreen = \"off\" skips it) cannot judge variants: {e}"
                ))
            })?;
        let runs = results.len();
        let Some(rejecting) = results.last().filter(|r| screened_out(r)) else {
            let passed = runs == count && results.iter().all(|r| r.failure.is_none());
            return Ok(Screened {
                rejected: None,
                passed,
                runs,
            });
        };
        let mut a = Assessment::new(std::slice::from_ref(rejecting));
        let (kind, message) = a.tests[0].failure.take().expect("rejected");
        a.tests[0].failure = Some((kind, format!("pre-screen on the simulator: {message}")));
        Ok(Screened {
            rejected: Some(a),
            passed: false,
            runs,
        })
    }

    /// `ptx` assembled for `arch`, or none where no ptxas is found or it
    /// rejects the PTX (the GPU worker then loads the PTX its own way).
    fn assemble(&mut self, ptx: &str, arch: &str) -> Option<Cubin> {
        let assembler = self
            .assembler
            .get_or_insert_with(Assembler::find)
            .as_ref()?;
        assembler
            .assemble(ptx, arch)
            .inspect_err(|e| tracing::debug!("no cubin: {e}"))
            .ok()
    }

    /// A guarded build's PTX assembled for `arch`, a kernel at a time
    /// ([`PartAssembler`]), at the level `$GEVO_CHECK_ASSEMBLY` names
    /// ([`Assembler::for_checks`]); none where no ptxas is found or it
    /// refuses.
    fn assemble_guarded(&mut self, ptx: &str, arch: &str) -> Option<Cubin> {
        if self.parts.is_none() {
            let assembler = self.assembler.get_or_insert_with(Assembler::find);
            let level = CheckAssembly::from_env();
            let for_checks = assembler.clone().map(|a| a.for_checks(level));
            self.parts = Some(for_checks.map(PartAssembler::new));
        }
        if let Some(Some(parts)) = &mut self.parts {
            return parts
                .assemble(ptx, arch)
                .inspect_err(|e| tracing::debug!("no guarded cubin: {e}"))
                .ok();
        }
        self.assemble(ptx, arch)
    }

    /// A compile request's work up to its guarded build, on one replay of
    /// the patch: a variant the search knows by its IR is answered at once;
    /// the pre-screen runs before code generation, so a variant it rejects
    /// costs no code generation and is keyed by its IR ([`screened_key`]);
    /// one whose PTX the search knows is answered after code generation.
    /// `Err` is this worker failing, not the variant.
    fn screen_and_build(
        &self,
        patch: &Patch,
        placement: Prescreen,
        skip_known: bool,
        spent: &mut Spent,
    ) -> Result<Screening, String> {
        let known = |hash: &str| skip_known && self.known.contains(hash);
        let without_ptx = |ptx_hash| Build {
            ptx_hash,
            ptx: String::new(),
        };
        let started = Instant::now();
        let screens = self.screens(placement);
        let screening = self.ir().with_variant(patch, |mut variant| {
            // Printing the IR costs a little: only where it may serve.
            let ir_key = (skip_known || screens).then(|| screened_key(&variant.ir_hash()));
            spent.compile_s += started.elapsed().as_secs_f64();
            if let Some(key) = ir_key.as_ref().filter(|k| known(k)) {
                return Ok(Screening::Known(without_ptx(key.clone())));
            }
            let mut screened = Screened::default();
            if screens {
                let started = Instant::now();
                screened = self
                    .screen_lowered(patch, &variant.lower_all(), placement)
                    .map_err(|e| e.to_string())?;
                spent.prescreen_s += started.elapsed().as_secs_f64();
            }
            if let Some(rejected) = screened.rejected {
                let key = ir_key.unwrap_or_else(|| screened_key(&variant.ir_hash()));
                return Ok(Screening::ScreenedOut(without_ptx(key), rejected));
            }
            let started = Instant::now();
            let compiled = variant.compile(&self.codegen);
            spent.compile_s += started.elapsed().as_secs_f64();
            Ok(match compiled {
                Err(e) => Screening::Failed(e.to_string()),
                Ok(c) => {
                    let build = Build {
                        ptx_hash: c.ptx_hash,
                        ptx: c.ptx,
                    };
                    match known(&build.ptx_hash) {
                        true => Screening::Known(build),
                        false => Screening::Passed {
                            build,
                            passed_simulator: screened.passed,
                        },
                    }
                }
            })
        });
        if screening.is_err() {
            spent.compile_s += started.elapsed().as_secs_f64();
        }
        screening.unwrap_or_else(|e| Ok(Screening::Failed(e.to_string())))
    }

    /// The patch's guarded build, assembled for `arch` where one is named;
    /// none (checked unguarded) when it does not build.
    fn guarded_build(
        &mut self,
        patch: &Patch,
        arch: Option<&str>,
        spent: &mut Spent,
    ) -> Option<GuardedBuild> {
        let started = Instant::now();
        let guarded = self
            .ir()
            .compile_guarded(patch, &self.codegen)
            .inspect_err(|e| tracing::warn!("no guarded build: {e}"))
            .ok();
        spent.compile_s += started.elapsed().as_secs_f64();
        let guarded = guarded?;
        let started = Instant::now();
        let cubin = arch.and_then(|arch| self.assemble_guarded(&guarded.ptx, arch));
        spent.assemble_guarded_s += started.elapsed().as_secs_f64();
        Some(GuardedBuild {
            ptx: guarded.ptx,
            cubin,
            sites: guarded.sites,
            protects_inputs: guarded.protects_inputs,
            poisons_shared: guarded.poisons_shared,
        })
    }

    fn ir(&self) -> &gevo_ir::KernelIr {
        match &self.evaluation {
            Evaluation::Kernel(e) => e.ir(),
            Evaluation::Harness(h) => h.ir(),
        }
    }

    pub fn compile_one(&self, patch: &Patch) -> Result<Build, String> {
        self.ir()
            .compile(patch, &self.codegen)
            .map(|c| Build {
                ptx_hash: c.ptx_hash,
                ptx: c.ptx,
            })
            .map_err(|e| e.to_string())
    }

    pub fn assess_one(&self, patch: &Patch, set: TestSet) -> Result<Assessment, BackendError> {
        match &self.evaluation {
            Evaluation::Kernel(e) => e
                .evaluate(patch, set)
                .map(|r| Assessment::new(&r))
                .map_err(|e| BackendError::Failed(e.to_string())),
            Evaluation::Harness(h) => h
                .assess(patch, set)
                .map_err(|e| BackendError::Failed(e.to_string())),
        }
    }

    fn spec(&self) -> &Spec {
        match &self.evaluation {
            Evaluation::Kernel(e) => e.spec(),
            Evaluation::Harness(h) => h.spec(),
        }
    }
}

impl Backend for InProcess {
    fn scope(&self) -> Scope {
        let backend = match &self.evaluation {
            Evaluation::Kernel(_) => "sim",
            Evaluation::Harness(h) => h.runner().backend_name(),
        };
        Scope {
            backend: backend.into(),
            target: self.codegen.arch.clone(),
        }
    }

    fn test_set_hash(&self, set: TestSet) -> String {
        self.spec().test_set_hash(set)
    }

    fn runs_generated(&self) -> bool {
        matches!(self.evaluation, Evaluation::Kernel(_))
    }

    fn compile(&mut self, patches: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        Ok(patches.iter().map(|p| self.compile_one(p)).collect())
    }

    fn assess(&mut self, patches: &[Patch], set: TestSet) -> Result<Vec<Assessment>, BackendError> {
        patches.iter().map(|p| self.assess_one(p, set)).collect()
    }
}

impl Handler for InProcess {
    fn scope(&self) -> Scope {
        Backend::scope(self)
    }

    fn handle(&mut self, request: Request) -> Result<(Response, bool), String> {
        let response = match request {
            Request::Compile {
                id,
                patch,
                prescreen,
                cubin_for,
                guarded,
                defer_assembly,
                known,
                forget,
                skip_known,
            } => {
                self.known.forget(forget);
                self.known.extend(known);
                let mut spent = Spent::default();
                let built = |build, screened_out, spent, known| Response::Built {
                    id,
                    build,
                    cubin: None,
                    screened_out,
                    guarded: None,
                    spent,
                    known,
                };
                match self.screen_and_build(&patch, prescreen, skip_known, &mut spent)? {
                    Screening::Failed(reason) => Response::CompileFailed { id, reason, spent },
                    Screening::Known(build) => built(build, None, spent, true),
                    Screening::ScreenedOut(build, rejected) => {
                        built(build, Some(rejected), spent, false)
                    }
                    Screening::Passed {
                        build,
                        passed_simulator,
                    } => {
                        let guarded = match guarded {
                            true => self.guarded_build(&patch, cubin_for.as_deref(), &mut spent),
                            false => None,
                        };
                        // Where the guarded build is assembled, the GPU
                        // worker may assemble the variant while that is
                        // checked (`Loader::prepare`): most fail it. One
                        // that passed the train tests its pre-screen ran
                        // likely passes, and its GPU check is over before ptxas
                        // would be, so it comes assembled.
                        let deferred = defer_assembly
                            && !passed_simulator
                            && guarded.as_ref().is_some_and(|g| g.cubin.is_some());
                        let started = Instant::now();
                        let cubin = match &cubin_for {
                            Some(arch) if !deferred => self.assemble(&build.ptx, arch),
                            _ => None,
                        };
                        spent.assemble_s += started.elapsed().as_secs_f64();
                        Response::Built {
                            id,
                            build,
                            cubin,
                            screened_out: None,
                            guarded,
                            spent,
                            known: false,
                        }
                    }
                }
            }
            Request::Assess { id, patch, set } => {
                let started = Instant::now();
                let assessment = self.assess_one(&patch, set).map_err(|e| e.to_string())?;
                let mut spent = Spent::default();
                if set == TestSet::Generated {
                    spent.generated_s = started.elapsed().as_secs_f64();
                }
                Response::Assessed {
                    id,
                    assessment,
                    exiting: false,
                    spent,
                    rounds: 0,
                    stopped_early: false,
                    stopped_better: false,
                }
            }
            Request::Measure { .. } => {
                return Err("this worker has no GPU; measure requests go to gpu-worker".into())
            }
        };
        Ok((response, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gevo_model::spec;
    use std::path::PathBuf;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/fixtures/kernels/{name}"))
    }

    fn worker(name: &str) -> InProcess {
        let spec = spec::load(&fixture(&format!("{name}.gevo.toml"))).unwrap();
        InProcess::new(spec, CodegenOptions::default()).unwrap()
    }

    fn planted(name: &str) -> Patch {
        let text = std::fs::read_to_string(fixture(&format!("{name}.patch.json"))).unwrap();
        Patch::from_json(&text).unwrap()
    }

    /// `smallest` runs one train test a variant, the least input's, and
    /// still rejects one that computes something else there; `all` runs
    /// each until one rejects, `off` none.
    #[test]
    fn each_placement_runs_its_train_tests() {
        let vecadd = worker("vecadd");
        let drops_b = planted("vecadd.drops-b");
        let original = Patch {
            edits: Vec::new(),
            ..drops_b.clone()
        };
        let runs = |patch: &Patch, placement| {
            let screened = vecadd.screen(patch, placement).unwrap();
            let kind = screened
                .rejected
                .map(|a| a.tests[0].failure.clone().unwrap().0);
            (screened.runs, kind, screened.passed)
        };
        assert_eq!(runs(&original, Prescreen::All), (3, None, true));
        assert_eq!(runs(&original, Prescreen::Smallest), (1, None, true));
        assert_eq!(runs(&original, Prescreen::Off), (0, None, false));
        let mismatch = Some("mismatch".to_string());
        assert_eq!(
            runs(&drops_b, Prescreen::Smallest),
            (1, mismatch.clone(), false)
        );
        assert_eq!(runs(&drops_b, Prescreen::All), (1, mismatch, false));
        // What `smallest` misses: loops' endless variant passes its
        // smallest test (`iters = 0` never enters the loop).
        let loops = worker("loops");
        let endless = planted("loops.endless");
        let screened = loops.screen(&endless, Prescreen::Smallest).unwrap();
        assert_eq!((screened.runs, screened.rejected.is_none()), (1, true));
        let screened = loops.screen(&endless, Prescreen::All).unwrap();
        let rejected = screened.rejected.expect("a larger test runs away");
        assert_eq!(rejected.tests[0].failure.as_ref().unwrap().0, "step_budget");
    }

    /// Through the compile request a compile worker answers: a variant
    /// `smallest` rejects comes back screened out, with no guarded build.
    #[test]
    fn a_compile_request_screens_with_its_placement() {
        let mut vecadd = worker("vecadd");
        let request = Request::compile_measured(
            7,
            planted("vecadd.drops-b"),
            Prescreen::Smallest,
            None,
            true,
        );
        let (response, _) = vecadd.handle(request).unwrap();
        let Response::Built {
            id,
            screened_out,
            guarded,
            ..
        } = response
        else {
            panic!("not built: {response:?}");
        };
        assert_eq!(id, 7);
        let screened = screened_out.expect("screened out");
        assert_eq!(screened.tests.len(), 1);
        let (kind, message) = screened.tests[0].failure.clone().unwrap();
        assert_eq!(kind, "mismatch");
        assert!(
            message.starts_with("pre-screen on the simulator: "),
            "{message}"
        );
        assert!(guarded.is_none());
    }

    /// The pre-screen runs before code generation: a variant it rejects
    /// comes without PTX, keyed by its IR's hash; one it passes comes with
    /// the PTX and hash an ordinary compile gives.
    #[test]
    fn a_screened_out_variant_costs_no_code_generation() {
        let mut vecadd = worker("vecadd");
        let built = |worker: &mut InProcess, patch: Patch| {
            let request = Request::compile_measured(1, patch, Prescreen::Smallest, None, true);
            match worker.handle(request) {
                Ok((
                    Response::Built {
                        build,
                        screened_out,
                        ..
                    },
                    _,
                )) => (build, screened_out.is_some()),
                other => panic!("not built: {other:?}"),
            }
        };
        let drops_b = planted("vecadd.drops-b");
        let (build, screened) = built(&mut vecadd, drops_b.clone());
        let ir_hash = gevo_ir::content_hash(vecadd.ir().apply(&drops_b).unwrap().as_bytes());
        assert!(screened);
        assert_eq!(
            (build.ptx.as_str(), build.ptx_hash),
            ("", screened_key(&ir_hash))
        );
        let original = Patch {
            edits: Vec::new(),
            ..drops_b
        };
        let (build, screened) = built(&mut vecadd, original.clone());
        assert!(!screened);
        assert_eq!(build, vecadd.compile_one(&original).unwrap());
        assert!(build.ptx.contains(".entry"), "{}", build.ptx);
    }

    /// A search's compile request whose PTX its worker was told is known
    /// is answered after code generation (no pre-screen, no guarded
    /// build); one the worker was not told of, or promotion's, in full.
    #[test]
    fn a_known_ptx_is_answered_after_code_generation_in_a_search_only() {
        let mut vecadd = worker("vecadd");
        let patch = planted("vecadd.drops-b");
        let build = |worker: &mut InProcess, request: Request| match worker.handle(request) {
            Ok((
                Response::Built {
                    build,
                    screened_out,
                    guarded,
                    known,
                    spent,
                    ..
                },
                _,
            )) => (
                build.ptx_hash,
                screened_out.is_some() || guarded.is_some(),
                known,
                spent,
            ),
            other => panic!("not built: {other:?}"),
        };
        let search = |told: Vec<String>| {
            let mut request =
                Request::compile_measured(1, patch.clone(), Prescreen::All, None, true);
            if let Request::Compile { known, .. } = &mut request {
                *known = told;
            }
            request
        };
        let (hash, screened, known, _) = build(&mut vecadd, search(vec!["other".into()]));
        assert!(screened && !known, "not known yet: screened in full");
        // Told once, the worker keeps it.
        let (_, screened, known, spent) = build(&mut vecadd, search(vec![hash.clone()]));
        assert!(!screened && known);
        assert_eq!(spent.prescreen_s, 0.0);
        let (_, screened, known, _) = build(&mut vecadd, search(Vec::new()));
        assert!(!screened && known, "kept from the request before");
        let promotion = Request::compile_measured(2, patch.clone(), Prescreen::All, None, false);
        let (_, screened, known, _) = build(&mut vecadd, promotion);
        assert!(screened && !known, "promotion measures every patch");
    }
}
