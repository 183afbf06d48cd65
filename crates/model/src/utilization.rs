//! Where a search's time goes: what each worker spent on a request, by
//! phase, and those summed over a span of wall time, so a report can show
//! which side (code generation or the GPU) is the bottleneck. Plain values.

use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// Defines a struct of `pub` fields and its `add_fields`, which adds each
/// field of another value to this one's (`+=` by reference), so that a new
/// field cannot be left out of the sums.
macro_rules! summed_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $name {
            /// Adds each of `other`'s fields to this one's.
            fn add_fields(&mut self, other: &$name) {
                $(self.$field += &other.$field;)*
            }
        }
    };
}

summed_struct! {
    /// Seconds a worker spent on requests, by phase.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Spent {
        /// Code generation: replay, verify, emit PTX (compile workers).
        pub compile_s: f64,
        /// The simulator's runs of the train tests (compile workers).
        pub prescreen_s: f64,
        /// ptxas assembling variants' ordinary builds, the ones timed
        /// (compile workers).
        pub assemble_s: f64,
        /// ptxas assembling variants' guarded builds, the ones their outputs
        /// are checked through (compile workers).
        pub assemble_guarded_s: f64,
        /// The simulator's runs of the generated held-out tests (compile
        /// workers): selection's generality checks and promotion's.
        pub generated_s: f64,
        /// Loading the variant into the GPU worker's context: the JIT for PTX,
        /// or a cubin (assembled by the GPU worker itself when none came).
        pub jit_load_s: f64,
        /// The checked run on each test: launch, download and comparison.
        pub check_s: f64,
        /// Warm-ups and timing rounds.
        pub timing_s: f64,
        /// A pipeline's per-kernel times (runs with an event after each launch).
        pub profile_s: f64,
        /// The CPU a compile worker's process and the programs it ran
        /// (ptxas, nvlink; a harness spec's command) used on its requests,
        /// user and system, from getrusage. The phases above are wall
        /// seconds in each phase, which grow where the workers share busy
        /// cores; this does not.
        pub compile_cpu_s: f64,
        /// compute-sanitizer's runs of variants about to be validated (the
        /// GPU safety gate, in its own processes on the GPU, beside the GPU
        /// workers: not part of their busy share).
        pub sanitizer_s: f64,
    }
}

impl Spent {
    pub fn is_zero(&self) -> bool {
        *self == Spent::default()
    }

    /// Seconds of the GPU workers' own (the safety gate runs beside them).
    pub fn gpu_s(&self) -> f64 {
        self.jit_load_s + self.check_s + self.timing_s + self.profile_s
    }

    /// Seconds of a compile worker's.
    pub fn compile_worker_s(&self) -> f64 {
        self.compile_s
            + self.prescreen_s
            + self.assemble_s
            + self.assemble_guarded_s
            + self.generated_s
    }
}

impl AddAssign<&Spent> for Spent {
    fn add_assign(&mut self, other: &Spent) {
        self.add_fields(other);
    }
}

summed_struct! {
    /// Where a GPU worker's start went, in seconds: what a replacement after a
    /// crash costs before it measures anything.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct StartUp {
        /// Loading the spec and the IR, compiling the original's PTX, probing
        /// the device.
        pub setup_s: f64,
        /// Creating the CUDA context and loading the original.
        pub context_s: f64,
        /// Generating the tests' inputs on the CPU.
        pub inputs_s: f64,
        /// Copying them to the GPU.
        pub upload_s: f64,
        /// The original's checked run and timings on each test.
        pub references_s: f64,
    }
}

summed_struct! {
    /// Where the engine's own thread spent its generations, in seconds:
    /// what a GPU waits for between batches (the generation barrier) is
    /// everything here but `evaluate_s`.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct EngineSpent {
        /// Breeding the batch: mutation, crossover, each child's replay.
        pub breed_s: f64,
        /// Waiting for the batch's evaluation (compiled and measured).
        pub evaluate_s: f64,
        /// Survivors, migration, the archive and the promotion pool.
        pub select_s: f64,
        /// Promotion: held-out measurements, minimization, the safety
        /// gate's verdicts.
        pub promote_s: f64,
        /// Promotions run beside the batches (the GPU backend, in a thread
        /// of their own), from start to end, counted with the step that
        /// took each in: not part of the parts above.
        pub promote_beside_s: f64,
    }
}

impl AddAssign<&EngineSpent> for EngineSpent {
    fn add_assign(&mut self, other: &EngineSpent) {
        self.add_fields(other);
    }
}

impl EngineSpent {
    /// The engine's time outside evaluation, between batches.
    pub fn between_batches_s(&self) -> f64 {
        self.breed_s + self.select_s + self.promote_s
    }
}

impl AddAssign<&StartUp> for StartUp {
    fn add_assign(&mut self, other: &StartUp) {
        self.add_fields(other);
    }
}

summed_struct! {
    /// A backend's workers over `wall_s` seconds: their time by phase, and the
    /// search's GPU measurements (train tests only; promotion's held-out runs
    /// count in the time, not in these counts).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Utilization {
        pub wall_s: f64,
        pub gpu_workers: u32,
        pub compile_workers: u32,
        pub spent: Spent,
        /// Variants sent to the GPU on the train tests.
        pub measured: u64,
        /// Of those, variants that passed the checks and were timed.
        pub timed: u64,
        /// Timing rounds per test those variants took, summed.
        pub rounds: u64,
        /// Variants whose timing stopped before the full rounds (adaptive
        /// measurement: confidently on one side of the selection threshold).
        pub stopped_early: u64,
        /// Of those, variants stopped as confidently better than the line
        /// (the rest: confidently no better).
        pub stopped_better: u64,
        /// Variants of the search's batches that were compiled during the
        /// step before (docs/evolve.md, "Bred a step ahead").
        pub compiled_ahead: u64,
        /// Variants a compile worker answered as known to the search: by
        /// their IR right after replay (a pre-screen rejection before), or
        /// by their PTX after code generation; no guarded build or ptxas.
        pub known_skipped: u64,
        /// Cubins the compile workers assembled for the search's variants
        /// (promotion's share only their seconds, in `spent`): of guarded
        /// builds, and of the builds timed. Set against `measured`, they say
        /// how many assemblies a measured variant cost (the GPU workers' own
        /// are in `jit_load_s`).
        pub guarded_assembled: u64,
        pub timed_assembled: u64,
        /// Compile requests the search's variants took, answered: screened
        /// out, known and failed ones too (promotion's are not counted).
        pub compiled: u64,
        /// Of `compiled`, variants the pre-screen rejected on the simulator,
        /// before code generation (their replay and pre-screen spent).
        pub screened_out: u64,
        /// Promotion's share of `spent`: the compile workers' and GPU
        /// workers' seconds on its requests (held-out runs, minimization,
        /// generated tests), and the variants it measured on the GPU. The
        /// safety gate's `sanitizer_s` is promotion's too and stays apart.
        pub promotion: Spent,
        pub promotion_measured: u64,
        /// Of `measured`, variants of the next batch, measured where a GPU
        /// would have waited for this batch's last ones.
        pub measured_ahead: u64,
        /// Promotion's measurements a batch ended with under way (or
        /// queued), left to a later batch instead of waited for.
        pub promotion_carried: u64,
        /// GPU workers started (the first, and each replacement after a
        /// variant crashed or hung one), and the seconds they took to upload
        /// their tests and make the references: time the GPU measures nothing.
        pub gpu_starts: u64,
        pub gpu_start_s: f64,
        /// Seconds the GPU workers held no request, summed over them: their
        /// GPUs waited for the search (compiles, the engine, a batch's
        /// end). What else of the GPUs' idle time there is went to the
        /// workers' own host work between runs.
        pub gpu_idle_s: f64,
        /// What the GPU workers that greeted in this span spent starting
        /// (spares included, whose start overlaps the measurements), by part.
        pub gpu_start_parts: StartUp,
        /// The engine thread's time in this span, by part.
        pub engine: EngineSpent,
    }
}

impl Utilization {
    /// Share of the wall time the GPU workers were busy (0 to 1).
    pub fn gpu_busy_share(&self) -> f64 {
        share(
            self.spent.gpu_s(),
            self.wall_s * f64::from(self.gpu_workers),
        )
    }

    /// Share of the wall time the compile workers were busy (0 to 1).
    pub fn compile_busy_share(&self) -> f64 {
        share(
            self.spent.compile_worker_s(),
            self.wall_s * f64::from(self.compile_workers),
        )
    }

    /// Timing rounds per timed variant.
    pub fn rounds_per_variant(&self) -> f64 {
        self.rounds as f64 / self.timed.max(1) as f64
    }

    /// Variants measured on the GPU per second of wall time.
    pub fn measured_per_s(&self) -> f64 {
        self.measured as f64 / self.wall_s.max(1e-9)
    }

    /// The phases in the order a variant goes through them, for tables.
    pub fn phases(&self) -> [(&'static str, f64); 11] {
        let s = &self.spent;
        [
            ("compile", s.compile_s),
            ("pre-screen", s.prescreen_s),
            ("ptxas, guarded builds", s.assemble_guarded_s),
            ("ptxas, timed builds", s.assemble_s),
            ("generated tests", s.generated_s),
            ("GPU worker start-up", self.gpu_start_s),
            ("module load", s.jit_load_s),
            ("output check", s.check_s),
            ("timing", s.timing_s),
            ("per-kernel times", s.profile_s),
            ("compute-sanitizer", s.sanitizer_s),
        ]
    }

    /// `other` after this span: times and counts add, worker counts are the
    /// larger.
    pub fn add(&mut self, other: &Utilization) {
        let gpu_workers = self.gpu_workers.max(other.gpu_workers);
        let compile_workers = self.compile_workers.max(other.compile_workers);
        self.add_fields(other);
        self.gpu_workers = gpu_workers;
        self.compile_workers = compile_workers;
    }

    /// The compile workers' CPU seconds and promotion's part of the
    /// phases, in words, for reports: none where the workers did not count
    /// them (an older build's record) or nothing was promoted.
    pub fn cpu_and_promotion(&self) -> Vec<String> {
        let mut said = Vec::new();
        if self.spent.compile_cpu_s > 0.0 {
            said.push(format!(
                "compile workers' CPU {:.1} s",
                self.spent.compile_cpu_s
            ));
        }
        if self.promotion_measured > 0 || !self.promotion.is_zero() {
            said.push(format!(
                "promotion {:.1} s of the compile workers' and {:.1} s of the GPU's ({} measured)",
                self.promotion.compile_worker_s(),
                self.promotion.gpu_s(),
                self.promotion_measured
            ));
        }
        said
    }

    /// The engine's parts in the order of a generation, for tables.
    pub fn engine_parts(&self) -> [(&'static str, f64); 4] {
        let e = &self.engine;
        [
            ("breeding", e.breed_s),
            ("waiting for evaluation", e.evaluate_s),
            ("selection", e.select_s),
            ("promotion", e.promote_s),
        ]
    }

    /// Who was busy, and what the GPU measured, in one sentence.
    pub fn summary(&self) -> String {
        format!(
            "GPU busy {:.0}% of {:.0} s ({} GPU worker(s), started {} times, {:.1} s with no request), compile workers busy {:.0}% ({}); {} variants measured ({:.1}/s), {:.1} timing rounds per test each, {} stopped early ({} as better)",
            100.0 * self.gpu_busy_share(),
            self.wall_s,
            self.gpu_workers,
            self.gpu_starts,
            self.gpu_idle_s,
            100.0 * self.compile_busy_share(),
            self.compile_workers,
            self.measured,
            self.measured_per_s(),
            self.rounds_per_variant(),
            self.stopped_early,
            self.stopped_better
        )
    }

    /// Totals as JSON, with the shares and rates derived from them.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("plain data serializes");
        v["gpu_busy_share"] = self.gpu_busy_share().into();
        v["compile_busy_share"] = self.compile_busy_share().into();
        v["rounds_per_variant"] = self.rounds_per_variant().into();
        v["measured_per_s"] = self.measured_per_s().into();
        v
    }
}

fn share(busy: f64, capacity: f64) -> f64 {
    if capacity > 0.0 {
        (busy / capacity).min(1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(wall_s: f64, timing_s: f64, compile_s: f64, timed: u64, rounds: u64) -> Utilization {
        Utilization {
            wall_s,
            gpu_workers: 1,
            compile_workers: 4,
            spent: Spent {
                compile_s,
                timing_s,
                ..Spent::default()
            },
            measured: timed,
            timed,
            rounds,
            stopped_early: 0,
            stopped_better: 0,
            compiled_ahead: 0,
            known_skipped: 0,
            guarded_assembled: 0,
            timed_assembled: 0,
            compiled: 0,
            screened_out: 0,
            promotion: Spent::default(),
            promotion_measured: 0,
            measured_ahead: 0,
            promotion_carried: 0,
            gpu_starts: 0,
            gpu_start_s: 0.0,
            gpu_idle_s: 0.0,
            gpu_start_parts: StartUp::default(),
            engine: EngineSpent::default(),
        }
    }

    /// Shares are busy time over workers times wall time; spans add.
    #[test]
    fn shares_and_sums() {
        let mut u = span(10.0, 8.0, 20.0, 4, 60);
        assert!((u.gpu_busy_share() - 0.8).abs() < 1e-12);
        assert!((u.compile_busy_share() - 0.5).abs() < 1e-12);
        assert_eq!(u.rounds_per_variant(), 15.0);
        u.add(&span(10.0, 10.0, 0.0, 4, 20));
        assert!((u.gpu_busy_share() - 0.9).abs() < 1e-12);
        assert_eq!(u.rounds_per_variant(), 10.0);
        assert_eq!(Utilization::default().gpu_busy_share(), 0.0);
        let json = u.to_json();
        assert_eq!(json["rounds"], 80);
        assert!((json["gpu_busy_share"].as_f64().unwrap() - 0.9).abs() < 1e-12);
        u.spent.sanitizer_s = 5.0;
        assert!(
            (u.gpu_busy_share() - 0.9).abs() < 1e-12,
            "the safety gate runs beside the GPU workers"
        );
    }

    /// `+=` adds every field; spans keep the larger worker counts.
    #[test]
    fn every_field_adds() {
        let parts = StartUp {
            setup_s: 1.0,
            context_s: 2.0,
            inputs_s: 3.0,
            upload_s: 4.0,
            references_s: 5.0,
        };
        let mut sum = parts.clone();
        sum += &parts;
        assert_eq!(
            sum,
            StartUp {
                setup_s: 2.0,
                context_s: 4.0,
                inputs_s: 6.0,
                upload_s: 8.0,
                references_s: 10.0,
            }
        );
        let mut u = span(1.0, 1.0, 1.0, 1, 1);
        u.gpu_start_parts = parts.clone();
        let mut other = u.clone();
        other.gpu_workers = 3;
        u.add(&other);
        assert_eq!((u.gpu_workers, u.compile_workers), (3, 4));
        assert_eq!(u.gpu_start_parts, sum);
        assert_eq!(u.spent.compile_s, 2.0);
        assert_eq!(u.measured, 2);
    }
}
