//! A kernel's parameters as the IR shows them (for spec skeletons): each
//! one's IR type, `readonly`/`writeonly` attributes, the type its pointer
//! is loaded or stored as, the C++ type from the mangled name, and the
//! source name from debug info. Everything here is a reading, not a proof:
//! callers present it as a guess.

use super::{demangled, parse_bitcode, IrError, KernelIr};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{
    AnyValueEnum, BasicValue, BasicValueEnum, BasicValueUse, InstructionOpcode, InstructionValue,
};

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The IR type: `ptr`, `i32`, `float`, ...
    pub ir_type: String,
    pub is_pointer: bool,
    /// Attributes clang derives from `const` and from what the body does.
    pub readonly: bool,
    pub writeonly: bool,
    /// For a pointer: the IR type of the first load or store through it
    /// (`float`, `i32`), when there is one.
    pub accessed_as: Option<String>,
    /// The parameter's C++ type from the mangled name (`float const*`).
    pub source_type: Option<String>,
    /// The parameter's name in the CUDA source, from debug info.
    pub source_name: Option<String>,
}

impl KernelIr {
    /// The kernel's parameters, in order.
    /// The CUDA source file defining the kernel, as its debug info names
    /// it, where that file can be read: the path itself, or a relative
    /// path under the IR file's directory (see [`source_parameters`]).
    /// `None` without debug info or when no such file exists.
    pub fn kernel_source(&self) -> Option<std::path::PathBuf> {
        let (path, _, _) = declaration(&self.text, &self.kernel)?;
        locate(&path, std::path::Path::new(&self.source).parent())
    }

    pub fn parameters(&self) -> Result<Vec<Param>, IrError> {
        let context = Context::create();
        let module = parse_bitcode(&context, &self.bitcode)?;
        let function = module
            .get_function(&self.kernel)
            .expect("the kernel is in its module");
        // A declaration read from the source that does not list as many
        // parameters as the IR has (a macro expanding to several, an
        // `#if` inside the list) is not trusted at all: names shifted by
        // one are worse than none.
        let ir_dir = std::path::Path::new(&self.source).parent();
        let declared = Some(source_parameters(&self.text, &self.kernel, ir_dir))
            .filter(|d| d.len() == function.count_params() as usize)
            .unwrap_or_default();
        let mangled = demangled(&self.kernel).map(|d| parameter_list(&d));
        let flag = |i: u32, name: &str| {
            let kind = Attribute::get_named_enum_kind_id(name);
            function
                .get_enum_attribute(AttributeLoc::Param(i), kind)
                .is_some()
        };
        Ok(function
            .get_param_iter()
            .enumerate()
            .map(|(i, value)| {
                let is_pointer = value.is_pointer_value();
                Param {
                    ir_type: value.get_type().to_string().trim_matches('"').to_string(),
                    is_pointer,
                    readonly: flag(i as u32, "readonly"),
                    writeonly: flag(i as u32, "writeonly"),
                    accessed_as: is_pointer.then(|| accessed_as(value)).flatten(),
                    source_type: declared
                        .get(i)
                        .map(|(ty, _)| ty.clone())
                        .or_else(|| mangled.as_ref().and_then(|t| t.get(i).cloned())),
                    source_name: declared.get(i).map(|(_, name)| name.clone()),
                }
            })
            .collect())
    }
}

/// The type of the first load or store reached from `pointer` through
/// address-space casts and GEPs (breadth first, in use order). A GEP's own
/// source type is the fallback, unless it is `i8` (byte offsets say nothing).
fn accessed_as(pointer: BasicValueEnum) -> Option<String> {
    let mut queue = vec![users(pointer.get_first_use())];
    let mut gep_type = None;
    let mut seen = 0;
    while let Some(list) = queue.pop() {
        for (user, operand) in list {
            seen += 1;
            if seen > 256 {
                return gep_type;
            }
            match user.get_opcode() {
                InstructionOpcode::Load => return Some(type_name(user.get_type().to_string())),
                InstructionOpcode::Store if operand == 1 => {
                    let stored = user.get_operand(0)?.value()?;
                    return Some(type_name(stored.get_type().to_string()));
                }
                InstructionOpcode::AddrSpaceCast | InstructionOpcode::GetElementPtr => {
                    if user.get_opcode() == InstructionOpcode::GetElementPtr && gep_type.is_none() {
                        gep_type = user
                            .get_gep_source_element_type()
                            .ok()
                            .filter(|t| !matches!(t, BasicTypeEnum::IntType(i) if i.get_bit_width() == 8))
                            .map(|t| type_name(t.to_string()));
                    }
                    queue.insert(0, instruction_users(user));
                }
                _ => {}
            }
        }
    }
    gep_type
}

fn type_name(printed: String) -> String {
    printed.trim_matches('"').to_string()
}

/// The instructions using a value, with the operand position of the use.
fn users(first: Option<BasicValueUse>) -> Vec<(InstructionValue, u32)> {
    let mut out = Vec::new();
    let mut next = first;
    while let Some(u) = next {
        if let Some(inst) = as_instruction(u.get_user()) {
            let position = (0..inst.get_num_operands())
                .find(|&k| {
                    inst.get_operand_use(k)
                        .is_some_and(|op| op.get_used_value() == u.get_used_value())
                })
                .unwrap_or(0);
            out.push((inst, position));
        }
        next = u.get_next_use();
    }
    out
}

/// inkwell classifies a user by its result type; any of them may be an
/// instruction.
fn as_instruction(v: AnyValueEnum) -> Option<InstructionValue> {
    match v {
        AnyValueEnum::InstructionValue(i) => Some(i),
        AnyValueEnum::PointerValue(p) => p.as_instruction(),
        AnyValueEnum::IntValue(i) => i.as_instruction(),
        AnyValueEnum::FloatValue(f) => f.as_instruction(),
        AnyValueEnum::VectorValue(v) => v.as_instruction(),
        _ => None,
    }
}

fn instruction_users(inst: InstructionValue) -> Vec<(InstructionValue, u32)> {
    users(inst.get_first_use())
}

/// How messages name a kernel: its demangled signature
/// (`heat_step(float const*, float*, int)`), or the symbol itself when it
/// is not mangled (`extern "C"`).
pub fn display_name(symbol: &str) -> String {
    demangled(symbol).unwrap_or_else(|| symbol.to_string())
}

/// A kernel's parameter types in C++ (`float const*`, `int`), from its
/// mangled name; `None` for an `extern "C"` kernel.
pub fn source_parameter_types(symbol: &str) -> Option<Vec<String>> {
    demangled(symbol).map(|d| parameter_list(&d))
}

/// The parameter types of a demangled signature, `k(float const*, int)`:
/// split at the top-level commas of the outermost parentheses.
fn parameter_list(signature: &str) -> Vec<String> {
    let Some(open) = signature.find('(') else {
        return Vec::new();
    };
    let inner = &signature[open + 1..signature.rfind(')').unwrap_or(signature.len())];
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(inner[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner.trim().is_empty() {
        out.push(inner[start..].trim().to_string());
    }
    out
}

/// The kernel's declaration in its CUDA source, found through debug info
/// (`-g` or `-gline-tables-only`): the `DISubprogram` of the kernel's
/// `define` gives the file and line; the parameter list is read from there.
/// Each parameter comes back as (C type, name). Empty when there is no
/// debug info or the source cannot be read. A relative source path is
/// looked up from here, then from the IR's directory (`ir_dir`: IR built
/// with `-fdebug-compilation-dir=.` names its source relative to where it
/// was compiled, usually next to it).
fn source_parameters(
    text: &str,
    kernel: &str,
    ir_dir: Option<&std::path::Path>,
) -> Vec<(String, String)> {
    let Some((path, line, name)) = declaration(text, kernel) else {
        return Vec::new();
    };
    let Some(Ok(source)) = locate(&path, ir_dir).map(std::fs::read_to_string) else {
        return Vec::new();
    };
    let from_line: String = source
        .lines()
        .skip(line.saturating_sub(1))
        .take(40)
        .collect::<Vec<_>>()
        .join("\n");
    parse_declaration(&from_line, &name).unwrap_or_default()
}

/// A source path from debug info as it can be read: from here, else (when
/// relative) from the IR's directory.
fn locate(path: &std::path::Path, ir_dir: Option<&std::path::Path>) -> Option<std::path::PathBuf> {
    // `./k.cu` (a compilation directory of `.`) is `k.cu`.
    let plain = |p: &std::path::Path| -> std::path::PathBuf {
        p.components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect()
    };
    if path.is_file() {
        return Some(plain(path));
    }
    let beside = plain(&ir_dir.filter(|_| path.is_relative())?.join(path));
    beside.is_file().then_some(beside)
}

/// The file, line and name of the kernel's `DISubprogram`.
fn declaration(text: &str, kernel: &str) -> Option<(std::path::PathBuf, usize, String)> {
    let define = format!("@{kernel}(");
    let (_, dbg) = text
        .lines()
        .find(|l| l.starts_with("define") && l.contains(&define))?
        .rsplit_once("!dbg ")?;
    let node = |id: &str| {
        let prefix = format!("{id} = ");
        text.lines().find(|l| l.starts_with(&prefix))
    };
    let subprogram = node(dbg.trim_end_matches(" {").trim())?;
    let file = node(&field(subprogram, "file: ")?)?;
    let line = field(subprogram, "line: ")?.parse().ok()?;
    let name = field(subprogram, "name: ")?;
    let filename = std::path::PathBuf::from(field(file, "filename: ")?);
    let path = match field(file, "directory: ") {
        Some(dir) if filename.is_relative() && !dir.is_empty() => {
            std::path::Path::new(&dir).join(filename)
        }
        _ => filename,
    };
    Some((path, line, name))
}

/// `key: value` of a metadata line, quotes removed.
fn field(line: &str, key: &str) -> Option<String> {
    let rest = line.split(key).nth(1)?;
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ')']).next()?,
    };
    Some(value.trim().to_string())
}

/// `source` with its comments and preprocessor lines blanked out; string
/// and character literals are kept whole.
fn without_comments(source: &str) -> String {
    use gevo_model::c_source;
    c_source::without_directives(&c_source::without_comments(source))
}

/// The parameters of `name(...)` in `source`: (type, name) each, defaults
/// dropped, comments and preprocessor lines ignored, a type's spaces and
/// line breaks collapsed to one space. `None` when the list cannot be found
/// or a parameter does not read as `type name`.
fn parse_declaration(source: &str, name: &str) -> Option<Vec<(String, String)>> {
    let source = &without_comments(source);
    let start = source.find(&format!("{name}("))? + name.len() + 1;
    let mut depth = 1;
    let end = source[start..].char_indices().find_map(|(i, c)| {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        (depth == 0).then_some(start + i)
    })?;
    let list = parameter_list(&format!("k({})", &source[start..end]));
    list.iter()
        .filter(|p| *p != "void")
        .map(|p| {
            let p = p.split('=').next().unwrap_or(p).trim();
            let split = p.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            let (ty, name) = p.split_at(split + 1);
            let ty = ty.split_whitespace().collect::<Vec<_>>().join(" ");
            (!name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) && !ty.is_empty())
                .then_some((ty, name.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangled_parameter_lists_split_at_top_level_commas() {
        for (signature, expected) in [
            (
                "k(float const*, float*, int, int)",
                vec!["float const*", "float*", "int", "int"],
            ),
            ("k()", vec![]),
            (
                "k(foo<int, 2>*, unsigned int)",
                vec!["foo<int, 2>*", "unsigned int"],
            ),
        ] {
            assert_eq!(parameter_list(signature), expected, "{signature}");
        }
    }

    #[test]
    fn declarations_are_read_from_the_source_line() {
        let source = "// a kernel\nextern \"C\" __global__ void k(const float* __restrict__ in,\n    float *out, int n = 4)\n{\n";
        assert_eq!(
            parse_declaration(source, "k").unwrap(),
            vec![
                ("const float* __restrict__".to_string(), "in".to_string()),
                ("float *".to_string(), "out".to_string()),
                ("int".to_string(), "n".to_string()),
            ]
        );
        assert_eq!(
            parse_declaration("__global__ void k(void) {}", "k"),
            Some(vec![])
        );
        assert_eq!(parse_declaration("void other(int a)", "k"), None);
    }

    /// Parameter lists as real sources write them: the user's report had
    /// a trailing `//` comment pasted into the next parameter's type.
    #[test]
    fn comments_and_directives_in_a_parameter_list_are_not_parameters() {
        let expected = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(t, n)| (t.to_string(), n.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        for (source, want) in [
            (
                "__global__ void k(float* t,   // temperature, in K\n\
                 \x20                 const float* p, // power, W/m^2 (x, y)\n\
                 \x20                 int nx)  // columns\n{",
                expected(&[("float*", "t"), ("const float*", "p"), ("int", "nx")]),
            ),
            (
                "__global__ void k(/* in */ const float* /* (rows, cols) */ a,\n\
                 \x20 float* b /* out, row-major */, int /* count */ n = 4) {}",
                expected(&[("const float*", "a"), ("float*", "b"), ("int", "n")]),
            ),
            (
                "__global__ void k(const REAL* RESTRICT in,\n\
                 #if defined(WITH_OUT) // a directive \\\n  continued\n\
                 \x20   REAL* out,\n#endif\n    int n) {}",
                expected(&[
                    ("const REAL* RESTRICT", "in"),
                    ("REAL*", "out"),
                    ("int", "n"),
                ]),
            ),
            (
                "__global__ void k(const float*\n    __restrict__ in, int n) {}",
                expected(&[("const float* __restrict__", "in"), ("int", "n")]),
            ),
            // A macro taking the place of a parameter cannot be read.
            ("__global__ void k(PARAM(float, in), int n) {}", None),
        ] {
            assert_eq!(parse_declaration(source, "k"), want, "{source}");
        }
    }

    #[test]
    fn the_declaration_is_found_through_the_kernels_subprogram() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("k.cu"),
            "\n__global__ void k(int* a, unsigned n) {}\n",
        )
        .unwrap();
        let text = format!(
            "define void @k(ptr %0, i32 %1) #0 !dbg !9 {{\n\
             !1 = !DIFile(filename: \"k.cu\", directory: \"{}\")\n\
             !9 = distinct !DISubprogram(name: \"k\", scope: !1, file: !1, line: 2, type: !3)\n",
            dir.path().display()
        );
        assert_eq!(
            source_parameters(&text, "k", None),
            vec![
                ("int*".to_string(), "a".to_string()),
                ("unsigned".to_string(), "n".to_string())
            ]
        );
        assert!(source_parameters("define void @k(ptr %0) {\n", "k", None).is_empty());
    }
}
