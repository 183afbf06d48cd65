//! Reading guarded IR's text in the guard tests: which accesses a line
//! makes, through which pointer, and what a guarded build checks.

use gevo_ir::KernelIr;

fn accessed_space(instruction: &str) -> Option<u32> {
    accessed(instruction).map(|(space, _)| space)
}

/// The address space and the pointer operand of a load, store or atomic.
pub(crate) fn accessed(instruction: &str) -> Option<(u32, &str)> {
    let body = instruction
        .split_once(" = ")
        .map_or(instruction, |(_, rest)| rest)
        .trim();
    let opcode = body.split_whitespace().next()?;
    let pointer_at = match opcode {
        // The pointer follows the loaded type, or the stored value.
        "load" | "store" => body.find(", ptr")? + 2,
        "atomicrmw" | "cmpxchg" => body.find(" ptr")? + 1,
        _ => return None,
    };
    let after = &body[pointer_at + "ptr".len()..];
    let (space, operand) = match after.strip_prefix(" addrspace(") {
        Some(rest) => {
            let close = rest.find(')')?;
            (rest[..close].parse().ok()?, &rest[close + 1..])
        }
        None => (0, after),
    };
    let operand = operand.trim_start().split([',', ' ']).next()?;
    Some((space, operand))
}

/// In guarded IR: the checks made (a select of a guard's pointer each),
/// and the accesses through a guard's pointer.
pub(crate) fn checks_and_guarded(guarded_ir: &str) -> (usize, usize) {
    let lines = || guarded_ir.lines();
    let checks = lines()
        .filter(|l| l.contains("%gevo.p") && l.contains(" = select i1 "))
        .count();
    let guarded = lines()
        .filter(|l| accessed(l).is_some_and(|(_, p)| p.starts_with("%gevo.p")))
        .count();
    (checks, guarded)
}

/// The kernels of a cases file (`tests/fixtures/guard/*.ll`) named
/// `checks_<N>_<case>`, each with its N (the checks it expects).
pub(crate) fn check_cases(path: &std::path::Path) -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("define void @"))
        .filter(|l| l.starts_with("checks_"))
        .map(|l| {
            let name = &l[..l.find('(').unwrap()];
            let expected = name.split('_').nth(1).unwrap().parse().unwrap();
            (name.to_string(), expected)
        })
        .collect()
}

/// The guarded IR of the function `name` in `ir`'s original's guarded
/// build (`gevo_ir::KernelIr::guarded_ir`).
pub(crate) fn guarded_function(ir: &KernelIr, name: &str) -> String {
    let (text, _) = ir
        .guarded_ir(&ir.empty_patch(), &crate::common::codegen_options())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    text.split("\ndefine ")
        .find(|f| f.contains(&format!("@{name}(")))
        .unwrap_or_else(|| panic!("{name} is in its guarded build"))
        .to_string()
}

pub(crate) fn guarded_access_count(ir: &KernelIr) -> usize {
    ir.listing()
        .unwrap()
        .iter()
        .filter(|(_, text)| matches!(accessed_space(text), Some(0 | 1 | 3)))
        .count()
}

#[test]
fn the_access_parser_reads_pointer_operands() {
    for (text, access) in [
        (
            "%5 = load float, ptr addrspace(1) %4, align 4",
            Some((1, "%4")),
        ),
        (
            "%p = load ptr, ptr addrspace(3) %q, align 8",
            Some((3, "%q")),
        ),
        (
            "store ptr addrspace(1) %v, ptr %q, align 8",
            Some((0, "%q")),
        ),
        (
            "store float %x, ptr addrspace(3) %gevo.p7, align 4",
            Some((3, "%gevo.p7")),
        ),
        (
            "%o = atomicrmw add ptr addrspace(1) %c, i32 1 monotonic, align 4",
            Some((1, "%c")),
        ),
        (
            "%r = cmpxchg ptr %c, i32 0, i32 1 monotonic monotonic, align 4",
            Some((0, "%c")),
        ),
        (
            "%k = load i32, ptr addrspace(4) %k, align 4",
            Some((4, "%k")),
        ),
        ("%a = add i32 %b, 1", None),
    ] {
        assert_eq!(accessed(text), access, "{text}");
        assert_eq!(
            accessed_space(text),
            access.map(|(space, _)| space),
            "{text}"
        );
    }
}
