//! Spec skeletons (`gevod spec init`): a `*.gevo.toml` with one `[[args]]`
//! per kernel parameter, in order, with what the IR tells (kind, type, a
//! role guessed from `readonly`/`writeonly`, names from debug info) filled
//! in, and a placeholder for everything only the user knows. Placeholders
//! are string values starting with [`PLACEHOLDER`]; loading a spec that
//! still has any fails with one line naming every field left.

mod cexpr;
mod defs;
mod launches;
mod lex;
mod sites;
mod stmts;
mod translate;

use super::model::{ElemType, Role};
pub use launches::PIPELINES_DOC;
pub use sites::{
    find as find_launches, Expr, HostArg, HostLaunch, HostLaunches, HostLoop, HostStep,
};

/// What marks a value the user still has to write.
pub const PLACEHOLDER: &str = "TODO";

/// A kernel parameter as the IR describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSketch {
    /// From debug info, else `arg<i>`.
    pub name: String,
    pub kind: SketchKind,
    /// How the IR (or the C++ signature) describes it, for a comment.
    pub described: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SketchKind {
    /// A pointer: the element type when the IR shows it, and a role guessed
    /// from the parameter's attributes.
    Buffer { elem: Option<ElemType>, role: Role },
    /// A by-value parameter of this type, when it maps to one.
    Scalar { ty: Option<ElemType> },
}

/// Everything a skeleton is made from.
#[derive(Debug, Clone, PartialEq)]
pub struct Sketch {
    /// The IR path as the spec should name it (relative to the spec file).
    pub ir: String,
    pub kernel: String,
    pub arch: Option<String>,
    pub params: Vec<ParamSketch>,
    /// What the host source says about the kernel's launches.
    pub launches: LaunchSource,
}

/// Where the skeleton's launches come from.
#[derive(Debug, Clone, PartialEq)]
pub enum LaunchSource {
    /// No CUDA source was found to read.
    NoSource,
    /// These files were read, and none launches the kernel.
    NotFound { searched: Vec<String> },
    /// The launches of the first function that launches it.
    Found(HostLaunches),
}

fn quoted(s: &str) -> String {
    // The toml crate's own escaping (Rust's debug format writes `\u{1b}`,
    // which TOML does not read).
    toml::Value::String(s.to_string()).to_string()
}

fn todo(what: &str) -> String {
    quoted(&format!("{PLACEHOLDER}: {what}"))
}

/// A skeleton that does not read back as it was meant: a bug in gevod, not
/// in the user's kernel (nothing is written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the spec skeleton for {kernel} does not read back ({message}); nothing was written: this is a bug in gevod, please report it with the kernel's IR")]
pub struct SkeletonError {
    pub kernel: String,
    pub message: String,
}

/// The skeleton's text, read back before it is returned: it must be valid
/// TOML holding one `[[args]]` per parameter, with the names given, in
/// order (source text in comments must not leak into the values).
pub fn render_checked(sketch: &Sketch) -> Result<String, SkeletonError> {
    let text = render(sketch);
    let error = |message: String| SkeletonError {
        kernel: sketch.kernel.clone(),
        message,
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        error(format!(
            "invalid TOML: {}",
            e.message().split_whitespace().collect::<Vec<_>>().join(" ")
        ))
    })?;
    let names: Vec<Option<&str>> = table
        .get("args")
        .and_then(toml::Value::as_array)
        .map_or_else(Vec::new, |args| {
            args.iter()
                .map(|a| a.get("name").and_then(toml::Value::as_str))
                .collect()
        });
    let plan = launches::plan(sketch);
    let wanted: Vec<Option<&str>> = sketch
        .params
        .iter()
        .zip(&plan.declared)
        .filter(|(_, declared)| **declared)
        .map(|(p, _)| Some(p.name.as_str()))
        .collect();
    if names != wanted {
        return Err(error(format!(
            "[[args]] names {names:?}, the kernel's parameters {wanted:?}"
        )));
    }
    let form = match plan.pipeline {
        Some(_) => table
            .get("launches")
            .and_then(toml::Value::as_array)
            .is_some(),
        None => table
            .get("launch")
            .and_then(toml::Value::as_table)
            .is_some(),
    };
    if !form {
        return Err(error(
            "no [launch] table or [[launches]] array as planned".into(),
        ));
    }
    Ok(text)
}

/// Text for a one-line `#` comment: line breaks and other control
/// characters (a source declaration's, say) become spaces.
fn comment(s: &str) -> String {
    s.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The skeleton's text ([`render_checked`] reads it back).
pub fn render(sketch: &Sketch) -> String {
    let mut out = format!(
        "# Kernel spec for {} (written by `gevod spec init`; docs/spec.md describes every key).\n\
         # Replace each value that starts with \"{PLACEHOLDER}\": `gevod run` lists those left.\n\
         version = 1\nir = {}\nkernel = {}\n",
        comment(&sketch.kernel),
        quoted(&sketch.ir),
        quoted(&sketch.kernel)
    );
    if let Some(arch) = &sketch.arch {
        out += &format!("arch = {}\n", quoted(arch));
    }
    let plan = launches::plan(sketch);
    if plan.pipeline.is_none() {
        out += &launches::single(sketch, &plan);
    }
    out += "\n# One [[args]] per kernel parameter, in the kernel's order";
    out += match plan.declared.iter().all(|d| *d) {
        true => ".\n",
        false => ",\n# except the scalars each launch passes inline.\n",
    };
    for (i, p) in sketch.params.iter().enumerate() {
        if !plan.declared[i] {
            continue;
        }
        out += &format!(
            "\n[[args]]\n# parameter {i}: {}\nname = {}\n",
            comment(&p.described),
            quoted(&p.name)
        );
        match &p.kind {
            SketchKind::Buffer { elem, role } => {
                out += "kind = \"buffer\"\n";
                out += &format!("type = {}\n", type_value(*elem));
                out += &format!("len = {}\n", todo("number of elements, e.g. n"));
                out += &format!(
                    "role = {}   # guessed from the IR's attributes: check it\n",
                    quoted(role.name())
                );
                if *role != Role::Out {
                    out += &format!("fill = {}\n", fill_value(*elem));
                }
            }
            SketchKind::Scalar { ty } => {
                out += "kind = \"scalar\"\n";
                out += &format!("type = {}\n", type_value(*ty));
                out += &format!("value = {}\n", launches::scalar_value(&plan, i));
            }
        }
    }
    out += &launches::pipeline(sketch, &plan);
    let used = launches::test_parameters(sketch, &plan);
    let hint = match used.is_empty() {
        true => String::new(),
        false => format!(
            "# The expressions above use {}: every test gives each a value.\n",
            comment(&used.join(", "))
        ),
    };
    out += &format!(
        "\n[tests]\n{hint}# Small train tests (run for every candidate), larger held-out ones with\n\
         # sizes the train tests do not have. Each test is {{ <parameters>, seed = <n> }}.\n\
         # Include a partial block (a size below one block, as n = 7 with blocks of 256)\n\
         # and scalars that differ from each other; gevo adds generated tests too\n\
         # (fixed = [\"<parameter>\"] keeps a parameter at your values).\n\
         train = {}\nheldout = {}\n",
        todo("e.g. [{ n = 1000, seed = 1 }, { n = 4099, seed = 2 }]"),
        todo("e.g. [{ n = 100003, seed = 101 }, { n = 7, seed = 102 }] (n = 7: one partial block)"),
    );
    out += &format!(
        "\n[acceptance]\nmetric = {}\ntolerance = {}\n",
        todo("exact (integers), or max_abs, max_rel or ulp (floats)"),
        todo("the largest accepted error, e.g. 1e-5 (none for exact)"),
    );
    out
}

/// The role a pointer parameter's attributes suggest: `readonly` reads,
/// `writeonly` writes, neither (or both unknown) reads and writes.
pub fn guess_role(readonly: bool, writeonly: bool) -> Role {
    match (readonly, writeonly) {
        (true, false) => Role::In,
        (false, true) => Role::Out,
        _ => Role::Inout,
    }
}

/// The element type of a C or C++ type as a demangled name spells it
/// (`float const*`, `unsigned int`), pointers and qualifiers removed.
pub fn elem_from_c_type(c_type: &str) -> Option<ElemType> {
    let base: Vec<&str> = c_type
        .split(|c: char| c == '*' || c == '&' || c.is_whitespace())
        .filter(|w| {
            !matches!(
                *w,
                "" | "const" | "volatile" | "__restrict" | "__restrict__" | "restrict"
            )
        })
        .collect();
    Some(match base.join(" ").as_str() {
        "float" => ElemType::F32,
        "double" => ElemType::F64,
        "char" | "signed char" => ElemType::I8,
        "unsigned char" | "bool" => ElemType::U8,
        "short" => ElemType::I16,
        "unsigned short" => ElemType::U16,
        "int" => ElemType::I32,
        "unsigned int" | "unsigned" => ElemType::U32,
        "long" | "long long" => ElemType::I64,
        "unsigned long" | "unsigned long long" => ElemType::U64,
        _ => return None,
    })
}

/// The element type of an LLVM IR type (`float`, `i32`): integers are
/// taken as signed, since the IR does not say.
pub fn elem_from_ir_type(ir_type: &str) -> Option<ElemType> {
    Some(match ir_type {
        "float" => ElemType::F32,
        "double" => ElemType::F64,
        "i8" => ElemType::I8,
        "i16" => ElemType::I16,
        "i32" => ElemType::I32,
        "i64" => ElemType::I64,
        _ => return None,
    })
}

fn type_value(elem: Option<ElemType>) -> String {
    match elem {
        Some(e) => quoted(e.name()),
        None => todo("f32, f64, i8, i16, i32, i64, u8, u16, u32 or u64"),
    }
}

fn fill_value(elem: Option<ElemType>) -> String {
    let example = match elem {
        Some(e) if e.is_float() => "{ uniform = [-1.0, 1.0] }",
        _ => "{ int_range = [0, 100] }",
    };
    todo(&format!("initial contents, e.g. {example}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_map_from_c_and_ir_spellings() {
        for (c, expected) in [
            ("float const*", Some(ElemType::F32)),
            ("double*", Some(ElemType::F64)),
            ("unsigned int", Some(ElemType::U32)),
            ("int const* __restrict", Some(ElemType::I32)),
            ("unsigned long long*", Some(ElemType::U64)),
            ("float2*", None),
        ] {
            assert_eq!(elem_from_c_type(c), expected, "{c}");
        }
        assert_eq!(elem_from_ir_type("i16"), Some(ElemType::I16));
        assert_eq!(elem_from_ir_type("<4 x float>"), None);
        assert_eq!(guess_role(true, false), Role::In);
        assert_eq!(guess_role(false, true), Role::Out);
        assert_eq!(guess_role(false, false), Role::Inout);
    }

    fn sketch() -> Sketch {
        Sketch {
            ir: "k.ll".into(),
            kernel: "k".into(),
            arch: None,
            params: vec![
                ParamSketch {
                    name: "in".into(),
                    kind: SketchKind::Buffer {
                        elem: Some(ElemType::F32),
                        role: Role::In,
                    },
                    described: "const float*".into(),
                },
                ParamSketch {
                    name: "arg1".into(),
                    kind: SketchKind::Buffer {
                        elem: None,
                        role: Role::Inout,
                    },
                    described: "ptr".into(),
                },
                ParamSketch {
                    name: "n".into(),
                    kind: SketchKind::Scalar {
                        ty: Some(ElemType::I32),
                    },
                    described: "int".into(),
                },
            ],
            launches: LaunchSource::NoSource,
        }
    }

    /// What the source says about a parameter goes into a comment on one
    /// line, whatever it holds; the skeleton reads back with every name.
    #[test]
    fn source_text_stays_inside_its_comment() {
        let mut s = sketch();
        s.params[0].described = "float* // temperature\n  , \"K\" /* x */".into();
        s.params[1].described = "ptr\r\n[[args]]\nname = \"x\"\u{1b}".into();
        s.params[2].name = "n\"\\".into();
        s.ir = "dir with \"quotes\"\u{7}/k.ll".into();
        let text = render_checked(&s).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            text.contains("# parameter 0: float* // temperature , \"K\" /* x */\n"),
            "{text}"
        );
        assert!(
            text.contains("# parameter 1: ptr [[args]] name = \"x\"\n"),
            "{text}"
        );
        let table: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(table["ir"].as_str(), Some(s.ir.as_str()));
        assert_eq!(table["args"][2]["name"].as_str(), Some("n\"\\"));
    }

    /// The skeleton is valid TOML whose only unknowns are placeholders:
    /// loading it names each one, in file order.
    #[test]
    fn a_skeleton_loads_as_its_list_of_placeholders() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("k.ll"), "").unwrap();
        let path = dir.path().join("k.gevo.toml");
        let skeleton = render(&sketch());
        let err = crate::spec::parse(&path, &skeleton).unwrap_err();
        let text = err.to_string();
        for field in [
            "launch.grid[0]",
            "launch.block[0]",
            "args[0].len",
            "args[0].fill",
            "args[1].type",
            "args[1].len",
            "args[1].fill",
            "args[2].value",
            "tests.train",
            "tests.heldout",
            "acceptance.metric",
            "acceptance.tolerance",
        ] {
            assert!(text.contains(field), "{field} missing from: {text}");
        }
        assert!(text.contains("12 placeholders"), "{text}");
        // The held-out example has a partial block.
        assert!(
            skeleton.contains("{ n = 7, seed = 102 }] (n = 7: one partial block)\"\n"),
            "{skeleton}"
        );
        assert!(!text.contains("args[0].type"), "{text}");
        assert!(!text.contains("args[1].role"), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
    }
}
