//! Breeding's parents: with `valid_parents_first`, valid ones where the
//! population has any; and the count of children bred from rejected members
//! (`Counters::children_of_rejected`).

use super::super::promote::tests::{member, two_variants};
use super::super::{Config, Engine, Member, Outcome};

/// Eight members, alternating two variants, the first `rejected` of them
/// rejected.
fn members(rejected: usize) -> Vec<Member> {
    let (_, a, b) = two_variants();
    (0..8)
        .map(|i| {
            let m = member(if i % 2 == 0 { &a } else { &b }, 0.9);
            match i < rejected {
                true => Member {
                    outcome: Outcome::Rejected {
                        reason: "differs".into(),
                        kind: "mismatch".into(),
                    },
                    ..m
                },
                false => m,
            }
        })
        .collect()
}

/// The children `config` breeds from `members`, and how many of them had a
/// rejected parent.
fn breed(config: Config, members: &[Member]) -> (usize, u64) {
    let (ir, ..) = two_variants();
    let config = Config {
        population: 8,
        islands: 1,
        distinct_ptx: false,
        ..config
    };
    let mut engine = Engine::new(config, 3).unwrap();
    let children = engine.breed(&ir, members).len();
    assert!(children > 0);
    (children, engine.counters().children_of_rejected)
}

#[test]
fn children_of_rejected_members_are_bred_only_where_none_is_valid() {
    let config = Config {
        valid_parents_first: true,
        ..Config::default()
    };
    // (rejected members of 8, children counted: every child bred or none).
    // One valid member is enough: a tournament that drew only rejected
    // members is drawn again from the valid ones.
    for (rejected, every_child) in [(8, true), (0, false), (7, false)] {
        let (children, counted) = breed(config.clone(), &members(rejected));
        let expected = if every_child { children } else { 0 };
        assert_eq!(counted as usize, expected, "{rejected} rejected members");
    }
}

/// Without `valid_parents_first` (the default), GEVO's tournament: one that
/// draws only rejected members breeds from one.
#[test]
fn by_default_a_tournament_may_pick_a_rejected_parent() {
    let (_, counted) = breed(Config::default(), &members(7));
    assert!(counted > 0);
}
