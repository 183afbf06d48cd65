//! The classification rule on tables of planted costs.

use super::*;
use crate::evolve::Build;
use gevo_model::assessment::TestSummary;
use rand::SeedableRng;

/// Answers from a table keyed by the subset's edits (as indices into
/// the planted patch): a cost ratio, or `None` for a failing test.
struct Table {
    patch: Patch,
    rows: BTreeMap<Vec<usize>, Option<f64>>,
    runs: usize,
    /// 0: exact costs (the simulator); else GPU-like timing rounds, each
    /// off by up to this fraction, so each cost has a bootstrap interval.
    noise: f64,
    /// Each raced subset and its line, in the order asked.
    lines: Vec<(Vec<usize>, f64)>,
    /// Timing rounds answered, over every subset.
    rounds: usize,
}

/// 40 paired rounds (a held-out test's) around `cost`, off by up to
/// `noise` each, drawn from a fixed seed.
fn rounds(cost: f64, noise: f64, seed: u64) -> gevo_model::stats::Timing {
    use rand::Rng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut jitter = |base: f64| base * (1.0 + noise * rng.gen_range(-1.0..1.0));
    gevo_model::stats::Timing {
        original_ns: (0..40).map(|_| jitter(1000.0)).collect(),
        variant_ns: (0..40).map(|_| jitter(1000.0 * cost)).collect(),
    }
}

impl Table {
    fn indices(&self, p: &Patch) -> Vec<usize> {
        p.edits
            .iter()
            .map(|e| self.patch.edits.iter().position(|x| x == e).unwrap())
            .collect()
    }
}

impl Backend for Table {
    fn scope(&self) -> Scope {
        Scope {
            backend: "table".into(),
            target: "-".into(),
        }
    }
    fn test_set_hash(&self, _: TestSet) -> String {
        "t".into()
    }
    fn compile(&mut self, _: &[Patch]) -> Result<Vec<Result<Build, String>>, BackendError> {
        unreachable!("contributions only assess")
    }
    fn assess(&mut self, patches: &[Patch], _: TestSet) -> Result<Vec<Assessment>, BackendError> {
        Ok(patches.iter().map(|p| self.answer(p, None)).collect())
    }
    fn assess_against(
        &mut self,
        patches: &[Patch],
        _: TestSet,
        line: f64,
    ) -> Result<Vec<Assessment>, BackendError> {
        Ok(patches.iter().map(|p| self.answer(p, Some(line))).collect())
    }
}

impl Table {
    /// The planted answer for `p`; raced against `line` like the GPU
    /// worker: batches of 5 rounds until the interval leaves the line.
    fn answer(&mut self, p: &Patch, line: Option<f64>) -> Assessment {
        self.runs += 1;
        let key = self.indices(p);
        if let Some(line) = line {
            self.lines.push((key.clone(), line));
        }
        let cost = *self
            .rows
            .get(&key)
            .unwrap_or_else(|| panic!("no row {key:?}"));
        let seed = key.iter().fold(1u64, |h, i| h * 31 + *i as u64);
        let timing = cost
            .filter(|_| self.noise > 0.0)
            .map(|c| raced(rounds(c, self.noise, seed), line));
        self.rounds += timing.as_ref().map_or(0, |t| t.variant_ns.len());
        Assessment {
            tests: vec![TestSummary {
                test: "t".into(),
                failure: cost.is_none().then(|| ("race".into(), "planted".into())),
                cost: cost.map(|c| (c * 10000.0).round() as u64),
                original_cost: 10000,
                error: Some(0.0),
                timing,
                kernels: Vec::new(),
            }],
            device: None,
        }
    }
}

/// The first rounds of `full` that decide against `line`, 5 at a time
/// (all of them unraced, or where none decides).
fn raced(full: gevo_model::stats::Timing, line: Option<f64>) -> gevo_model::stats::Timing {
    let Some(line) = line else { return full };
    for k in (5..full.variant_ns.len()).step_by(5) {
        let first = gevo_model::stats::Timing {
            original_ns: full.original_ns[..k].to_vec(),
            variant_ns: full.variant_ns[..k].to_vec(),
        };
        if gevo_model::stats::race(&[&first], line, 0.0).is_some() {
            return first;
        }
    }
    full
}

/// Three edits of the vecadd fixture that replay in every subset
/// (`vecadd.three-edits.patch.json`).
fn three_edits() -> (KernelIr, Patch) {
    let kernels =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kernels");
    let spec = gevo_model::spec::load(&kernels.join("vecadd.gevo.toml")).unwrap();
    let ir = KernelIr::load(&spec.ir, Some(&spec.kernel)).unwrap();
    let text = std::fs::read_to_string(kernels.join("vecadd.three-edits.patch.json")).unwrap();
    let patch = Patch::from_json(&text).unwrap();
    let all = [0usize, 1, 2];
    for mask in 1u8..8 {
        let s: Vec<usize> = all
            .iter()
            .copied()
            .filter(|i| mask & (1 << i) != 0)
            .collect();
        ir.check(&subset(&patch, &s))
            .unwrap_or_else(|e| panic!("subset {s:?} does not replay: {e}"));
    }
    let e = &patch.edits;
    assert!(
        e[0] != e[1] && e[1] != e[2] && e[0] != e[2],
        "three distinct edits"
    );
    (ir, patch)
}

type Row = (&'static [usize], Option<f64>);

/// Each case: the cost of every subset (`None`: fails a test), and the
/// classes expected for edits 0, 1, 2.
fn planted_cases() -> &'static [(&'static str, &'static [Row], [Class; 3])] {
    use Class::*;
    &[
        (
            "0 carries the speed, 1 enables it, 2 is neutral",
            &[
                (&[0, 1, 2], Some(0.5)),
                (&[0], None),
                (&[1], Some(1.0)),
                (&[2], Some(1.0)),
                (&[1, 2], Some(1.0)),
                (&[0, 2], None),
                (&[0, 1], Some(0.5)),
            ],
            [CarriesSpeed, Enabling, Neutral],
        ),
        (
            "two independent speedups, and a slower-alone edit nothing needs",
            &[
                (&[0, 1, 2], Some(0.6)),
                (&[0], Some(0.8)),
                (&[1], Some(0.8)),
                (&[2], Some(1.05)),
                (&[1, 2], Some(0.8)),
                (&[0, 2], Some(0.8)),
                (&[0, 1], Some(0.6)),
            ],
            [CarriesSpeed, CarriesSpeed, Neutral],
        ),
        (
            "an edit within the threshold is neutral; one that is slower alone but makes a failing edit pass enables it",
            &[
                (&[0, 1, 2], Some(0.7)),
                (&[0], Some(1.0)),
                (&[1], Some(1.02)),
                (&[2], None),
                (&[1, 2], Some(0.7)),
                (&[0, 2], None),
                (&[0, 1], Some(1.02)),
            ],
            [Neutral, Enabling, CarriesSpeed],
        ),
        (
            "a small full gain (0.6%) is judged at its own scale: without 0 it is gone",
            &[
                (&[0, 1, 2], Some(0.994)),
                (&[0], Some(0.994)),
                (&[1], Some(1.0)),
                (&[2], Some(1.0)),
                (&[1, 2], Some(1.0)),
                (&[0, 2], Some(0.994)),
                (&[0, 1], Some(0.994)),
            ],
            [CarriesSpeed, Neutral, Neutral],
        ),
    ]
}

#[test]
fn edits_are_classified_by_the_documented_rule() {
    let (ir, patch) = three_edits();
    for (name, rows, expected) in planted_cases() {
        let mut backend = Table {
            patch: patch.clone(),
            rows: rows.iter().map(|(k, c)| (k.to_vec(), *c)).collect(),
            runs: 0,
            noise: 0.0,
            lines: Vec::new(),
            rounds: 0,
        };
        let c = analyze(&ir, &mut backend, &patch, &Options::default()).unwrap();
        let got: Vec<Class> = c.edits.iter().map(|e| e.class).collect();
        assert_eq!(got, expected, "{name}: {:#?}", c.edits);
        // Full, 3 alone and 3 leave-one-out (= the 3 pairs): 7 runs.
        assert_eq!((c.variants_measured, backend.runs), (7, 7), "{name}");
        assert_eq!(c.pairs.len(), 3, "{name}");
        assert!(c.edits.iter().all(|e| e.kernel == "vecadd"), "{name}");
    }
}

/// With GPU-like timing noise the same costs are judged by their
/// intervals: a 3% loss within 8% noise per round is no loss with
/// confidence, a 40% loss is; the exact costs call both losses.
#[test]
fn on_noisy_timings_only_a_loss_beyond_the_intervals_carries_speed() {
    use Class::*;
    let rows: BTreeMap<Vec<usize>, Option<f64>> = [
        (vec![0, 1, 2], Some(0.60)),
        (vec![0], Some(1.0)),
        (vec![1], Some(0.62)),
        (vec![2], Some(1.0)),
        (vec![1, 2], Some(0.62)), // without 0: 3% slower than the full patch
        (vec![0, 2], Some(1.0)),  // without 1: all of the speed gone
        (vec![0, 1], Some(0.60)),
    ]
    .into_iter()
    .collect();
    let (ir, patch) = three_edits();
    for (noise, expected) in [
        (0.0, [CarriesSpeed, CarriesSpeed, Neutral]),
        (0.08, [Neutral, CarriesSpeed, Neutral]),
    ] {
        let mut backend = Table {
            patch: patch.clone(),
            rows: rows.clone(),
            runs: 0,
            noise,
            lines: Vec::new(),
            rounds: 0,
        };
        let c = analyze(&ir, &mut backend, &patch, &Options::default()).unwrap();
        let got: Vec<Class> = c.edits.iter().map(|e| e.class).collect();
        assert_eq!(got, expected, "noise {noise}: {:#?}", c.edits);
        let without_0 = c.edits[0].without.cost().unwrap();
        assert_eq!(noise > 0.0, without_0.lo < without_0.hi, "{without_0:?}");
    }
}

#[test]
fn a_failing_full_patch_or_an_empty_one_is_an_error() {
    let (ir, patch) = three_edits();
    let mut backend = Table {
        patch: patch.clone(),
        rows: BTreeMap::from([(vec![0, 1, 2], None)]),
        runs: 0,
        noise: 0.0,
        lines: Vec::new(),
        rounds: 0,
    };
    // Every subset must have a row: give the others one.
    for s in [
        vec![0],
        vec![1],
        vec![2],
        vec![0, 1],
        vec![0, 2],
        vec![1, 2],
    ] {
        backend.rows.insert(s, Some(1.0));
    }
    let err = analyze(&ir, &mut backend, &patch, &Options::default()).unwrap_err();
    assert!(
        matches!(err, ContribError::FullFails(ref m) if m.contains("planted")),
        "{err}"
    );
    let err = analyze(&ir, &mut backend, &ir.empty_patch(), &Options::default()).unwrap_err();
    assert!(matches!(err, ContribError::Empty), "{err}");
}

/// Two findings worded the same way are one line of the edit's.
#[test]
fn each_relies_on_line_is_attached_once() {
    let (ir, patch) = three_edits();
    let rows: BTreeMap<Vec<usize>, Option<f64>> = wanted_subsets(3, true)
        .into_iter()
        .map(|s| (s, Some(0.9)))
        .collect();
    let mut backend = Table {
        patch: patch.clone(),
        rows,
        runs: 0,
        noise: 0.0,
        lines: Vec::new(),
        rounds: 0,
    };
    let mut c = analyze(&ir, &mut backend, &patch, &Options::default()).unwrap();
    let line = |kind, text: &str| Reliance {
        kind,
        line: text.into(),
    };
    let barrier = line(RelianceKind::Barrier, "the barrier at k.cu:4 ordered ...");
    let sizes = line(RelianceKind::TestSizes, "holds at the tests' sizes");
    c.attach_relies(ReliesOn {
        edits: vec![
            vec![barrier.clone(), sizes.clone(), barrier.clone()],
            vec![sizes.clone()],
            vec![],
        ],
        runs: 2,
        seconds: 0.1,
    });
    assert_eq!(c.edits[0].relies_on, [barrier, sizes.clone()]);
    assert_eq!(c.edits[1].relies_on, [sizes]);
    assert!(c.edits[2].relies_on.is_empty());
}

fn table(patch: &Patch, rows: &[Row]) -> Table {
    Table {
        patch: patch.clone(),
        rows: rows.iter().map(|(k, c)| (k.to_vec(), *c)).collect(),
        runs: 0,
        noise: 0.0,
        lines: Vec::new(),
        rounds: 0,
    }
}

/// The GPU's plan without pairs: the leave-one-outs first, each edit alone
/// only where its leave-one-out did not show it carrying speed. The classes
/// are those of every subset measured, with fewer runs.
#[test]
fn alone_where_needed_gives_the_same_classes_with_fewer_runs() {
    let every = Options {
        max_pair_edits: 2,
        ..Options::default()
    };
    let staged = Options {
        alone_where_needed: true,
        ..every.clone()
    };
    let all_carry: &[Row] = &[
        (&[0, 1, 2], Some(0.5)),
        (&[0], Some(0.8)),
        (&[1], Some(0.8)),
        (&[2], Some(0.9)),
        (&[1, 2], Some(0.7)),
        (&[0, 2], Some(0.7)),
        (&[0, 1], Some(0.6)),
    ];
    let cases = planted_cases()
        .iter()
        .map(|(name, rows, _)| (*name, *rows))
        .chain([("every edit carries without it", all_carry)]);
    let (ir, patch) = three_edits();
    for (name, rows) in cases {
        let mut full = table(&patch, rows);
        let expected = analyze(&ir, &mut full, &patch, &every).unwrap();
        let mut backend = table(&patch, rows);
        let c = analyze(&ir, &mut backend, &patch, &staged).unwrap();
        let classes = |c: &Contributions| c.edits.iter().map(|e| e.class).collect::<Vec<_>>();
        assert_eq!(classes(&c), classes(&expected), "{name}: {:#?}", c.edits);
        let skipped = c
            .edits
            .iter()
            .filter(|e| e.alone == Outcome::NotMeasured)
            .count();
        assert_eq!(backend.runs, 7 - skipped, "{name}");
        assert_eq!(c.variants_measured, backend.runs, "{name}");
        for e in &c.edits {
            if e.alone == Outcome::NotMeasured {
                assert_eq!(e.class, Class::CarriesSpeed, "{name}: {e:#?}");
            }
        }
    }
    let mut backend = table(&patch, all_carry);
    let c = analyze(&ir, &mut backend, &patch, &staged).unwrap();
    assert_eq!(backend.runs, 4, "the full patch and three leave-one-outs");
    assert!(c.edits[0].alone.phrase().contains("not measured"));
}

/// The GPU's plan races each subset but the full patch against the line
/// that decides it: a leave-one-out against `F.hi + m`, an edit alone
/// against `1 - m`. On noisy rounds it gives the classes of every round,
/// in fewer rounds.
#[test]
fn raced_subsets_give_the_same_classes_in_fewer_rounds() {
    let unraced = Options {
        race: false,
        ..Options::on_gpu()
    };
    let (ir, patch) = three_edits();
    // Edit 0 carries the speed; 1 and 2 change nothing.
    let rows: &[Row] = &[
        (&[0, 1, 2], Some(0.60)),
        (&[1, 2], Some(0.95)),
        (&[0, 2], Some(0.60)),
        (&[0, 1], Some(0.60)),
        (&[0], Some(0.62)),
        (&[1], Some(1.0)),
        (&[2], Some(1.0)),
    ];
    for noise in [0.02, 0.08] {
        let mut every = Table {
            noise,
            ..table(&patch, rows)
        };
        let expected = analyze(&ir, &mut every, &patch, &unraced).unwrap();
        assert!(every.lines.is_empty(), "unraced: {:?}", every.lines);
        let mut backend = Table {
            noise,
            ..table(&patch, rows)
        };
        let c = analyze(&ir, &mut backend, &patch, &Options::on_gpu()).unwrap();
        let classes = |c: &Contributions| c.edits.iter().map(|e| e.class).collect::<Vec<_>>();
        assert_eq!(
            classes(&c),
            classes(&expected),
            "noise {noise}: {:#?}",
            c.edits
        );
        assert_eq!(classes(&c)[0], Class::CarriesSpeed, "noise {noise}");
        let m = 0.01 * (1.0 - c.full.estimate);
        for (key, line) in &backend.lines {
            let want = match key.len() {
                2 => c.full.hi + m,
                1 => 1.0 - m,
                _ => panic!("the full patch is never raced: {key:?}"),
            };
            assert!(
                (line - want).abs() < 1e-12,
                "{key:?}: {line} against {want}"
            );
        }
        assert_eq!(
            backend.lines.len(),
            backend.runs - 1,
            "all but the full patch"
        );
        assert!(
            backend.rounds < every.rounds,
            "noise {noise}: {} rounds raced, {} in full",
            backend.rounds,
            every.rounds
        );
    }
}
