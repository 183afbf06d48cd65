//! NSGA-II's two orderings over minimized objective pairs: non-dominated
//! rank (front number) and crowding distance within a front. Pure functions;
//! every tie is broken by index so the order never depends on anything else.

/// A point to minimize: (cost, error). Rejected variants are `None`: they
/// rank behind every valid one, in one last front.
pub type Objectives = Option<(f64, f64)>;

/// `a` dominates `b`: no worse in both objectives and better in one.
pub fn dominates(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 <= b.0 && a.1 <= b.1 && (a.0 < b.0 || a.1 < b.1)
}

/// Each point's front: 0 for the non-dominated, 1 for those dominated only by
/// front 0, and so on. Rejected points get one front past the last.
pub fn fronts(points: &[Objectives]) -> Vec<usize> {
    let n = points.len();
    let mut front = vec![usize::MAX; n];
    let valid: Vec<usize> = (0..n).filter(|&i| points[i].is_some()).collect();
    let mut dominated_by = vec![0usize; n];
    let mut dominates_list: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &i in &valid {
        for &j in &valid {
            let (a, b) = (points[i].unwrap(), points[j].unwrap());
            if dominates(a, b) {
                dominates_list[i].push(j);
            } else if dominates(b, a) {
                dominated_by[i] += 1;
            }
        }
    }
    let mut current: Vec<usize> = valid
        .iter()
        .copied()
        .filter(|&i| dominated_by[i] == 0)
        .collect();
    let mut rank = 0;
    while !current.is_empty() {
        let mut next = Vec::new();
        for &i in &current {
            front[i] = rank;
            for &j in &dominates_list[i] {
                dominated_by[j] -= 1;
                if dominated_by[j] == 0 {
                    next.push(j);
                }
            }
        }
        next.sort_unstable();
        current = next;
        rank += 1;
    }
    for (i, p) in points.iter().enumerate() {
        if p.is_none() {
            front[i] = rank;
        }
    }
    front
}

/// Crowding distance of each point within its front: the normalized size of
/// the box its neighbours span; a front's extremes get infinity.
pub fn crowding(points: &[Objectives], front: &[usize]) -> Vec<f64> {
    let n = points.len();
    let mut distance = vec![0.0; n];
    let fronts_count = front.iter().copied().max().map_or(0, |m| m + 1);
    for f in 0..fronts_count {
        let members: Vec<usize> = (0..n)
            .filter(|&i| front[i] == f && points[i].is_some())
            .collect();
        if members.is_empty() {
            continue;
        }
        for objective in 0..2 {
            let value = |i: usize| {
                let p = points[i].unwrap();
                if objective == 0 {
                    p.0
                } else {
                    p.1
                }
            };
            let mut sorted = members.clone();
            sorted.sort_by(|&a, &b| value(a).total_cmp(&value(b)).then(a.cmp(&b)));
            let (first, last) = (sorted[0], sorted[sorted.len() - 1]);
            let span = value(last) - value(first);
            distance[first] = f64::INFINITY;
            distance[last] = f64::INFINITY;
            if span > 0.0 {
                for w in sorted.windows(3) {
                    distance[w[1]] += (value(w[2]) - value(w[0])) / span;
                }
            }
        }
    }
    distance
}

/// Indices ordered best first: by front, then by larger crowding distance,
/// then by index.
pub fn order(points: &[Objectives]) -> Vec<usize> {
    let front = fronts(points);
    let crowd = crowding(points, &front);
    let mut idx: Vec<usize> = (0..points.len()).collect();
    idx.sort_by(|&a, &b| {
        front[a]
            .cmp(&front[b])
            .then(crowd[b].total_cmp(&crowd[a]))
            .then(a.cmp(&b))
    });
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(points: &[Objectives], expect_fronts: &[usize], expect_order: &[usize]) {
        assert_eq!(fronts(points), expect_fronts, "fronts of {points:?}");
        assert_eq!(order(points), expect_order, "order of {points:?}");
    }

    #[test]
    fn fronts_and_order() {
        // Two non-dominated extremes, one point they both dominate, a
        // duplicate of an extreme (equal points do not dominate each other),
        // and a rejected variant.
        check(
            &[
                Some((0.9, 0.0)),
                Some((0.8, 1e-6)),
                Some((1.0, 1e-6)),
                Some((0.9, 0.0)),
                None,
            ],
            &[0, 0, 1, 0, 2],
            &[0, 1, 3, 2, 4],
        );
        // A chain: each dominates the next.
        check(
            &[Some((3.0, 3.0)), Some((1.0, 1.0)), Some((2.0, 2.0))],
            &[2, 0, 1],
            &[1, 2, 0],
        );
        // All rejected: one front, index order.
        check(&[None, None], &[0, 0], &[0, 1]);
    }

    #[test]
    fn crowding_prefers_isolated_points() {
        // One front of four on a line; the inner point with more room wins.
        let points = [
            Some((0.0, 4.0)),
            Some((1.0, 3.0)),
            Some((3.5, 0.5)),
            Some((4.0, 0.0)),
        ];
        let front = fronts(&points);
        assert_eq!(front, vec![0, 0, 0, 0]);
        let c = crowding(&points, &front);
        assert!(c[0].is_infinite() && c[3].is_infinite());
        assert!(c[1] > c[2], "{c:?}");
        assert_eq!(order(&points), vec![0, 3, 1, 2]);
    }
}
