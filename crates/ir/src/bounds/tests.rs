//! The lexical checks: what they count, where they stop, what they name;
//! every committed IR file passes them.

use super::*;
use std::path::{Path, PathBuf};

fn shape(text: &str) -> Result<Shape, Exceeded> {
    measure(text.as_bytes())
}

fn deep(open: &str, n: usize, close: &str) -> String {
    format!("@h = global i64 {}1{}\n", open.repeat(n), close.repeat(n))
}

#[test]
fn brackets_count_outside_strings_comments_and_quoted_names() {
    let cases: [(&str, u32); 10] = [
        ("", 0),
        ("@g = global i32 0", 0),
        ("@g = global [2 x <4 x i32>] zeroinitializer", 2),
        ("!0 = !{!1, !{!2, !{!\"x\"}}}", 3),
        ("!0 = !{!\"((((\", !\"[[{{<<\"}", 1),
        (
            "; (((((( a comment\n@g = global { i32 } zeroinitializer ; {{{{",
            1,
        ),
        ("@\"(((\" = global i32 0\n%\"{{\" = type { i32 }", 1),
        ("@s = constant [3 x i8] c\"(((\"\n", 1),
        // A string may hold `;` and span lines; a comment may hold `"`.
        ("@s = constant [3 x i8] c\"a;(\n(\" ; \"\n!0 = !{}", 1),
        (
            "define void @k(ptr %p) {\n  call void @f(ptr getelementptr (i8, ptr @g, i64 1))\n}",
            3,
        ),
    ];
    for (text, nesting) in cases {
        assert_eq!(shape(text).map(|s| s.nesting), Ok(nesting), "{text:?}");
    }
}

#[test]
fn the_bracket_past_the_limit_is_named_by_line_and_column() {
    let limit = MAX_NESTING as usize;
    assert!(shape(&deep("add (i64 1, i64 ", limit, ")")).is_ok());
    let over = format!("; line 1\n{}", deep("add (i64 1, i64 ", limit + 1, ")"));
    // `@h = global i64 add (`: the first bracket is column 21, each
    // level 16 columns further.
    let column = 21 + 16 * limit as u32;
    assert_eq!(shape(&over), Err(Exceeded::Nesting { line: 2, column }));
    for (open, close) in [("{ ", " }"), ("!{", "}"), ("[1 x ", "]"), ("<1 x ", ">")] {
        let text = deep(open, 20_000, close);
        assert!(
            matches!(shape(&text), Err(Exceeded::Nesting { line: 1, .. })),
            "{open}"
        );
    }
}

fn chain(defs: impl IntoIterator<Item = String>) -> Result<Shape, Exceeded> {
    shape(&defs.into_iter().collect::<Vec<_>>().join("\n"))
}

#[test]
fn chains_of_definitions_are_measured_through_their_references() {
    let metadata = |n: usize| (1..=n).map(move |i| format!("!{i} = !{{!{}}}", i + 1));
    let types = |n: usize| (1..=n).map(move |i| format!("%T{i} = type {{ i32, %T{} }}", i + 1));
    let aliases = |n: usize| (1..=n).map(move |i| format!("@a{i} = alias i32, ptr @a{}", i + 1));
    assert_eq!(chain(metadata(10)).map(|s| s.chain), Ok(10));
    assert_eq!(chain(types(10)).map(|s| s.chain), Ok(10));
    // Without brackets a definition counts once.
    assert_eq!(chain(aliases(10)).map(|s| s.chain), Ok(10));
    // The order of definitions does not matter; a bracket inside one
    // adds to its weight.
    let reversed: Vec<String> = metadata(10).collect::<Vec<_>>().into_iter().rev().collect();
    assert_eq!(chain(reversed).map(|s| s.chain), Ok(10));
    assert_eq!(shape("!1 = !{!{!{!2}}}\n!2 = !{}").map(|s| s.chain), Ok(4));
    // A cycle weighs all its members, and a self-reference once.
    let cycle = "!1 = distinct !{!2}\n!2 = !{!3}\n!3 = !{!1, !4}\n!4 = distinct !{!4}";
    assert_eq!(shape(cycle).map(|s| s.chain), Ok(4));
    // Functions, declarations and attribute groups are no definitions;
    // named metadata is (a root).
    let text = "define void @k() {\n  ret void, !dbg !1\n}\n!named = !{!1}\n!1 = !{}";
    assert_eq!(shape(text).map(|s| s.chain), Ok(2));
    // A reference on a following line still counts.
    assert_eq!(
        shape("@a = alias i32,\n  ptr @b\n@b = alias i32,\n  ptr @c\n@c = global i32 0")
            .map(|s| s.chain),
        Ok(3)
    );
    for (name, defs) in [
        ("!1", metadata(5000).collect::<Vec<_>>()),
        ("%T1", types(5000).collect()),
        ("@a1", aliases(5000).collect()),
    ] {
        let got = chain(defs);
        let Err(Exceeded::Chain {
            line,
            column,
            what,
            depth,
        }) = got
        else {
            panic!("{name}: {got:?}");
        };
        assert_eq!((line, column, what.as_str(), depth), (1, 1, name, 5000));
    }
}

#[test]
fn names_are_read_as_llvm_reads_them() {
    // `!02`, `! 2` (even across a comment) and `!2` are one node, and
    // `@"\62"` is `@b`: no chain hides behind another spelling.
    let spellings = "!1 = !{!02}\n! 2 = !{! ; a comment\n 3}\n!03 = !{}";
    assert_eq!(shape(spellings).map(|s| s.chain), Ok(3));
    let quoted = "@a = alias i32, ptr @\"\\62\"\n@\"b\" = alias i32, ptr @c\n@c = global i32 0";
    assert_eq!(shape(quoted).map(|s| s.chain), Ok(3));
    // Numbers past the dense table and past u64 are names too.
    let big = "!1 = !{!99999999999}\n!99999999999 = !{!123456789012345678901234}";
    assert_eq!(shape(big).map(|s| s.chain), Ok(2));
}

#[test]
fn aliases_of_aliases_are_counted_for_each_alias() {
    let chain_of = |c: usize, n: usize| {
        (0..n).map(move |i| match i {
            0 => format!("@a{c}_0 = alias i32, ptr @g"),
            _ => format!("@a{c}_{i} = alias i32, ptr @a{c}_{}", i - 1),
        })
    };
    let chains = |count: usize, n: usize| {
        let mut text = String::from("@g = global i32 0\n");
        for c in 0..count {
            text.extend(chain_of(c, n).map(|l| l + "\n"));
        }
        text
    };
    let work = |text: &str| shape(text).map(|s| s.alias_work);
    // An alias of a variable reaches itself; each of a chain the rest.
    assert_eq!(work(&chains(1, 1)), Ok(1));
    assert_eq!(work(&chains(1, 10)), Ok(55));
    assert_eq!(work(&chains(3, 10)), Ok(165));
    let ifuncs = "@r = ifunc void (), ptr @f\n@s = ifunc void (), ptr @r";
    assert_eq!(work(ifuncs), Ok(3));
    // One chain 2,000 long passes; twenty take the verifier seconds.
    assert_eq!(work(&chains(1, 2000)), Ok(2000 * 2001 / 2));
    let got = shape(&chains(20, 2000));
    let Err(Exceeded::Aliases {
        line,
        column,
        what,
        work,
    }) = got
    else {
        panic!("{got:?}");
    };
    assert_eq!((column, work), (1, 20 * 2000 * 2001 / 2));
    assert!(what.starts_with("@a") && what.ends_with("_1999"), "{what}");
    assert!(line > 1, "{line}");
    let err = check("aliases.ll", chains(20, 2000).as_bytes()).unwrap_err();
    assert!(
        err.to_string().ends_with(
            "take LLVM's verifier 40020000 steps, more than 4194304 (gevo's limit for untrusted IR)"
        ),
        "{err}"
    );
}

#[test]
fn errors_name_the_file_the_place_and_the_limit() {
    let text = deep("add (i64 1, i64 ", 20_000, ")");
    let err = check("deep.ll", text.as_bytes()).unwrap_err().to_string();
    assert_eq!(
        err,
        "deep.ll:1:4117: nesting deeper than 256 brackets (gevo's limit for untrusted IR)"
    );
    let defs: Vec<String> = (0..3000)
        .map(|i| format!("!{i} = !{{!{}}}", i + 1))
        .collect();
    let err = check("chain.ll", defs.join("\n").as_bytes())
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("chain.ll:1:1: !0 "), "{err}");
    assert!(
        err.contains("deeper than 2048 (gevo's limit for untrusted IR)"),
        "{err}"
    );
    let err = check_size("big.ll", MAX_IR_BYTES + 1)
        .unwrap_err()
        .to_string();
    assert_eq!(err, "big.ll: IR larger than 64 MiB (gevo's limit)");
    assert!(check_size("big.ll", MAX_IR_BYTES).is_ok());
    // Bitcode is checked for size alone.
    let mut bitcode = b"BC\xC0\xDE".to_vec();
    bitcode.extend(text.as_bytes());
    assert!(check("k.bc", &bitcode).is_ok());
}

fn ll_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            ll_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "ll") {
            out.push(path);
        }
    }
}

/// Every committed IR file passes, with the limits far above it.
#[test]
fn every_fixture_passes_with_a_wide_margin() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    ll_files(&crate_dir.join("../../tests/fixtures"), &mut files);
    ll_files(&crate_dir.join("src"), &mut files);
    assert!(files.len() > 30, "{files:?}");
    let mut most = Shape {
        nesting: 0,
        chain: 0,
        alias_work: 0,
    };
    let mut largest = 0u64;
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        check(&path.display().to_string(), &bytes).unwrap();
        let s = measure(&bytes).unwrap();
        most.nesting = most.nesting.max(s.nesting);
        most.chain = most.chain.max(s.chain);
        most.alias_work = most.alias_work.max(s.alias_work);
        largest = largest.max(bytes.len() as u64);
    }
    eprintln!("fixtures: {most:?}, the largest {largest} bytes");
    assert!(most.nesting * 16 <= MAX_NESTING, "{most:?}");
    assert!(most.chain * 16 <= MAX_CHAIN, "{most:?}");
    assert!(most.alias_work * 16 <= MAX_ALIAS_WORK, "{most:?}");
    assert!(largest * 256 <= MAX_IR_BYTES, "{largest}");
}
