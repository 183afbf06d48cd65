//! Every fixture's spec on the simulator, against a hand-written Rust version
//! of that kernel on the spec's random inputs. This checks the simulator
//! itself, independently of the reference outputs the evaluator derives from
//! the original kernel. Also: results do not depend on the worker count.

use crate::common;

use gevo_model::sim::Limits;
use gevo_model::spec::{self, ArgValue, Instance, Scalar, TestSet};
use gevo_search::eval::simulate;

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn buffer(inst: &Instance, i: usize) -> &[u8] {
    match &inst.args[i] {
        ArgValue::Buffer { data, .. } => data,
        ArgValue::Scalar(_) => panic!("argument {i} is a scalar"),
    }
}

fn int(inst: &Instance, i: usize) -> i64 {
    match inst.args[i] {
        ArgValue::Scalar(Scalar::I32(v)) => i64::from(v),
        ArgValue::Scalar(Scalar::U32(v)) => i64::from(v),
        ArgValue::Scalar(Scalar::I64(v)) => v,
        ref other => panic!("argument {i} is {other:?}"),
    }
}

fn float(inst: &Instance, i: usize) -> f32 {
    match inst.args[i] {
        ArgValue::Scalar(Scalar::F32(v)) => v,
        ref other => panic!("argument {i} is {other:?}"),
    }
}

/// The expected final contents of every argument (empty for scalars).
fn reference(kernel: &str, inst: &Instance) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = inst
        .args
        .iter()
        .map(|a| match a {
            ArgValue::Buffer { data, .. } => data.clone(),
            ArgValue::Scalar(_) => Vec::new(),
        })
        .collect();
    let put_f32 = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    match kernel {
        "vecadd" => {
            let (a, b, n) = (
                f32s(buffer(inst, 0)),
                f32s(buffer(inst, 1)),
                int(inst, 3) as usize,
            );
            let mut c = f32s(buffer(inst, 2));
            for i in 0..n {
                c[i] = a[i] + b[i];
            }
            out[2] = put_f32(&c);
        }
        "reduce" => {
            let (input, n) = (f32s(buffer(inst, 0)), int(inst, 2) as usize);
            let threads = inst.launches[0].block[0] as usize;
            let mut sums = f32s(buffer(inst, 1));
            for (blk, sum) in sums
                .iter_mut()
                .enumerate()
                .take(inst.launches[0].grid[0] as usize)
            {
                let mut s: Vec<f32> = (0..threads)
                    .map(|t| {
                        input
                            .get(blk * threads + t)
                            .copied()
                            .filter(|_| blk * threads + t < n)
                            .unwrap_or(0.0)
                    })
                    .collect();
                let mut step = 1;
                while step < threads {
                    for t in (0..threads).step_by(2 * step) {
                        s[t] += s[t + step];
                    }
                    step *= 2;
                }
                *sum = s[0];
            }
            out[1] = put_f32(&sums);
        }
        "stencil" => {
            let (input, nx, ny) = (
                f32s(buffer(inst, 0)),
                int(inst, 2) as usize,
                int(inst, 3) as usize,
            );
            let mut o = f32s(buffer(inst, 1));
            let at = |x: usize, y: usize| input[y * nx + x];
            for y in 0..ny {
                for x in 0..nx {
                    o[y * nx + x] = if x == 0 || y == 0 || x == nx - 1 || y == ny - 1 {
                        at(x, y)
                    } else {
                        0.2f32
                            * ((((at(x, y) + at(x, y - 1)) + at(x, y + 1)) + at(x - 1, y))
                                + at(x + 1, y))
                    };
                }
            }
            out[1] = put_f32(&o);
        }
        "nw" => {
            let (n, penalty) = (int(inst, 2) as usize, int(inst, 3) as i32);
            let w = n + 1;
            let mut score = i32s(buffer(inst, 0));
            let rf = i32s(buffer(inst, 1));
            for tile in 0..inst.launches[0].grid[0] as usize {
                let s = &mut score[tile * w * w..(tile + 1) * w * w];
                let r = &rf[tile * n * n..(tile + 1) * n * n];
                for i in 1..=n {
                    for j in 1..=n {
                        let diag = s[(i - 1) * w + j - 1] + r[(i - 1) * n + j - 1];
                        let up = s[(i - 1) * w + j] - penalty;
                        let left = s[i * w + j - 1] - penalty;
                        s[i * w + j] = diag.max(up).max(left);
                    }
                }
            }
            out[0] = score.iter().flat_map(|v| v.to_le_bytes()).collect();
        }
        "loops" => {
            let (x, n, iters) = (f32s(buffer(inst, 0)), int(inst, 2) as usize, int(inst, 3));
            let mut y = f32s(buffer(inst, 1));
            for i in 0..n {
                y[i] = 0.0;
                for it in 0..iters {
                    let fiters = (0..iters).fold(0f32, |a, _| a + 1.0);
                    let t = x[i] * (it as f32 / fiters);
                    let mut p = 0f32;
                    for k in (0..=8).rev() {
                        p = p * t + 1.0 / (k + 1) as f32;
                    }
                    y[i] += p;
                }
            }
            out[1] = put_f32(&y);
        }
        "expf" => {
            let (x, n, scale) = (f32s(buffer(inst, 0)), int(inst, 2) as usize, float(inst, 3));
            let mut y = f32s(buffer(inst, 1));
            for i in 0..n {
                y[i] = x[i].exp() * scale;
            }
            out[1] = put_f32(&y);
        }
        other => panic!("no reference for {other}"),
    }
    out
}

/// A fixture's spec and its original kernel, lowered for the simulator.
fn fixture(name: &str) -> (spec::Spec, Vec<gevo_model::sim::code::Program>) {
    let spec = spec::load(&common::spec_fixture(name)).unwrap();
    let ir = gevo_ir::KernelIr::load_kernels(&spec.ir, &spec.kernels).unwrap();
    let program = ir.lower_all(&ir.empty_patch()).unwrap();
    (spec, program)
}

#[test]
fn fixtures_match_hand_written_references() {
    for name in common::KERNEL_FIXTURES {
        let (spec, program) = fixture(name);
        for test in spec.tests(TestSet::All) {
            let inst = spec.instantiate(test).unwrap();
            let (_, outputs) = simulate(
                &program,
                &inst,
                Limits {
                    block_step_budget: u64::MAX,
                },
                2,
            )
            .unwrap_or_else(|v| panic!("{name} {}: {v}", test.name));
            let expected = reference(name, &inst);
            for i in spec.outputs() {
                let ArgValue::Buffer { elem, .. } = &inst.args[i] else {
                    continue;
                };
                // The simulator executes the IR's operation order, which is
                // the source's: outputs match bit for bit.
                let exact = spec::Acceptance {
                    metric: spec::Metric::Exact,
                    tolerance: 0.0,
                };
                let c = spec::compare(&exact, *elem, &expected[i], &outputs[i]);
                assert!(
                    c.passed,
                    "{name} {} output {}: {c:?}",
                    test.name, spec.args[i].name
                );
            }
        }
    }
}

#[test]
fn results_do_not_depend_on_worker_count_or_run() {
    for name in common::KERNEL_FIXTURES {
        let (spec, program) = fixture(name);
        let test = &spec.heldout[0];
        let inst = spec.instantiate(test).unwrap();
        let limits = Limits {
            block_step_budget: u64::MAX,
        };
        let one = simulate(&program, &inst, limits, 1).unwrap();
        let two = simulate(&program, &inst, limits, 2).unwrap();
        let again = simulate(&program, &inst, limits, 2).unwrap();
        assert_eq!(one, two, "{name}: 1 vs 2 workers");
        assert_eq!(two, again, "{name}: two runs");
    }
}
