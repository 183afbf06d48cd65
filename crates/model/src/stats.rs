//! Statistics of GPU timings: a build's undisturbed time (the lower
//! quartile of its rounds), medians, and a bootstrap confidence interval
//! for the ratio of a variant's time to the original's. Pure functions; the
//! resampling generator is seeded, so the same samples give the same
//! interval.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Paired timings of one test: round `k` ran the original and the variant
/// back to back (in alternating order), so drift hits both alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Nanoseconds per round: all of the test's launches of the original.
    pub original_ns: Vec<f64>,
    /// Nanoseconds per round: the same for the variant.
    pub variant_ns: Vec<f64>,
}

/// A point estimate with its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    pub fn point(x: f64) -> Self {
        Interval {
            estimate: x,
            lo: x,
            hi: x,
        }
    }

    /// The interval of `1 / x` (a cost ratio's speedup).
    pub fn reciprocal(self) -> Self {
        Interval {
            estimate: 1.0 / self.estimate,
            lo: 1.0 / self.hi,
            hi: 1.0 / self.lo,
        }
    }

    /// Whether the whole interval lies below `x`.
    pub fn below(&self, x: f64) -> bool {
        self.hi < x
    }
}

/// Bootstrap resamples per interval: enough that the 2.5% and 97.5%
/// quantiles move by well under the timing noise.
pub const RESAMPLES: usize = 2000;
/// Two-sided confidence of the intervals.
pub const CONFIDENCE: f64 = 0.95;
/// Fixed seed of the resampling generator: intervals are a function of the
/// samples alone.
const BOOTSTRAP_SEED: u64 = 0x6765_766f;

/// A build's undisturbed time on a test, from its timing rounds: their
/// lower quartile (interpolated between neighbours; NaN for no samples).
/// Other work on the GPU (compute-sanitizer's safety gate beside the
/// search, another process) only ever adds time to a run: a time-slice
/// of the other context adds about 2.6 ms to a 0.7 ms run, and while the
/// gate ran, 10-40% of the stencil's held-out runs were so disturbed. The
/// median breaks down as that share nears half (a bootstrap resample
/// crosses it often); the lower quartile holds while a quarter of the runs
/// is undisturbed, and where nothing disturbs them it sits within the
/// runs' own noise (0.1-0.3% on the GPU) of the median.
pub fn undisturbed(samples: &[f64]) -> f64 {
    quantile_in_place(&mut samples.to_vec(), LOWER_QUARTILE)
}

/// Where [`undisturbed`] takes a build's time among its sorted rounds.
const LOWER_QUARTILE: f64 = 0.25;

/// The median; NaN for no samples. Even counts average the middle two.
pub fn median(samples: &[f64]) -> f64 {
    quantile_in_place(&mut samples.to_vec(), 0.5)
}

/// The `q` quantile of `v` (sorted in place), interpolated linearly between
/// the neighbours around `(len - 1) * q`; NaN for no samples.
fn quantile_in_place(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let at = (v.len() - 1) as f64 * q;
    let (below, share) = (at.floor() as usize, at.fract());
    match v.get(below + 1) {
        Some(next) if share > 0.0 => v[below] * (1.0 - share) + next * share,
        _ => v[below],
    }
}

/// The spread of samples around their median: the median absolute
/// deviation, relative to the median (0.02 = 2%).
pub fn relative_spread(samples: &[f64]) -> f64 {
    let m = median(samples);
    let deviations: Vec<f64> = samples.iter().map(|x| (x - m).abs()).collect();
    median(&deviations) / m
}

/// The cost ratio over several tests, `sum(undisturbed variant) /
/// sum(undisturbed original)` ([`undisturbed`]), with a percentile
/// bootstrap interval: each resample draws every test's rounds with
/// replacement (pairs stay together) and recomputes the ratio. Tests
/// without rounds are skipped; none gives NaN.
pub fn cost_ratio(tests: &[&Timing]) -> Interval {
    bootstrap(tests, ratio_of_undisturbed)
}

/// As [`cost_ratio`], for the geometric mean of the tests' own ratios
/// `undisturbed variant / undisturbed original`: every test weighs the
/// same, however long it runs, as `gevod tune` ranks configurations.
pub fn geometric_cost_ratio(tests: &[&Timing]) -> Interval {
    bootstrap(tests, geometric_mean_of_undisturbed)
}

/// A ratio statistic of the tests' rounds, drawn by index per test.
type RatioOfRounds = fn(&[&Timing], &[Vec<usize>]) -> f64;

/// `statistic` on all rounds, with its percentile bootstrap interval
/// (widened to hold the estimate).
fn bootstrap(tests: &[&Timing], statistic: RatioOfRounds) -> Interval {
    let tests: Vec<&Timing> = tests
        .iter()
        .copied()
        .filter(|t| !t.original_ns.is_empty() && t.original_ns.len() == t.variant_ns.len())
        .collect();
    if tests.is_empty() {
        return Interval::point(f64::NAN);
    }
    let all: Vec<Vec<usize>> = tests
        .iter()
        .map(|t| (0..t.original_ns.len()).collect())
        .collect();
    let estimate = statistic(&tests, &all);
    let mut rng = ChaCha8Rng::seed_from_u64(BOOTSTRAP_SEED);
    let mut resampled: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let draws: Vec<Vec<usize>> = tests
                .iter()
                .map(|t| {
                    let n = t.original_ns.len();
                    (0..n).map(|_| rng.gen_range(0..n)).collect()
                })
                .collect();
            statistic(&tests, &draws)
        })
        .collect();
    resampled.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    let at = |q: f64| resampled[((q * (RESAMPLES - 1) as f64).round() as usize).min(RESAMPLES - 1)];
    Interval {
        estimate,
        lo: at(tail).min(estimate),
        hi: at(1.0 - tail).max(estimate),
    }
}

/// Where the rounds so far place a variant against a race's threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Confidently no better than the threshold, within the margin: it does
    /// not matter to selection.
    NoBetter,
    /// Confidently better than the threshold by more than the margin: it
    /// enters selection whatever more rounds say.
    Better,
}

/// Adaptive measurement's stopping rule: the rounds so far decide a
/// variant's place when its interval lies wholly on one side of the line
/// `threshold * (1 - margin)` (a cost ratio): at or above it
/// ([`Decided::NoBetter`]), or below it ([`Decided::Better`]). Only a
/// variant whose interval straddles the line needs more rounds. Each look
/// errs on a side with chance about `(1 - CONFIDENCE) / 2`; docs/evolve.md
/// ("Adaptive measurement") says why a few looks keep that small.
pub fn race(tests: &[&Timing], threshold: f64, margin: f64) -> Option<Decided> {
    let line = threshold * (1.0 - margin);
    let ratio = cost_ratio(tests);
    if ratio.lo >= line {
        Some(Decided::NoBetter)
    } else if ratio.hi < line {
        Some(Decided::Better)
    } else {
        None
    }
}

/// `sum(undisturbed variant) / sum(undisturbed original)` over the rounds
/// `draws[t]` of each test `t`.
fn ratio_of_undisturbed(tests: &[&Timing], draws: &[Vec<usize>]) -> f64 {
    let (variant, original) = undisturbed_pairs(tests, draws)
        .into_iter()
        .fold((0.0, 0.0), |(v, o), (tv, to)| (v + tv, o + to));
    variant / original
}

fn geometric_mean_of_undisturbed(tests: &[&Timing], draws: &[Vec<usize>]) -> f64 {
    geometric_mean(
        undisturbed_pairs(tests, draws)
            .into_iter()
            .map(|(v, o)| v / o),
    )
}

/// The geometric mean of cost ratios (1 for none): how `gevod tune` sums
/// up a configuration's tests, and a carried patch's.
pub fn geometric_mean(ratios: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = ratios
        .into_iter()
        .fold((0.0, 0usize), |(sum, n), r| (sum + r.ln(), n + 1));
    (sum / n.max(1) as f64).exp()
}

/// Each test's undisturbed (variant, original) time over the drawn rounds
/// (one scratch buffer: the bootstrap calls this thousands of times).
fn undisturbed_pairs(tests: &[&Timing], draws: &[Vec<usize>]) -> Vec<(f64, f64)> {
    let mut drawn = Vec::new();
    let mut pick = |ns: &[f64], rounds: &[usize]| {
        drawn.clear();
        drawn.extend(rounds.iter().map(|&k| ns[k]));
        quantile_in_place(&mut drawn, LOWER_QUARTILE)
    };
    tests
        .iter()
        .zip(draws)
        .map(|(t, rounds)| (pick(&t.variant_ns, rounds), pick(&t.original_ns, rounds)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_distr_free::normal;

    /// Normal samples without another dependency: Box-Muller on ChaCha8.
    mod rand_distr_free {
        use rand::Rng;
        pub fn normal(rng: &mut impl Rng, mean: f64, sd: f64) -> f64 {
            let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
            let u2: f64 = rng.gen();
            mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
    }

    fn timing(seed: u64, rounds: usize, original: f64, variant: f64, noise: f64) -> Timing {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut t = Timing {
            original_ns: Vec::new(),
            variant_ns: Vec::new(),
        };
        for _ in 0..rounds {
            t.original_ns
                .push(normal(&mut rng, original, original * noise));
            t.variant_ns
                .push(normal(&mut rng, variant, variant * noise));
        }
        t
    }

    #[test]
    fn undisturbed_times_are_lower_quartiles() {
        let cases: [(&[f64], f64); 6] = [
            (&[3.0], 3.0),
            (&[2.0, 1.0], 1.25),
            (&[5.0, 1.0, 4.0, 2.0, 3.0], 2.0),
            (&[4.0, 1.0, 3.0, 2.0], 1.75),
            // Two disturbed runs of five leave it on the undisturbed ones.
            (&[700.0, 3300.0, 701.0, 3290.0, 702.0], 701.0),
            (&[1.0, 1.0, 100.0], 1.0),
        ];
        for (samples, expected) in cases {
            assert_eq!(undisturbed(samples), expected, "{samples:?}");
        }
        assert!(undisturbed(&[]).is_nan());
    }

    /// Rounds of which a share of the runs, on either side, waited for a
    /// time-slice of another context (2.6 ms more, as the safety gate
    /// beside the search does to a 0.67 ms run): a 7% faster variant is
    /// still claimed faster on 40 rounds, as long as about half the runs
    /// are undisturbed, and its estimate stays where it is.
    #[test]
    fn runs_disturbed_by_other_gpu_work_do_not_hide_a_speedup() {
        let disturbed = |seed: u64, share: f64| -> Interval {
            let mut rng = ChaCha8Rng::seed_from_u64(seed + 1000);
            let mut t = timing(seed, 40, 674_000.0, 674_000.0 * 0.93, 0.002);
            for ns in t.original_ns.iter_mut().chain(t.variant_ns.iter_mut()) {
                if rng.gen_bool(share) {
                    *ns += 2_600_000.0;
                }
            }
            cost_ratio(&[&t])
        };
        for (share, at_least) in [(0.0, 20), (0.2, 20), (0.4, 18), (0.5, 14)] {
            let intervals: Vec<Interval> = (0..20).map(|seed| disturbed(seed, share)).collect();
            let claimed = intervals.iter().filter(|i| i.below(1.0)).count();
            assert!(
                claimed >= at_least,
                "{share} disturbed: {claimed}/20 claimed, {intervals:?}"
            );
            for i in &intervals {
                assert!((i.estimate - 0.93).abs() < 0.01, "{share}: {i:?}");
            }
        }
    }

    /// A long test 2x faster and a short one unchanged: the ratio of sums
    /// follows the long test, the geometric mean weighs both alike, and
    /// each interval holds its own estimate (tune's sweep reported a
    /// geometric mean beside the ratio of sums' interval, outside it).
    #[test]
    fn geometric_ratios_weigh_every_test_alike_and_hold_their_estimate() {
        let long = timing(1, 40, 1_000_000.0, 500_000.0, 0.003);
        let short = timing(2, 40, 10_000.0, 10_000.0, 0.003);
        let tests = [&long, &short];
        let sums = cost_ratio(&tests);
        let geometric = geometric_cost_ratio(&tests);
        assert!((sums.estimate - 0.505).abs() < 0.005, "{sums:?}");
        assert!(
            (geometric.estimate - 0.5f64.sqrt()).abs() < 0.005,
            "{geometric:?}"
        );
        for i in [sums, geometric] {
            assert!(
                i.lo <= i.estimate && i.estimate <= i.hi && i.hi - i.lo < 0.02,
                "{i:?}"
            );
        }
        let own: f64 = tests
            .iter()
            .map(|t| (undisturbed(&t.variant_ns) / undisturbed(&t.original_ns)).ln())
            .sum::<f64>();
        assert!((geometric.estimate - (own / 2.0).exp()).abs() < 1e-12);
    }

    #[test]
    fn medians() {
        let cases: [(&[f64], f64); 5] = [
            (&[3.0], 3.0),
            (&[3.0, 1.0, 2.0], 2.0),
            (&[4.0, 1.0, 3.0, 2.0], 2.5),
            (&[1.0, 1.0, 100.0], 1.0),
            (&[-1.0, 5.0], 2.0),
        ];
        for (samples, expected) in cases {
            assert_eq!(median(samples), expected, "{samples:?}");
        }
        assert!(median(&[]).is_nan());
        assert_eq!(relative_spread(&[10.0, 11.0, 9.0, 10.0, 30.0]), 0.1);
    }

    /// (true variant/original ratio, noise, rounds, how many of 20 seeds
    /// may claim a speedup: the interval lies below 1.0).
    #[test]
    fn intervals_claim_real_speedups_and_only_those() {
        let cases = [
            (0.80, 0.02, 20, 20..=20),
            (0.95, 0.01, 20, 20..=20),
            (0.99, 0.002, 40, 20..=20),
            (1.00, 0.05, 20, 0..=3), // the interval's 2.5% tail
            (1.00, 0.01, 40, 0..=3),
            (1.05, 0.02, 20, 0..=0),
            (0.99, 0.10, 10, 0..=9), // a 1% gain inside 10% noise
        ];
        for (ratio, noise, rounds, allowed) in cases {
            let mut claimed = 0;
            for seed in 0..20 {
                let t = timing(seed, rounds, 10_000.0, 10_000.0 * ratio, noise);
                let i = cost_ratio(&[&t]);
                assert!(i.lo <= i.estimate && i.estimate <= i.hi, "{i:?}");
                assert!(
                    (i.estimate - ratio).abs() < 4.0 * noise,
                    "estimate {i:?} for ratio {ratio}"
                );
                claimed += usize::from(i.below(1.0));
            }
            assert!(
                allowed.contains(&claimed),
                "ratio {ratio}, noise {noise}: {claimed}/20 seeds claim a speedup"
            );
        }
    }

    /// Adaptive measurement's looks after 5 and 10 of 15 rounds. Variants
    /// exactly on the stopping line (the margin better than the threshold)
    /// are rarely stopped on either side (each side's error, summed over
    /// both looks, stays under 5%; a rule on the estimate alone would stop
    /// every one of them); ones 5% worse than the threshold are stopped as
    /// no better at the first look, and ones 5% better than the line as
    /// better.
    #[test]
    fn the_stopping_rule_spares_contenders_and_decides_the_clear_cases() {
        let (threshold, margin, noise) = (0.97, 0.005, 0.01);
        let line = threshold * (1.0 - margin);
        let looks = |seed: u64, ratio: f64| -> Option<(usize, Decided)> {
            let full: Vec<Timing> = (0..3)
                .map(|t| timing(100 * seed + t, 15, 10_000.0, 10_000.0 * ratio, noise))
                .collect();
            [5, 10].into_iter().find_map(|rounds| {
                let cut: Vec<Timing> = full
                    .iter()
                    .map(|t| Timing {
                        original_ns: t.original_ns[..rounds].to_vec(),
                        variant_ns: t.variant_ns[..rounds].to_vec(),
                    })
                    .collect();
                let refs: Vec<&Timing> = cut.iter().collect();
                race(&refs, threshold, margin).map(|side| (rounds, side))
            })
        };
        // (true ratio, side it is stopped on, at which look (any: None),
        // how many of 200 seeds may be)
        let cases = [
            (line, Decided::NoBetter, None, 0..=10),
            (line, Decided::Better, None, 0..=10),
            (threshold * 1.05, Decided::NoBetter, Some(5), 190..=200),
            (line * 0.95, Decided::Better, Some(5), 190..=200),
        ];
        for (ratio, side, look, allowed) in cases {
            let seen = (0..200)
                .filter(|&seed| {
                    looks(seed, ratio)
                        .is_some_and(|(at, s)| s == side && look.is_none_or(|l| l == at))
                })
                .count();
            assert!(
                allowed.contains(&seen),
                "ratio {ratio}: stopped {side:?} at look {look:?} for {seen}/200 seeds"
            );
        }
    }

    #[test]
    fn intervals_cover_the_true_ratio_about_95_percent() {
        let covered = (0..200)
            .filter(|&seed| {
                let t = timing(seed, 30, 20_000.0, 18_000.0, 0.05);
                let i = cost_ratio(&[&t]);
                i.lo <= 0.9 && 0.9 <= i.hi
            })
            .count();
        assert!((175..=200).contains(&covered), "covered {covered}/200");
    }

    #[test]
    fn several_tests_weigh_by_time_and_resampling_is_deterministic() {
        let small = timing(1, 20, 1_000.0, 500.0, 0.01);
        let large = timing(2, 20, 100_000.0, 100_000.0, 0.01);
        let i = cost_ratio(&[&small, &large]);
        // Halving a test that takes 1% of the time gains about 0.5%.
        assert!((i.estimate - 0.995).abs() < 0.005, "{i:?}");
        assert_eq!(i, cost_ratio(&[&small, &large]));
        assert!(cost_ratio(&[]).estimate.is_nan());
        let r = Interval {
            estimate: 0.5,
            lo: 0.4,
            hi: 0.8,
        }
        .reciprocal();
        assert_eq!((r.estimate, r.lo, r.hi), (2.0, 1.25, 2.5));
    }
}
