//! The pipeline fixtures (several kernels, launches in loops taking the
//! loop variable, buffer swaps) on the simulator against hand-written Rust
//! versions of the whole application; per-launch verdicts name the launch.

use crate::common;

use gevo_ir::KernelIr;
use gevo_model::sim::Limits;
use gevo_model::spec::{self, ArgValue, Instance, Scalar, TestSet};
use gevo_search::eval::{simulate, Evaluator};

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn buffer<'a>(inst: &'a Instance, spec: &spec::Spec, name: &str) -> &'a [u8] {
    match &inst.args[spec.arg_index(name).unwrap()] {
        ArgValue::Buffer { data, .. } => data,
        ArgValue::Scalar(_) => panic!("{name} is a scalar"),
    }
}

fn int(inst: &Instance, spec: &spec::Spec, name: &str) -> i64 {
    match inst.args[spec.arg_index(name).unwrap()] {
        ArgValue::Scalar(Scalar::I32(v)) => i64::from(v),
        ref other => panic!("{name} is {other:?}"),
    }
}

/// Needleman-Wunsch scores over the whole matrix, row by row.
fn wavefront(a: &[i32], b: &[i32], n: usize, gap: i32) -> Vec<i32> {
    let w = n + 1;
    let mut s = vec![0i32; w * w];
    for t in 0..=n {
        s[t] = -gap * t as i32;
        s[t * w] = -gap * t as i32;
    }
    for i in 1..=n {
        for j in 1..=n {
            let diag = s[(i - 1) * w + j - 1] + if a[i - 1] == b[j - 1] { 3 } else { -1 };
            s[i * w + j] = diag
                .max(s[(i - 1) * w + j] - gap)
                .max(s[i * w + j - 1] - gap);
        }
    }
    s
}

/// LU without pivoting (Doolittle) of `a` with n added to its diagonal, in
/// f64: the pipeline's blocked f32 version agrees up to rounding.
fn lu(a: &[f32], n: usize) -> Vec<f64> {
    let mut m: Vec<f64> = a.iter().map(|&x| f64::from(x)).collect();
    for i in 0..n {
        m[i * n + i] += n as f64;
    }
    for k in 0..n {
        for i in k + 1..n {
            m[i * n + k] /= m[k * n + k];
            for j in k + 1..n {
                m[i * n + j] -= m[i * n + k] * m[k * n + j];
            }
        }
    }
    m
}

/// The smoothing steps, then the sums of 64-element blocks and their total.
fn pyramid(x: &[i32], steps: usize) -> (Vec<i32>, Vec<i32>, i32) {
    let n = x.len();
    let mut cur = x.to_vec();
    for s in 0..steps {
        let next: Vec<i32> = (0..n)
            .map(|i| {
                if i > s && i + 1 + s < n {
                    (cur[i - 1] + 2 * cur[i] + cur[i + 1]) >> 2
                } else {
                    cur[i]
                }
            })
            .collect();
        cur = next;
    }
    let partial: Vec<i32> = cur
        .chunks(64)
        .map(|c| c.iter().fold(0i32, |a, &v| a.wrapping_add(v)))
        .collect();
    let total = partial.iter().fold(0i32, |a, &v| a.wrapping_add(v));
    (cur, partial, total)
}

fn original(spec: &spec::Spec) -> Vec<gevo_model::sim::code::Program> {
    let ir = KernelIr::load_kernels(&spec.ir, &spec.kernels).unwrap();
    ir.lower_all(&ir.empty_patch()).unwrap()
}

#[test]
fn pipeline_fixtures_match_hand_written_applications() {
    for name in common::PIPELINE_FIXTURES {
        let spec = spec::load(&common::pipeline_fixture(name)).unwrap();
        let programs = original(&spec);
        assert_eq!(programs.len(), spec.kernels.len(), "{name}");
        for test in spec.tests(TestSet::All) {
            let inst = spec.instantiate(test).unwrap();
            let limits = Limits {
                block_step_budget: u64::MAX,
            };
            let (_, out) = simulate(&programs, &inst, limits, 2)
                .unwrap_or_else(|v| panic!("{name} {}: {v}", test.name));
            let output = |arg: &str| &out[spec.arg_index(arg).unwrap()];
            let n = test.params["n"] as usize;
            match name {
                "wavefront" => {
                    let a = i32s(buffer(&inst, &spec, "a"));
                    let b = i32s(buffer(&inst, &spec, "b"));
                    let gap = int(&inst, &spec, "gap") as i32;
                    assert_eq!(
                        i32s(output("score")),
                        wavefront(&a, &b, n, gap),
                        "{name} {}",
                        test.name
                    );
                }
                "lu" => {
                    let want = lu(&f32s(buffer(&inst, &spec, "a")), n);
                    let got = f32s(output("a"));
                    let worst = got
                        .iter()
                        .zip(&want)
                        .map(|(&g, &w)| (f64::from(g) - w).abs())
                        .fold(0.0, f64::max);
                    assert!(worst < 1e-4, "{name} {}: max error {worst}", test.name);
                }
                "pyramid" => {
                    let steps = test.params["steps"] as usize;
                    let (signal, partial, total) =
                        pyramid(&i32s(buffer(&inst, &spec, "cur")), steps);
                    assert_eq!(i32s(output("next")), signal, "{name} {}", test.name);
                    assert_eq!(i32s(output("partial")), partial, "{name} {}", test.name);
                    assert_eq!(i32s(output("total")), vec![total], "{name} {}", test.name);
                }
                other => panic!("no reference for {other}"),
            }
        }
    }
}

#[test]
fn launches_follow_the_loops_and_take_the_loop_variable() {
    let spec = spec::load(&common::pipeline_fixture("lu")).unwrap();
    let test = &spec.train[1]; // n = 24: three block steps
    let inst = spec.instantiate(test).unwrap();
    let shape: Vec<(usize, [u32; 3], String)> = inst
        .launches
        .iter()
        .map(|l| {
            let off = match l.params.get(2) {
                Some(spec::LaunchParam::Scalar(Scalar::I32(v))) => v.to_string(),
                _ => "-".into(),
            };
            (l.kernel, l.grid, off)
        })
        .collect();
    let want: Vec<(usize, [u32; 3], String)> = vec![
        (0, [1, 1, 1], "-".into()),
        (1, [1, 1, 1], "0".into()),
        (2, [2, 1, 1], "0".into()),
        (3, [2, 2, 1], "0".into()),
        (1, [1, 1, 1], "8".into()),
        (2, [1, 1, 1], "8".into()),
        (3, [1, 1, 1], "8".into()),
        (1, [1, 1, 1], "16".into()),
    ];
    assert_eq!(shape, want);
    assert_eq!(
        inst.launches[5].label,
        "launches[1].body[1] (lu_perimeter, k = 1)"
    );
    assert_eq!(inst.launches[7].label, "launches[2] (lu_diagonal)");
    assert_eq!(
        spec.thread_count(test).unwrap(),
        64 + 8 + 16 + 256 + 8 + 8 + 64 + 8
    );

    // The pyramid's swaps: step s reads the buffer step s-1 wrote, and the
    // launches after the loop see `next` bound to the last step's output.
    let spec = spec::load(&common::pipeline_fixture("pyramid")).unwrap();
    let inst = spec.instantiate(&spec.train[0]).unwrap(); // 5 steps
    let slots: Vec<Vec<usize>> = inst
        .launches
        .iter()
        .map(|l| {
            l.params
                .iter()
                .filter_map(|p| match *p {
                    spec::LaunchParam::Buffer { slot, .. } => Some(slot),
                    _ => None,
                })
                .collect()
        })
        .collect();
    assert_eq!(
        slots,
        vec![
            vec![0, 1],
            vec![1, 0],
            vec![0, 1],
            vec![1, 0],
            vec![0, 1],
            vec![1, 2],
            vec![2, 3]
        ]
    );
    assert_eq!(inst.final_binding, vec![0, 1, 2, 3, 4]);
}

#[test]
fn a_faulting_launch_is_named_with_its_loop_variable() {
    // wf_lower's row index moved one row up: out of bounds on the last
    // diagonals only.
    let spec = spec::load(&common::pipeline_fixture("wavefront")).unwrap();
    let eval = Evaluator::new(spec, 1).unwrap();
    let ir = eval.ir();
    let listing = ir.listing().unwrap();
    let lower = ir
        .chosen_kernels()
        .iter()
        .position(|k| *k == "wf_lower")
        .unwrap();
    // The barrier of wf_lower deleted is harmless; an operand of the
    // diagonal's load address set to zero is not: find the first load of wf_lower.
    let load = listing
        .iter()
        .find(|(id, text)| ir.kernel_of(*id) == Some(lower) && text.contains("load i32"))
        .map(|(id, _)| *id)
        .unwrap();
    let mut patch = ir.empty_patch();
    patch.edits.push(gevo_ir::Edit {
        kind: gevo_ir::EditKind::OperandReplace {
            user: load,
            operand: 0,
            value: gevo_ir::ValueRef::Const(gevo_ir::ConstKind::Zero),
        },
        repairs: Vec::new(),
    });
    let results = eval.evaluate(&patch, TestSet::Train).unwrap();
    let failure = results[0]
        .failure
        .as_ref()
        .expect("a null load faults")
        .to_string();
    assert!(
        failure.starts_with("in launches[2].body[0] (wf_lower, d = 26)"),
        "{failure}"
    );
}
