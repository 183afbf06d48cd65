//! A spec checked against its kernel before anything runs: the number of
//! arguments, buffer or scalar, and each scalar's type (an `f32` for an
//! `int` parameter was read as its bits and reported as an out-of-bounds
//! access far away). Each refusal names the spec line, the argument, the
//! spec's type and the kernel's, and the kernel by its demangled name.
//! Data-driven: one `check(args, expect)` per case over the `scaled` kernel
//! of tests/fixtures/spec_init/params.cu, `scaled(float const* src,
//! float* dst, float k, int n)`.

use crate::common;

use gevo_search::eval::Evaluator;

const BUFFER_IN: &str = "kind = \"buffer\"\ntype = \"f32\"\nlen = \"n\"\nrole = \"in\"\nfill = { uniform = [0.0, 1.0] }";
const BUFFER_OUT: &str = "kind = \"buffer\"\ntype = \"f32\"\nlen = \"n\"\nrole = \"out\"";

fn scalar(ty: &str, value: &str) -> String {
    format!("kind = \"scalar\"\ntype = \"{ty}\"\nvalue = {value}")
}

/// The spec with these `[[args]]` (name, body) must be refused with a
/// one-line message holding every `expect` substring, at the line of
/// `[[args]]` entry `at` (the argument it names).
fn check(args: &[(&str, String)], at: usize, expect: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let ir = common::repo_root().join("tests/fixtures/spec_init/params.ll");
    let mut text = format!(
        "version = 1\nir = {:?}\nkernel = \"scaled\"\n\n[launch]\ngrid = [\"cdiv(n, 64)\"]\nblock = [64]\n",
        ir.display().to_string()
    );
    for (name, body) in args {
        text += &format!("\n[[args]]\nname = \"{name}\"\n{body}\n");
    }
    text += "\n[tests]\ntrain = [{ n = 100, seed = 1 }]\nheldout = [{ n = 300, seed = 2 }]\n\
             \n[acceptance]\nmetric = \"max_abs\"\ntolerance = 1e-6\n";
    let path = dir.path().join("k.gevo.toml");
    std::fs::write(&path, &text).unwrap();
    let spec = gevo_model::spec::load(&path).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let message = match Evaluator::new(spec, 1) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    };
    assert!(!message.contains('\n'), "one line: {message}");
    let line = text
        .lines()
        .enumerate()
        .filter(|(_, l)| *l == "[[args]]")
        .nth(at)
        .unwrap()
        .0
        + 1;
    let located = format!("{}:{line}:", path.display());
    assert!(
        message.starts_with(&located),
        "{located} in {message}\n{text}"
    );
    for want in expect {
        assert!(message.contains(want), "{want:?} not in {message}");
    }
}

#[test]
fn a_scalar_of_the_wrong_type_is_refused_naming_both_types() {
    // f32 for `int n`: same width, another type.
    check(
        &[
            ("src", BUFFER_IN.into()),
            ("dst", BUFFER_OUT.into()),
            ("k", scalar("f32", "2.0")),
            ("n", scalar("f32", "\"n\"")),
        ],
        3,
        &[
            "args[3]: `n`: type = \"f32\", but parameter 3 of kernel \
             scaled(float const*, float*, float, int) is `int` (a 32-bit integer)",
            "would read the value's bits as a 32-bit integer",
        ],
    );
    // i64 for `int n`: another width.
    check(
        &[
            ("src", BUFFER_IN.into()),
            ("dst", BUFFER_OUT.into()),
            ("k", scalar("f32", "2.0")),
            ("n", scalar("i64", "\"n\"")),
        ],
        3,
        &[
            "args[3]: `n`: type = \"i64\", but parameter 3 of kernel scaled(float const*, float*, \
           float, int) is `int` (a 32-bit integer)",
        ],
    );
    // A buffer where the kernel takes a float.
    check(
        &[
            ("src", BUFFER_IN.into()),
            ("dst", BUFFER_OUT.into()),
            ("k", BUFFER_IN.into()),
            ("n", scalar("i32", "\"n\"")),
        ],
        2,
        &["args[2]: `k`: a buffer, but parameter 2 of kernel scaled(float const*, float*, float, int) \
           is `float` (a 32-bit float): pass a scalar"],
    );
}

/// The scalars swapped: each has the other's type; the message says the
/// order that fits.
#[test]
fn arguments_in_another_order_are_named_in_the_kernels_order() {
    check(
        &[
            ("src", BUFFER_IN.into()),
            ("dst", BUFFER_OUT.into()),
            ("n", scalar("i32", "\"n\"")),
            ("k", scalar("f32", "2.0")),
        ],
        2,
        &[
            "args[2]: `n`: type = \"i32\", but parameter 2 of kernel scaled(float const*, float*, \
             float, int) is `float` (a 32-bit float)",
            "the spec's arguments have the kernel's types in another order: the kernel takes \
             src (buffer), dst (buffer), k (f32 scalar), n (i32 scalar)",
        ],
    );
}

#[test]
fn a_wrong_argument_count_names_the_spec_line_and_the_demangled_kernel() {
    // One too few: the last argument's line.
    check(
        &[
            ("src", BUFFER_IN.into()),
            ("dst", BUFFER_OUT.into()),
            ("k", scalar("f32", "2.0")),
        ],
        2,
        &["the spec lists 3 arguments but kernel scaled(float const*, float*, float, int) takes 4"],
    );
    // One too many: the first extra argument's line.
    check(
        &[
            ("src", BUFFER_IN.into()),
            ("dst", BUFFER_OUT.into()),
            ("k", scalar("f32", "2.0")),
            ("n", scalar("i32", "\"n\"")),
            ("m", scalar("i32", "\"n\"")),
        ],
        4,
        &["args[4]: the spec lists 5 arguments but kernel scaled(float const*, float*, float, int) takes 4"],
    );
}

/// The pipeline form names the kernel as the spec writes it (here its
/// mangled symbol): the refusal names it demangled all the same, once, at
/// the launch's argument.
#[test]
fn a_pipeline_launch_names_a_mangled_kernel_demangled() {
    let dir = tempfile::tempdir().unwrap();
    let ir = common::repo_root().join("tests/fixtures/spec_init/params.ll");
    let mut text = format!(
        "version = 1\nir = {:?}\nkernel = [\"_Z6scaledPKfPffi\"]\n\n\
         [[launches]]\nkernel = \"_Z6scaledPKfPffi\"\ngrid = [\"cdiv(n, 64)\"]\nblock = [64]\n\
         args = [\"src\", \"dst\", \"k\", {{ name = \"count\", type = \"f32\", value = \"n\" }}]\n",
        ir.display().to_string()
    );
    for (name, body) in [
        ("src", BUFFER_IN.to_string()),
        ("dst", BUFFER_OUT.to_string()),
        ("k", scalar("f32", "2.0")),
    ] {
        text += &format!("\n[[args]]\nname = \"{name}\"\n{body}\n");
    }
    text += "\n[tests]\ntrain = [{ n = 100, seed = 1 }]\nheldout = [{ n = 300, seed = 2 }]\n\
             \n[acceptance]\nmetric = \"max_abs\"\ntolerance = 1e-6\n";
    let path = dir.path().join("k.gevo.toml");
    std::fs::write(&path, &text).unwrap();
    let spec = gevo_model::spec::load(&path).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let message = match Evaluator::new(spec, 1) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    };
    assert!(
        message.contains(
            "launches[0].args[3]: `count`: type = \"f32\", but parameter 3 of kernel \
             scaled(float const*, float*, float, int) is `int` (a 32-bit integer)"
        ),
        "{message}"
    );
    assert!(!message.contains("_Z6scaled"), "mangled: {message}");
}
