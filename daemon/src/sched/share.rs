//! A job's share of the slots, from what its search found: the stride
//! weight its slices are charged at ([`super::charge`]). A job that found
//! something within the last `recent_generations` committed generations (a
//! lower train cost than any before, or the variant that is now its best
//! validated one) gets `improved_weight`; one that found nothing for
//! `stalled_generations` generations gets half a plain job's weight, a
//! quarter after twice as many, and so on down to `stalled_floor`; any
//! other job 1. The weight goes back up with the job's next find, and a new
//! version of the kernel is a new job that starts at 1.
//!
//! Progress is counted in committed generations and follows from the
//! committed search alone (each generation's best train cost and the
//! checkpoint's best validated variant), so a restarted daemon that replays
//! a job's generation records weighs it as before. Weights only decide which
//! runnable job goes next: a job alone runs every slice, whatever its weight.

use crate::config::serve::ScheduleSection;

/// What a job's search found, in committed generations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Progress {
    /// The last committed generation.
    last: Option<u64>,
    /// The lowest best train cost of any committed generation, and the
    /// first generation that reached it.
    train: Option<(f64, u64)>,
    /// The generation that found the best validated variant.
    validated: Option<u64>,
}

impl Progress {
    /// Generation `generation` was committed, its population's best train
    /// cost `best_cost` (none: no valid member).
    pub fn committed(&mut self, generation: u64, best_cost: Option<f64>) {
        self.last = Some(generation);
        if let Some(cost) = best_cost {
            if self.train.is_none_or(|(best, _)| cost < best) {
                self.train = Some((cost, generation));
            }
        }
    }

    /// The best validated variant is now the one generation `found` found
    /// (none: nothing validated yet).
    pub fn validated(&mut self, found: Option<u64>) {
        self.validated = found;
    }

    /// The last generation that found something, when one did.
    pub fn last_found(&self) -> Option<u64> {
        self.train.map(|(_, g)| g).max(self.validated)
    }

    /// Committed generations since the last find (all of them when nothing
    /// was found); none before the first generation is committed.
    pub fn without_find(&self) -> Option<u64> {
        let last = self.last?;
        Some(match self.last_found() {
            Some(found) => last.saturating_sub(found),
            None => last + 1,
        })
    }
}

/// A job's stride weight, and why it is below 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    pub weight: f64,
    /// Set when the weight is reduced: the generations without a find.
    pub stalled_for: Option<u64>,
}

/// The share of a job with `progress` under `schedule`'s keys.
pub fn share(progress: &Progress, schedule: &ScheduleSection) -> Share {
    let full = Share {
        weight: 1.0,
        stalled_for: None,
    };
    let Some(without) = progress.without_find() else {
        return full; // nothing committed yet
    };
    if progress.last_found().is_some() && without <= schedule.recent_generations {
        return Share {
            weight: schedule.improved_weight,
            stalled_for: None,
        };
    }
    let stretches = match schedule.stalled_generations {
        0 => 0,
        n => without / n,
    };
    if stretches == 0 {
        return full;
    }
    // 2^-64 is below any floor the range allows.
    let halved = 0.5f64.powi(stretches.min(64) as i32);
    let weight = halved.max(schedule.stalled_floor);
    if weight >= 1.0 {
        return full;
    }
    Share {
        weight,
        stalled_for: Some(without),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{charge, pick, Candidate};
    use super::*;
    use std::time::Duration;

    /// The defaults: improved_weight 4 within 10 generations, halved each
    /// 50 generations without a find, down to 1/4.
    fn defaults() -> ScheduleSection {
        ScheduleSection::default()
    }

    /// Progress after committing `costs` as generations 0, 1, ... and
    /// validating a best found in `validated`.
    fn history(costs: &[Option<f64>], validated: Option<u64>) -> Progress {
        let mut p = Progress::default();
        for (g, &cost) in costs.iter().enumerate() {
            p.committed(g as u64, cost);
        }
        p.validated(validated);
        p
    }

    /// `n` generations of best train cost `cost`.
    fn flat(n: usize, cost: f64) -> Vec<Option<f64>> {
        vec![Some(cost); n]
    }

    fn then(mut a: Vec<Option<f64>>, b: Vec<Option<f64>>) -> Vec<Option<f64>> {
        a.extend(b);
        a
    }

    /// A history and what it should give under the defaults.
    struct Case {
        what: &'static str,
        /// Best train cost per committed generation, from 0.
        costs: Vec<Option<f64>>,
        /// The generation that found the best validated variant.
        validated: Option<u64>,
        last_found: Option<u64>,
        without_find: Option<u64>,
        weight: f64,
    }

    fn case(
        what: &'static str,
        costs: Vec<Option<f64>>,
        validated: Option<u64>,
        last_found: Option<u64>,
        without_find: Option<u64>,
        weight: f64,
    ) -> Case {
        Case {
            what,
            costs,
            validated,
            last_found,
            without_find,
            weight,
        }
    }

    #[test]
    fn weights_follow_the_progress_history() {
        let cases = [
            case("nothing committed", vec![], None, None, None, 1.0),
            case(
                "generation 0 is a find",
                flat(1, 1.0),
                None,
                Some(0),
                Some(0),
                4.0,
            ),
            case(
                "10 generations after it",
                flat(11, 1.0),
                None,
                Some(0),
                Some(10),
                4.0,
            ),
            case(
                "11 generations after it",
                flat(12, 1.0),
                None,
                Some(0),
                Some(11),
                1.0,
            ),
            case(
                "49 generations after it",
                flat(50, 1.0),
                None,
                Some(0),
                Some(49),
                1.0,
            ),
            case("50: halved", flat(51, 1.0), None, Some(0), Some(50), 0.5),
            case(
                "99: still a half",
                flat(100, 1.0),
                None,
                Some(0),
                Some(99),
                0.5,
            ),
            case(
                "100: a quarter",
                flat(101, 1.0),
                None,
                Some(0),
                Some(100),
                0.25,
            ),
            case(
                "1000: the floor",
                flat(1001, 1.0),
                None,
                Some(0),
                Some(1000),
                0.25,
            ),
            case(
                "a lower train cost is a find",
                then(flat(100, 1.0), flat(5, 0.9)),
                None,
                Some(100),
                Some(4),
                4.0,
            ),
            case(
                "an equal or higher one is not",
                then(then(flat(10, 0.9), flat(50, 1.2)), flat(50, 0.9)),
                None,
                Some(0),
                Some(109),
                0.25,
            ),
            case(
                "the best validated variant's generation is a find",
                flat(120, 1.0),
                Some(112),
                Some(112),
                Some(7),
                4.0,
            ),
            case(
                "an old validated best is no newer find",
                then(flat(30, 1.0), flat(60, 0.8)),
                Some(12),
                Some(30),
                Some(59),
                0.5,
            ),
            case(
                "no valid member ever: every generation counts",
                vec![None; 50],
                None,
                None,
                Some(50),
                0.5,
            ),
            case(
                "no valid member lately keeps the last find",
                then(flat(3, 1.0), vec![None; 60]),
                None,
                Some(0),
                Some(62),
                0.5,
            ),
        ];
        for c in cases {
            let p = history(&c.costs, c.validated);
            assert_eq!(p.last_found(), c.last_found, "{}: last find", c.what);
            assert_eq!(p.without_find(), c.without_find, "{}: without", c.what);
            let s = share(&p, &defaults());
            assert_eq!(s.weight, c.weight, "{}: weight", c.what);
            let reduced = c.without_find.filter(|_| c.weight < 1.0);
            assert_eq!(s.stalled_for, reduced, "{}: why", c.what);
        }
    }

    #[test]
    fn the_keys_set_the_steps_and_the_floor() {
        let stalled = history(&flat(301, 1.0), None); // 300 without a find
        for (stalled_generations, stalled_floor, weight) in [
            (50, 0.25, 0.25),
            (100, 0.25, 0.25),
            (150, 0.25, 0.25),
            (200, 0.25, 0.5),
            (301, 0.25, 1.0),
            (100, 0.01, 0.125),
            (1, 0.01, 0.01),
            (50, 1.0, 1.0),
            (0, 0.25, 1.0), // off
        ] {
            let schedule = ScheduleSection {
                stalled_generations,
                stalled_floor,
                ..defaults()
            };
            let s = share(&stalled, &schedule);
            assert_eq!(s.weight, weight, "{stalled_generations}, {stalled_floor}");
            assert_eq!(s.stalled_for.is_some(), weight < 1.0);
        }
        // The recent window takes precedence over the halving.
        let schedule = ScheduleSection {
            recent_generations: 400,
            ..defaults()
        };
        assert_eq!(share(&stalled, &schedule).weight, 4.0);
    }

    /// Slices of 1 s over jobs whose progress stays as given; the order in
    /// which they ran.
    fn run(progress: &[Progress], rounds: usize) -> Vec<usize> {
        let ids: Vec<String> = (0..progress.len()).map(|i| format!("job{i}")).collect();
        let mut vtimes = vec![0.0; progress.len()];
        let mut order = Vec::new();
        for _ in 0..rounds {
            let candidates: Vec<Candidate> = ids
                .iter()
                .zip(&vtimes)
                .map(|(id, &vtime)| Candidate { id, vtime })
                .collect();
            let next = pick(&candidates).expect("a runnable job");
            let i = ids.iter().position(|id| id == next).unwrap();
            let weight = share(&progress[i], &defaults()).weight;
            vtimes[i] = charge(vtimes[i], Duration::from_secs(1), weight);
            order.push(i);
        }
        order
    }

    #[test]
    fn jobs_that_keep_finding_run_more_and_a_job_alone_runs_always() {
        let finding = history(&then(flat(80, 1.0), flat(5, 0.5)), None);
        let plain = history(&flat(20, 1.0), None);
        let stalled = history(&flat(60, 1.0), None);
        let long_stalled = history(&flat(500, 1.0), None);
        let count = |order: &[usize], n: usize| -> Vec<usize> {
            (0..n)
                .map(|i| order.iter().filter(|&&j| j == i).count())
                .collect()
        };
        // Weights 4, 1, 1/2, 1/4: shares 16:4:2:1.
        let order = run(&[finding, plain, stalled, long_stalled], 230);
        assert_eq!(count(&order, 4), [160, 40, 20, 10]);
        // Ties go by id, and the least-served job runs next.
        assert_eq!(run(&[stalled, plain], 6), [0, 1, 1, 0, 1, 1]);
        // A job alone keeps the slot, however long it found nothing.
        assert_eq!(run(&[long_stalled], 5), [0; 5]);
        // Where nobody finds anything, equal stalls share equally.
        assert_eq!(count(&run(&[long_stalled, long_stalled], 10), 2), [5, 5]);
    }
}
