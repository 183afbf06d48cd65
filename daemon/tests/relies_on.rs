//! What planted edits of the relies fixture rely on
//! (`gevo_search::contrib::relies`), as tests/fixtures/kernels/relies.cases.txt
//! says: the accesses a deleted barrier ordered and the barrier that now
//! orders them, a store nothing reads, a load moved across a barrier, and
//! a bounds check that holds only at the tests' sizes.

use crate::common;

use gevo_ir::{Edit, KernelIr};
use gevo_model::spec::TestSet;
use gevo_search::contrib::relies;

/// One planted patch and what its edits' lines must (not) say.
struct Case {
    name: String,
    edits: Vec<Edit>,
    /// (edit index, expectation): `Holds(words)`, `Lacks(words)`, `None`.
    expect: Vec<(usize, Expect)>,
}

enum Expect {
    Holds(String),
    Lacks(String),
    Nothing,
}

fn cases(text: &str) -> Vec<Case> {
    let mut out: Vec<Case> = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("# "))
    {
        if let Some(name) = line.strip_prefix("== ") {
            out.push(Case {
                name: name.to_string(),
                edits: Vec::new(),
                expect: Vec::new(),
            });
            continue;
        }
        let case = out.last_mut().expect("a case starts with `== name`");
        if line.starts_with('[') {
            case.edits = serde_json::from_str(line).unwrap();
            continue;
        }
        let (n, words) = line[1..].split_once(' ').expect("`#N words`");
        let index = n.parse::<usize>().unwrap() - 1;
        let expect = match words {
            "-" => Expect::Nothing,
            w if w.starts_with('!') => Expect::Lacks(w[1..].to_string()),
            w => Expect::Holds(w.to_string()),
        };
        case.expect.push((index, expect));
    }
    out
}

#[test]
fn planted_edits_say_what_they_rely_on() {
    let root = common::repo_root().join("tests/fixtures/kernels");
    let spec = gevo_model::spec::load(&root.join("relies.gevo.toml")).unwrap();
    let ir = KernelIr::load(&spec.ir, Some(&spec.kernel)).unwrap();
    let evaluator = relies::evaluator(spec, 1).unwrap();
    let cases = cases(&std::fs::read_to_string(root.join("relies.cases.txt")).unwrap());
    assert_eq!(cases.len(), 6);
    for case in cases {
        let mut patch = ir.empty_patch();
        patch.edits = case.edits.clone();
        // Planted as a search would validate them: the user's tests pass.
        let results = evaluator.evaluate(&patch, TestSet::All).unwrap();
        assert!(
            results.iter().all(|r| r.passed()),
            "{}: {:?}",
            case.name,
            results.iter().find_map(|r| r.failure.as_ref())
        );
        let found = relies::analyze(&ir, &evaluator, &patch).unwrap();
        assert_eq!(found.edits.len(), patch.edits.len(), "{}", case.name);
        assert!(found.runs > 0, "{}", case.name);
        for (i, expect) in &case.expect {
            let lines: Vec<&str> = found.edits[*i].iter().map(|r| r.line.as_str()).collect();
            let ok = match expect {
                Expect::Holds(w) => lines.iter().any(|l| l.contains(w.as_str())),
                Expect::Lacks(w) => !lines.iter().any(|l| l.contains(w.as_str())),
                Expect::Nothing => lines.is_empty(),
            };
            assert!(ok, "{}: edit #{}: {lines:#?}", case.name, i + 1);
        }
    }
}

/// In a pipeline each edit is read in its own kernel: a barrier deleted in
/// the second kernel and one in the last each say what they ordered there.
#[test]
fn pipeline_edits_are_read_in_their_own_kernels() {
    let spec = gevo_model::spec::load(&common::pipeline_fixture("lu")).unwrap();
    let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).unwrap();
    let barriers: Vec<u32> = ir
        .listing()
        .unwrap()
        .into_iter()
        .filter(|(_, text)| text.contains("@llvm.nvvm.barrier0()"))
        .map(|(id, _)| id.0)
        .collect();
    let kernel = |id: u32| ir.kernel_of(gevo_ir::InstId(id)).unwrap();
    let first = *barriers.iter().find(|&&b| kernel(b) == 1).unwrap();
    let last = *barriers.iter().rev().find(|&&b| kernel(b) == 3).unwrap();
    let mut patch = ir.empty_patch();
    patch.edits = serde_json::from_str(&format!(
        r#"[{{"op":"delete","target":{first}}},{{"op":"delete","target":{last}}}]"#
    ))
    .unwrap();
    let evaluator = relies::evaluator(spec, 1).unwrap();
    let found = relies::analyze(&ir, &evaluator, &patch).unwrap();
    for (i, id) in [first, last].into_iter().enumerate() {
        let at = ir.source_line(id).unwrap();
        let lines: Vec<&str> = found.edits[i].iter().map(|r| r.line.as_str()).collect();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("deleted the __syncthreads() at {at} ordered"))),
            "edit #{} (kernel {}): {lines:#?}",
            i + 1,
            ir.kernels()[kernel(id)]
        );
    }
}
