//! Generated inputs: each fill's documented values, seeds that depend on
//! the test's seed and the argument's name only, and the same bytes on any
//! number of threads.

use super::*;

#[test]
fn fills_have_the_documented_values() {
    let dir = ir_dir();
    let args = [
        buffer("u", "f64", "{ uniform = [2.0, 3.0] }"),
        buffer("g", "f64", "{ normal = [10.0, 2.0] }"),
        buffer("r", "i16", "{ int_range = [-3, 3] }"),
        buffer("i", "u32", "{ iota = 7 }"),
        buffer("j", "f32", "\"iota\""),
        buffer("c", "i8", "{ constant = -5 }"),
        buffer("d", "f32", "{ constant = 0.5 }"),
        OUT.to_string(),
    ]
    .concat();
    let spec = spec_with(dir.path(), &args, "").unwrap();
    let test = &spec.train[0];
    let inst = spec.instantiate(test).unwrap();
    let n = 100;
    let u: Vec<f64> = data(&inst, 0)
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(u.len(), n);
    assert!(u.iter().all(|&x| (2.0..3.0).contains(&x)));
    // The first value is the documented formula on the first ChaCha8 draw.
    let mut rng = <rand_chacha::ChaCha8Rng as rand_chacha::rand_core::SeedableRng>::from_seed(
        fill_seed(1, "u"),
    );
    let first =
        (rand_chacha::rand_core::RngCore::next_u64(&mut rng) >> 11) as f64 / (1u64 << 53) as f64;
    assert_eq!(u[0], 2.0 + first);
    let g: Vec<f64> = data(&inst, 1)
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mean = g.iter().sum::<f64>() / n as f64;
    assert!((mean - 10.0).abs() < 1.0, "{mean}");
    assert!(g.iter().all(|&x| (0.0..20.0).contains(&x)));
    let r: Vec<i16> = data(&inst, 2)
        .chunks(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert!(r.iter().all(|x| (-3..=3).contains(x)));
    for v in -3..=3 {
        assert!(
            r.contains(&v),
            "int_range is inclusive: {v} missing from {r:?}"
        );
    }
    let i: Vec<u32> = data(&inst, 3)
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(i, (7..107).collect::<Vec<u32>>());
    let j: Vec<f32> = data(&inst, 4)
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(j[99], 99.0);
    assert_eq!(data(&inst, 5), &[(-5i8) as u8; 100][..]);
    assert_eq!(&data(&inst, 6)[..4], &0.5f32.to_le_bytes());
    assert_eq!(data(&inst, 7), &[0u8; 400][..]);
    assert_eq!(inst.launches[0].grid, [2, 1, 1]);
    assert_eq!(inst.launches[0].block, [64, 1, 1]);
    assert_eq!((inst.launches.len(), inst.launches[0].shared_bytes), (1, 0));
}

#[test]
fn seeds_depend_on_test_seed_and_name_only() {
    let dir = ir_dir();
    let a = [buffer("a", "f32", "{ uniform = [0, 1] }"), OUT.to_string()].concat();
    let b = [
        OUT.to_string(),
        "[[args]]\nname = \"n\"\nkind = \"scalar\"\ntype = \"i32\"\nvalue = \"n\"\n".into(),
        buffer("a", "f32", "{ uniform = [0, 1] }"),
    ]
    .concat();
    let sa = spec_with(dir.path(), &a, "").unwrap();
    let sb = spec_with(dir.path(), &b, "").unwrap();
    let ia = sa.instantiate(&sa.train[0]).unwrap();
    let ib = sb.instantiate(&sb.train[0]).unwrap();
    assert_eq!(
        data(&ia, 0),
        data(&ib, 2),
        "moving an argument does not change its data"
    );
    assert_eq!(ib.args[1], ArgValue::Scalar(Scalar::I32(100)));
    assert_ne!(fill_seed(1, "a"), fill_seed(2, "a"));
    assert_ne!(fill_seed(1, "a"), fill_seed(1, "b"));
}

/// Large random buffers are made in parts on several threads; whatever the
/// number of threads, the bytes are one generator's (an odd length checks
/// the normal fill's last, unpaired element).
#[test]
fn a_fill_made_on_several_threads_is_the_same_as_on_one() {
    let len = 3 * inputs::ELEMENTS_PER_THREAD + 3;
    let fills = [
        (Fill::Uniform { lo: -1.0, hi: 1.0 }, ElemType::F32),
        (
            Fill::Normal {
                mean: 0.0,
                stddev: 2.0,
            },
            ElemType::F64,
        ),
        (Fill::IntRange { lo: -3, hi: 300 }, ElemType::I16),
    ];
    for (fill, elem) in fills {
        let seed = fill_seed(7, "x");
        let one = inputs::generate(&fill, elem, len, seed, 1);
        assert_eq!(one.len(), len * elem.size());
        for threads in [2, 3, 4] {
            let many = inputs::generate(&fill, elem, len, seed, threads);
            assert!(one == many, "{fill:?} on {threads} threads differs");
        }
    }
}
