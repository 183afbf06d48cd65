//! The train best against the validated best over a search: since the
//! validated best last changed (or since the search began, when nothing
//! validated), how the population's best train cost ratio went. A train
//! best that keeps improving while nothing new validates is the search
//! overfitting its train tests, or promotion not keeping up; the report's
//! cost plot shows it, this says it in a sentence.

use super::GenerationPoint;

/// Two cost ratios this close are the same (the simulator's are exact).
const SAME: f64 = 1e-12;

/// What happened since the validated best last changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Since {
    /// The generation whose validated best is the current one; `None`
    /// when nothing validated (then: since the first generation).
    pub validated_at: Option<u64>,
    /// The validated best's cost ratio (1 / its speedup).
    pub validated: Option<f64>,
    /// Generations committed after `validated_at` (all of them, when
    /// nothing validated).
    pub generations: u64,
    /// Their wall seconds, where the store has them.
    pub seconds: Option<f64>,
    /// The train best at `validated_at` (at the first generation), and the
    /// lowest since.
    pub train_from: Option<f64>,
    pub train_to: Option<f64>,
    /// Generations since in which the train best reached a new low.
    pub train_improvements: u64,
}

/// The course since the validated best last changed; `None` without a
/// committed generation.
pub fn since(points: &[GenerationPoint]) -> Option<Since> {
    let last = points.last()?;
    let validated = last.best_validated;
    // The first point whose validated best is the current one.
    let start = match validated {
        Some(v) => points
            .iter()
            .position(|p| p.best_validated.is_some_and(|c| (c - v).abs() <= SAME))
            .expect("the last point has it"),
        None => 0,
    };
    let (at, after) = (&points[start], &points[start + 1..]);
    // Nothing validated: the whole search is the span.
    let span = if validated.is_some() { after } else { points };
    let mut low = at.best_train;
    let mut improvements = 0;
    for cost in after.iter().filter_map(|p| p.best_train) {
        if low.is_none_or(|l| cost < l - SAME) {
            low = Some(cost);
            improvements += 1;
        }
    }
    let timed: Vec<f64> = span.iter().filter_map(|p| p.seconds).collect();
    Some(Since {
        validated_at: validated.map(|_| at.generation),
        validated,
        generations: span.len() as u64,
        seconds: (!timed.is_empty()).then(|| timed.iter().sum()),
        train_from: at.best_train,
        train_to: low,
        train_improvements: improvements,
    })
}

impl Since {
    /// The train best beside the validated best, in a sentence or two:
    /// `Nothing new validated in the 3 generations (1.4 s) since
    /// generation 0 ...`.
    pub fn sentence(&self) -> String {
        let span = match self.seconds {
            Some(s) if self.generations > 0 => format!(" ({s:.1} s)"),
            _ => String::new(),
        };
        let gens = |n: u64| format!("{n} generation{}", if n == 1 { "" } else { "s" });
        let head = match (self.validated_at, self.validated) {
            (Some(g), Some(v)) if self.generations == 0 => {
                return format!(
                    "The validated best (cost ratio {v:.4}) is from the last generation, {g}{}.",
                    self.train_to
                        .map_or(String::new(), |t| format!("; the train best is {t:.4}"))
                );
            }
            (Some(g), Some(v)) => format!(
                "Nothing new validated in the {}{span} since generation {g}, which validated the current best (cost ratio {v:.4})",
                gens(self.generations)
            ),
            _ => format!("Nothing validated in {}{span}", gens(self.generations)),
        };
        let train = match (self.train_from, self.train_to, self.train_improvements) {
            (_, None, _) => "no variant was valid on the train tests".to_string(),
            (Some(from), Some(to), 0) if (from - to).abs() <= SAME => {
                format!("the train best stayed at {to:.4}")
            }
            (from, Some(to), n) => format!(
                "the train best improved {n} time{}, {}to {to:.4}{}",
                if n == 1 { "" } else { "s" },
                from.map_or(String::new(), |f| format!("from {f:.4} ")),
                if self.validated.is_some() {
                    ": train gains the held-out tests have not confirmed"
                } else {
                    ""
                }
            ),
        };
        format!("{head}; {train}.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(
        generation: u64,
        train: Option<f64>,
        validated: Option<f64>,
        seconds: f64,
    ) -> GenerationPoint {
        GenerationPoint {
            generation,
            best_train: train,
            best_validated: validated,
            evaluations: 16,
            seconds: Some(seconds),
        }
    }

    /// The train best keeps improving after the last validation: counted,
    /// with the generations and seconds since.
    #[test]
    fn train_gains_after_the_last_validation_are_counted() {
        let points = [
            point(0, Some(0.99), None, 2.0),
            point(1, Some(0.95), Some(0.97), 1.0),
            point(2, Some(0.93), Some(0.96), 1.0),
            point(3, Some(0.93), Some(0.96), 1.5),
            point(4, Some(0.90), Some(0.96), 2.0),
            point(5, Some(0.91), Some(0.96), 0.5),
        ];
        let s = since(&points).unwrap();
        assert_eq!(
            s,
            Since {
                validated_at: Some(2),
                validated: Some(0.96),
                generations: 3,
                seconds: Some(4.0),
                train_from: Some(0.93),
                train_to: Some(0.90),
                train_improvements: 1,
            }
        );
        assert_eq!(
            s.sentence(),
            "Nothing new validated in the 3 generations (4.0 s) since generation 2, which validated the current best (cost ratio 0.9600); the train best improved 1 time, from 0.9300 to 0.9000: train gains the held-out tests have not confirmed."
        );
    }

    #[test]
    fn a_search_without_validation_or_gains_says_so() {
        let flat = [
            point(0, Some(0.98), None, 1.0),
            point(1, Some(0.98), None, 1.0),
        ];
        let s = since(&flat).unwrap();
        assert_eq!(
            (s.validated_at, s.generations, s.train_improvements),
            (None, 2, 0)
        );
        assert_eq!(
            s.sentence(),
            "Nothing validated in 2 generations (2.0 s); the train best stayed at 0.9800."
        );
        let none_valid = [point(0, None, None, 1.0), point(1, Some(0.97), None, 1.0)];
        assert!(since(&none_valid)
            .unwrap()
            .sentence()
            .ends_with("the train best improved 1 time, to 0.9700."));
        let just = [
            point(0, Some(0.98), None, 1.0),
            point(1, Some(0.9), Some(0.92), 1.0),
        ];
        assert_eq!(
            since(&just).unwrap().sentence(),
            "The validated best (cost ratio 0.9200) is from the last generation, 1; the train best is 0.9000."
        );
        assert_eq!(since(&[]), None);
    }
}
