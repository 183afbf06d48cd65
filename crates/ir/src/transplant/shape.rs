//! The matcher's view of a function: each instruction's printed form with
//! local names, metadata and attribute groups left out, its operands'
//! definitions, its block's depth in the dominator tree and its debug line.

use super::matching::InstShape;
use crate::dom::DomTree;
use crate::llvm::{self, Value};
use std::collections::HashMap;

/// Shapes of the instructions of `func` in function order (their ids).
pub fn function_shapes(func: Value, dom: &DomTree) -> Vec<InstShape> {
    let blocks = llvm::blocks(func);
    let insts: Vec<(usize, Value)> = blocks
        .iter()
        .enumerate()
        .flat_map(|(b, &block)| llvm::instructions(block).into_iter().map(move |i| (b, i)))
        .collect();
    let index: HashMap<Value, u32> = insts
        .iter()
        .enumerate()
        .map(|(i, &(_, v))| (v, i as u32))
        .collect();
    insts
        .iter()
        .map(|&(block, inst)| {
            let (exact, coarse) = normalize(&llvm::value_to_string(inst));
            let defs = (0..llvm::num_operands(inst))
                .map(|i| index.get(&llvm::operand(inst, i)).copied())
                .collect();
            InstShape {
                exact,
                coarse,
                defs,
                depth: depth(dom, block),
                line: llvm::source_line(inst).and_then(|l| split_line(&l)),
            }
        })
        .collect()
}

fn depth(dom: &DomTree, block: usize) -> u32 {
    let mut d = 0;
    let mut b = block;
    while let Some(parent) = dom.immediate_dominator(b) {
        d += 1;
        b = parent;
    }
    d
}

/// `file:line` (or `line N`) as its parts.
fn split_line(text: &str) -> Option<(String, u32)> {
    let (file, line) = text.rsplit_once(':').or_else(|| text.rsplit_once(' '))?;
    Some((file.to_string(), line.parse().ok()?))
}

/// The printed instruction without its result name, local names, metadata
/// attachments and attribute-group references; and the same with numeric
/// constants and global variable names wildcarded.
pub fn normalize(text: &str) -> (String, String) {
    let mut text = text.trim();
    if text.starts_with('%') {
        if let Some((_, rest)) = text.split_once(" = ") {
            text = rest;
        }
    }
    if let Some(cut) = text.find(", !") {
        text = &text[..cut];
    }
    let chars: Vec<char> = text.chars().collect();
    let (mut exact, mut coarse) = (String::new(), String::new());
    let mut i = 0;
    let boundary = |c: Option<&char>| c.is_none_or(|c| " ,([<{".contains(*c));
    while i < chars.len() {
        let c = chars[i];
        let start = boundary(i.checked_sub(1).and_then(|p| chars.get(p)));
        if c == '%' || c == '@' {
            let end = name_end(&chars, i + 1);
            let name: String = chars[i..end].iter().collect();
            if c == '%' {
                exact.push('%');
                coarse.push('%');
            } else {
                exact.push_str(&name);
                // A callee stays; a global variable may be renamed.
                coarse.push_str(if chars.get(end) == Some(&'(') {
                    &name
                } else {
                    "@"
                });
            }
            i = end;
        } else if c == '#' && start && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
            // ` #3`: an attribute group, numbered per module.
            i += 1;
            while chars.get(i).is_some_and(char::is_ascii_digit) {
                i += 1;
            }
        } else if start
            && (c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            let mut end = i + 1;
            while chars
                .get(end)
                .is_some_and(|c| c.is_ascii_alphanumeric() || ".+-".contains(*c))
            {
                end += 1;
            }
            exact.extend(&chars[i..end]);
            coarse.push('#');
            i = end;
        } else {
            exact.push(c);
            coarse.push(c);
            i += 1;
        }
    }
    let squeeze = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
    // Flags an unrelated change (or line tables) can add or drop.
    let coarse = coarse
        .split_whitespace()
        .filter(|w| !FLAGS.contains(w))
        .collect::<Vec<_>>()
        .join(" ");
    (squeeze(exact), coarse)
}

const FLAGS: [&str; 15] = [
    "contract", "nnan", "ninf", "nsz", "arcp", "afn", "reassoc", "fast", "nsw", "nuw", "exact",
    "inbounds", "nneg", "disjoint", "tail",
];

fn name_end(chars: &[char], mut i: usize) -> usize {
    if chars.get(i) == Some(&'"') {
        i += 1;
        while i < chars.len() && chars[i] != '"' {
            i += 1;
        }
        return (i + 1).min(chars.len());
    }
    while chars
        .get(i)
        .is_some_and(|c| c.is_ascii_alphanumeric() || "-$._".contains(*c))
    {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn names_metadata_and_attributes_are_left_out() {
        let cases = [
            (
                "  %add.i = fadd contract float %x, 1.000000e+00, !dbg !12",
                "fadd contract float %, 1.000000e+00",
                "fadd float %, #",
            ),
            (
                "tail call void @llvm.nvvm.barrier0() #3, !dbg !7",
                "tail call void @llvm.nvvm.barrier0()",
                "call void @llvm.nvvm.barrier0()",
            ),
            (
                "%0 = load float, ptr addrspace(3) getelementptr inbounds (i8, ptr addrspace(3) @_ZZ4tile, i64 -4), align 4, !tbaa !9",
                "load float, ptr addrspace(3) getelementptr inbounds (i8, ptr addrspace(3) @_ZZ4tile, i64 -4), align 4",
                "load float, ptr addrspace(#) getelementptr (i8, ptr addrspace(#) @, i64 #), align #",
            ),
            (
                "br i1 %\"a b\", label %for.body, label %exit",
                "br i1 %, label %, label %",
                "br i1 %, label %, label %",
            ),
        ];
        for (text, exact, coarse) in cases {
            assert_eq!(
                normalize(text),
                (exact.to_string(), coarse.to_string()),
                "{text}"
            );
        }
    }
}
