//! Who runs next: stride scheduling over the runnable jobs. Each job has a
//! virtual time; the job with the least runs next and, after its slice, is
//! charged the wall time it used divided by its weight ([`share`]: larger
//! for a job that found something recently, smaller for one that stopped
//! finding), so it gets proportionally more or less GPU time while every
//! runnable job still gets some. Pure policy, no I/O: the daemon's
//! registry supplies the jobs, the clock and the outcome.

pub mod idle;
pub mod share;

use std::time::Duration;

/// One runnable job as the scheduler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<'a> {
    pub id: &'a str,
    pub vtime: f64,
}

/// The job to run next: least virtual time, ties by id (deterministic).
pub fn pick<'a>(candidates: &[Candidate<'a>]) -> Option<&'a str> {
    candidates
        .iter()
        .min_by(|a, b| a.vtime.total_cmp(&b.vtime).then_with(|| a.id.cmp(b.id)))
        .map(|c| c.id)
}

/// Virtual time after running `used` at `weight`.
pub fn charge(vtime: f64, used: Duration, weight: f64) -> f64 {
    vtime + used.as_secs_f64() / weight.max(f64::MIN_POSITIVE)
}

/// Where a new (or newly runnable) job starts: level with the least-served
/// runnable job, so it neither starves the others nor waits behind them.
pub fn entry_vtime(runnable: impl Iterator<Item = f64>) -> f64 {
    runnable
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))))
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `rounds` slices of 1 s over jobs with fixed weights; returns
    /// the slices each got.
    fn simulate(weights: &[f64], rounds: usize) -> Vec<usize> {
        let ids: Vec<String> = (0..weights.len()).map(|i| format!("job{i}")).collect();
        let mut vtimes = vec![0.0; weights.len()];
        let mut got = vec![0; weights.len()];
        for _ in 0..rounds {
            let candidates: Vec<Candidate> = ids
                .iter()
                .zip(&vtimes)
                .map(|(id, &vtime)| Candidate { id, vtime })
                .collect();
            let next = pick(&candidates).unwrap();
            let i = ids.iter().position(|id| id == next).unwrap();
            vtimes[i] = charge(vtimes[i], Duration::from_secs(1), weights[i]);
            got[i] += 1;
        }
        got
    }

    #[test]
    fn shares_follow_the_weights() {
        for (weights, expected) in [
            (vec![1.0, 1.0], vec![50, 50]),
            (vec![4.0, 1.0], vec![80, 20]),
            (vec![4.0, 1.0, 1.0, 4.0], vec![40, 10, 10, 40]),
        ] {
            assert_eq!(simulate(&weights, 100), expected, "{weights:?}");
        }
    }

    #[test]
    fn newcomers_start_level_with_the_least_served() {
        assert_eq!(entry_vtime([3.0, 1.5, 7.0].into_iter()), 1.5);
        assert_eq!(entry_vtime(std::iter::empty()), 0.0);
        assert_eq!(pick(&[]), None);
    }
}
