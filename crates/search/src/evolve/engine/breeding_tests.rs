//! Breeding counts the children it breeds from rejected members
//! (`Counters::children_of_rejected`).

use super::super::promote::tests::{member, two_variants};
use super::super::{Config, Engine, Member, Outcome};

fn rejected(m: Member) -> Member {
    Member {
        outcome: Outcome::Rejected {
            reason: "differs".into(),
            kind: "mismatch".into(),
        },
        ..m
    }
}

#[test]
fn children_of_rejected_members_are_counted() {
    let (ir, a, b) = two_variants();
    let config = Config {
        population: 8,
        islands: 1,
        distinct_ptx: false,
        ..Config::default()
    };
    // (rejected members of 8, children counted: every child bred or none)
    for (rejected_members, every_child) in [(8, true), (0, false)] {
        let members: Vec<Member> = (0..8)
            .map(|i| member(if i % 2 == 0 { &a } else { &b }, 0.9))
            .enumerate()
            .map(|(i, m)| if i < rejected_members { rejected(m) } else { m })
            .collect();
        let mut engine = Engine::new(config.clone(), 3).unwrap();
        let children = engine.breed(&ir, &members);
        assert!(!children.is_empty());
        let counted = engine.counters().children_of_rejected as usize;
        let expected = if every_child { children.len() } else { 0 };
        assert_eq!(counted, expected, "{rejected_members} rejected members");
    }
}
