//! Generated held-out tests: candidate test cases derived from the spec's
//! own parameters (sizes of one element, a partial block, exactly one
//! block, block multiples and +-1, a small prime, the largest train size
//! plus a prime; parameters equal in every user test made unequal; scalars
//! varied around the user's; another seed), and the lint lines saying what
//! the user's tests miss. Plain data: which candidates the original kernel
//! runs cleanly is decided by `eval`, which runs them.
//!
//! `[tests] fixed = ["rows"]` keeps a parameter at the user's values;
//! `[tests] allowed = { n = [64, 128] }` limits a parameter to the values
//! listed; `[tests] generate = 0` turns generation off (docs/spec.md).

use super::model::{ArgKind, Spec, TestCase, TestSet};
use std::collections::{BTreeMap, BTreeSet};

/// How many generated tests are kept at most by default (`[tests] generate`).
pub const DEFAULT_GENERATED: usize = 8;
/// Seeds of generated tests start here, far from hand-written ones.
const SEED_BASE: u64 = 0x9e37_0000;

/// `[tests]`' generation keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// At most this many generated tests are kept (`generate`; 0: none).
    pub max: usize,
    /// Parameters never changed (`fixed`).
    pub fixed: BTreeSet<String>,
    /// Parameters limited to the values listed (`allowed`).
    pub allowed: BTreeMap<String, Vec<f64>>,
}

impl Default for Generation {
    fn default() -> Self {
        Generation {
            max: DEFAULT_GENERATED,
            fixed: BTreeSet::new(),
            allowed: BTreeMap::new(),
        }
    }
}

/// One generated test: the case, and what it covers in words
/// (`n = 7: one partial block`, `Rx != Ry (Rx = 4, Ry = 3)`).
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub test: TestCase,
    pub why: String,
    /// The parameters it changes from the user's test it starts from.
    pub changed: BTreeSet<String>,
}

/// Parameters that size something: named by a buffer's `len` or a launch's
/// `grid`.
pub fn size_params(spec: &Spec) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for arg in &spec.args {
        if let ArgKind::Buffer { len, .. } = &arg.kind {
            out.extend(len.value.params().into_iter().map(str::to_string));
        }
    }
    for l in spec.launch_specs() {
        for g in &l.geometry.grid {
            out.extend(g.value.params().into_iter().map(str::to_string));
        }
    }
    out
}

/// A test's sizes in words (`n = 4096, m = 64`): its parameters that
/// size something ([`size_params`]), or all of them where none does.
pub fn sizes(spec: &Spec, params: &BTreeMap<String, f64>) -> String {
    let sizing = size_params(spec);
    let words = |only_sizes: bool| -> Vec<String> {
        params
            .iter()
            .filter(|(name, _)| !only_sizes || sizing.contains(*name))
            .map(|(name, value)| format!("{name} = {value}"))
            .collect()
    };
    let shown = match words(true) {
        none if none.is_empty() => words(false),
        some => some,
    };
    shown.join(", ")
}

/// The block's x extent of the widest launch, evaluated on `params` (a
/// block size using loop variables is skipped); 1 when none evaluates.
fn tile(spec: &Spec, params: &BTreeMap<String, f64>) -> u64 {
    spec.launch_specs()
        .iter()
        .filter_map(|l| l.geometry.block.first())
        .filter_map(|b| b.value.eval(params).ok())
        .map(|v| v.max(1.0) as u64)
        .max()
        .unwrap_or(1)
}

/// Pairs of parameters equal in every user test (both varying freely).
fn equal_pairs(tests: &[&TestCase], g: &Generation) -> Vec<(String, String)> {
    let Some(first) = tests.first() else {
        return Vec::new();
    };
    let names: Vec<&String> = first.params.keys().collect();
    let mut pairs = Vec::new();
    for (i, a) in names.iter().enumerate() {
        for b in &names[i + 1..] {
            let equal = tests.iter().all(
                |t| matches!((t.params.get(*a), t.params.get(*b)), (Some(x), Some(y)) if x == y),
            );
            if equal && !g.fixed.contains(*a) && !g.fixed.contains(*b) {
                pairs.push(((*a).clone(), (*b).clone()));
            }
        }
    }
    pairs
}

/// The user's test with the fewest buffer bytes (the one generated tests
/// start from).
fn base<'a>(spec: &Spec, tests: &[&'a TestCase]) -> Option<&'a TestCase> {
    tests
        .iter()
        .min_by_key(|t| spec.buffer_bytes(t).unwrap_or(usize::MAX))
        .copied()
}

fn show(v: f64) -> String {
    super::expr::format_number(v)
}

fn is_int(v: f64) -> bool {
    v.fract() == 0.0
}

/// A candidate's parameters and what it covers, before numbering.
type Raw = (BTreeMap<String, f64>, String);

/// The candidates, most telling first; `eval` keeps those the original
/// runs cleanly, up to `Generation::max`.
pub fn candidates(spec: &Spec) -> Vec<Candidate> {
    let g = spec.generation();
    let tests = spec.tests(TestSet::All);
    let Some(base) = base(spec, &tests) else {
        return Vec::new();
    };
    if g.max == 0 || spec.harness.is_some() {
        return Vec::new();
    }
    let sizes: Vec<String> = size_params(spec)
        .into_iter()
        .filter(|p| base.params.contains_key(p) && !g.fixed.contains(p))
        .collect();
    let mut out = unequal_pairs(base, &tests, g, &sizes);
    if !sizes.is_empty() {
        out.extend(size_candidates(spec, base, &sizes));
    }
    out.extend(varied(base, g, &sizes));
    out.extend(allowed_values(base, &tests, g));

    let mut seen: BTreeSet<Vec<(String, u64)>> = tests.iter().map(|t| key(&t.params)).collect();
    let mut result = Vec::new();
    for (params, why) in out {
        let allowed = params
            .iter()
            .all(|(k, v)| g.allowed.get(k).is_none_or(|a| a.contains(v)));
        if allowed && seen.insert(key(&params)) {
            result.push((params, why));
        }
    }
    // Another seed, on the base test's sizes.
    result.push((
        base.params.clone(),
        format!("another seed than {}'s", base.name),
    ));
    result
        .into_iter()
        .enumerate()
        .map(|(i, (params, why))| Candidate {
            changed: params
                .iter()
                .filter(|(k, v)| base.params.get(*k) != Some(*v))
                .map(|(k, _)| k.clone())
                .collect(),
            test: TestCase {
                name: format!("generated[{i}]"),
                seed: SEED_BASE + i as u64,
                params,
            },
            why,
        })
        .collect()
}

/// The base test's parameters with `changes` applied.
fn with(base: &TestCase, changes: &[(&str, f64)]) -> BTreeMap<String, f64> {
    let mut p = base.params.clone();
    for (k, v) in changes {
        p.insert(k.to_string(), *v);
    }
    p
}

/// Parameters equal in every user test, made unequal.
fn unequal_pairs(
    base: &TestCase,
    tests: &[&TestCase],
    g: &Generation,
    sizes: &[String],
) -> Vec<Raw> {
    let mut out = Vec::new();
    for (a, b) in equal_pairs(tests, g) {
        let va = base.params[&a];
        let vb = if sizes.contains(&b) {
            // A size: three quarters of it, or one less where that rounds back.
            let v = (va * 0.75).round().max(1.0);
            if v == va {
                va + 1.0
            } else {
                v
            }
        } else if is_int(va) {
            va + 1.0
        } else if va == 0.0 {
            0.5
        } else {
            va * 1.25
        };
        out.push((
            with(base, &[(&b, vb)]),
            format!("{a} != {b} ({a} = {}, {b} = {})", show(va), show(vb)),
        ));
    }
    out
}

/// Every size set to the values around the block that catch edge bugs,
/// then to the largest train size plus a prime.
fn size_candidates(spec: &Spec, base: &TestCase, sizes: &[String]) -> Vec<Raw> {
    let t = tile(spec, &base.params) as f64;
    let mut out = Vec::new();
    let all_sizes =
        |v: f64| -> Vec<(&str, f64)> { sizes.iter().map(|s| (s.as_str(), v)).collect() };
    let name_sizes = |v: f64| -> String {
        sizes
            .iter()
            .map(|s| format!("{s} = {}", show(v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut sized = |v: f64, what: &str| {
        if v >= 1.0 {
            out.push((
                with(base, &all_sizes(v)),
                format!("{}: {what}", name_sizes(v)),
            ));
        }
    };
    if t > 2.0 {
        sized(partial_block(t), "one partial block");
    }
    sized(1.0, "one element");
    sized(t, "exactly one block");
    sized(t + 1.0, "one block + 1");
    sized(2.0 * t - 1.0, "two blocks - 1");
    sized(2.0 * t, "two blocks");
    sized(13.0, "a small prime");
    let largest = |s: &str| {
        spec.tests(TestSet::Train)
            .iter()
            .filter_map(|t| t.params.get(s).copied())
            .fold(0.0, f64::max)
    };
    let grown: Vec<(&str, f64)> = sizes
        .iter()
        .map(|s| (s.as_str(), largest(s) + 7.0))
        .collect();
    let words = grown
        .iter()
        .map(|(s, v)| format!("{s} = {}", show(*v)))
        .collect::<Vec<_>>()
        .join(", ");
    out.push((
        with(base, &grown),
        format!("{words}: the largest train size + 7"),
    ));
    // Each size alone, the others at the user's values: where sizes are
    // tied (a grid of `cols` by `rows` blocks of `ph`), all at one value may
    // make no sense where one at a time does.
    if sizes.len() > 1 {
        for s in sizes {
            let mut alone = |v: f64, what: &str| {
                if v >= 1.0 {
                    out.push((
                        with(base, &[(s.as_str(), v)]),
                        format!("{s} = {} alone: {what}", show(v)),
                    ));
                }
            };
            if t > 2.0 {
                alone(partial_block(t), "one partial block");
            }
            alone(t + 1.0, "one block + 1");
        }
    }
    out
}

/// A size below one block of `t` (> 2): 7, or 5 or 3 below a block that
/// small.
fn partial_block(t: f64) -> f64 {
    [7.0, 5.0, 3.0].into_iter().find(|p| *p < t).unwrap_or(1.0)
}

/// Other parameters varied around the user's.
fn varied(base: &TestCase, g: &Generation, sizes: &[String]) -> Vec<Raw> {
    let mut out = Vec::new();
    for (name, &v) in &base.params {
        if sizes.contains(name) || g.fixed.contains(name) {
            continue;
        }
        let varied = if is_int(v) {
            v + 1.0
        } else if v == 0.0 {
            0.5
        } else {
            v * 0.5
        };
        out.push((
            with(base, &[(name, varied)]),
            format!("{name} = {} (varied)", show(varied)),
        ));
    }
    out
}

/// Values an `allowed` list gives that no user test has.
fn allowed_values(base: &TestCase, tests: &[&TestCase], g: &Generation) -> Vec<Raw> {
    let mut out = Vec::new();
    for (name, values) in &g.allowed {
        for v in values {
            if !tests.iter().any(|t| t.params.get(name) == Some(v)) {
                out.push((
                    with(base, &[(name, *v)]),
                    format!("{name} = {} (allowed)", show(*v)),
                ));
            }
        }
    }
    out
}

fn key(p: &BTreeMap<String, f64>) -> Vec<(String, u64)> {
    p.iter().map(|(k, v)| (k.clone(), v.to_bits())).collect()
}

/// What the user's own tests miss, one line each: no test with a partial
/// block, parameters equal in every test. Fixed parameters are not named.
pub fn lints(spec: &Spec) -> Vec<String> {
    let g = spec.generation();
    let tests = spec.tests(TestSet::All);
    let mut out = Vec::new();
    let sizes: Vec<String> = size_params(spec)
        .into_iter()
        .filter(|p| !g.fixed.contains(p))
        .collect();
    if !sizes.is_empty() && spec.harness.is_none() {
        let partial = tests.iter().any(|t| {
            let tile = tile(spec, &t.params) as f64;
            tile > 1.0
                && sizes.iter().any(|s| {
                    t.params
                        .get(s)
                        .is_some_and(|v| *v < tile || v % tile != 0.0)
                })
        });
        if !partial {
            out.push(format!(
                "no test has a partial block ({} below or off a multiple of the block): add one, or mark them fixed ([tests] fixed = [...])",
                sizes.join(", ")
            ));
        }
    }
    for (a, b) in equal_pairs(&tests, g) {
        out.push(format!(
            "{a} and {b} are equal in every test: add a test where they differ, or mark one fixed ([tests] fixed = [\"{b}\"])"
        ));
    }
    out
}

impl Spec {
    /// `[tests]`' generation keys.
    pub fn generation(&self) -> &Generation {
        &self.written.generation
    }

    /// Lifts the cap on generated tests: every candidate the spec's
    /// expressions allow is kept (within the cost and size caps).
    pub fn generate_every_candidate(&mut self) {
        self.written.generation.max = usize::MAX;
    }
}
