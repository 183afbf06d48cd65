//! The changed instructions of a variant's IR, for `explain`: a diff of the
//! original and the variant with LLVM's value numbering set aside.
//!
//! Deleting one instruction renumbers every unnamed value after it, so the
//! plain unified diff of a kernel is mostly lines that differ only in
//! their numbers. Here the lines are first aligned with every `%<n>` and
//! block label `<n>:` blanked out; the numbers each aligned definition
//! (`%5 = ...`, `5:`, a `define`'s parameters) gets on either side make a
//! map, and an aligned pair counts as unchanged only when the original's
//! line, its numbers mapped, is the variant's line. So an operand replaced
//! by another value still shows, and renumbering alone does not.

use std::collections::HashMap;

/// Lines of context around each change.
pub const CONTEXT: usize = 3;

/// The changed lines of `variant` against `original` (both IR text), in
/// hunks of `-`/`+` lines with [`CONTEXT`] lines around them; empty when
/// nothing but numbering changed.
pub fn changed_instructions(original: &str, variant: &str) -> String {
    let a: Vec<&str> = original.lines().collect();
    let b: Vec<&str> = variant.lines().collect();
    let (na, nb): (Vec<String>, Vec<String>) = (
        a.iter().map(|l| blank_numbers(l)).collect(),
        b.iter().map(|l| blank_numbers(l)).collect(),
    );
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &na, &nb);
    let fa = functions(&a);

    // The aligned pairs, and the numbers their definitions map.
    let mut pairs = Vec::new();
    let mut map: HashMap<(usize, u64), u64> = HashMap::new();
    for op in &ops {
        if let similar::DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = *op
        {
            for k in 0..len {
                let (i, j) = (old_index + k, new_index + k);
                pairs.push((i, j));
                for (x, y) in defined(a[i]).into_iter().zip(defined(b[j])) {
                    map.insert((fa[i], x), y);
                }
            }
        }
    }

    let mut lines: Vec<Line> = Vec::new();
    for op in &ops {
        match *op {
            similar::DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for k in 0..len {
                    let (i, j) = (old_index + k, new_index + k);
                    if renumber(a[i], |n| map.get(&(fa[i], n)).copied()) == b[j] {
                        lines.push(Line::Same(j));
                    } else {
                        lines.push(Line::Old(i));
                        lines.push(Line::New(j));
                    }
                }
            }
            similar::DiffOp::Delete {
                old_index, old_len, ..
            } => lines.extend((old_index..old_index + old_len).map(Line::Old)),
            similar::DiffOp::Insert {
                new_index, new_len, ..
            } => lines.extend((new_index..new_index + new_len).map(Line::New)),
            similar::DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                lines.extend((old_index..old_index + old_len).map(Line::Old));
                lines.extend((new_index..new_index + new_len).map(Line::New));
            }
        }
    }
    hunks(&lines, &a, &b)
}

#[derive(Debug, Clone, Copy)]
enum Line {
    Same(usize),
    Old(usize),
    New(usize),
}

/// The lines around each change, a `@@ variant line N @@` header per hunk.
fn hunks(lines: &[Line], a: &[&str], b: &[&str]) -> String {
    let changed: Vec<usize> = (0..lines.len())
        .filter(|&k| !matches!(lines[k], Line::Same(_)))
        .collect();
    let mut out = String::new();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(lines.len());
        let at = lines[start..end]
            .iter()
            .find_map(|l| match l {
                Line::Same(j) | Line::New(j) => Some(j + 1),
                Line::Old(_) => None,
            })
            .unwrap_or(0);
        out += &format!("@@ variant line {at} @@\n");
        for line in &lines[start..end] {
            match *line {
                Line::Same(j) => out += &format!(" {}\n", b[j]),
                Line::Old(i) => out += &format!("-{}\n", a[i]),
                Line::New(j) => out += &format!("+{}\n", b[j]),
            }
        }
    }
    out
}

/// For each line, the number of the function it is in (counting `define`s).
fn functions(lines: &[&str]) -> Vec<usize> {
    let mut n = 0;
    lines
        .iter()
        .map(|l| {
            if l.starts_with("define ") {
                n += 1;
            }
            n
        })
        .collect()
}

/// The numbers a line defines: `%n = ...`, a block label `n:`, or a
/// `define`'s unnamed parameters.
fn defined(line: &str) -> Vec<u64> {
    let t = line.trim_start();
    if line.starts_with("define ") {
        return numbers(line);
    }
    if let Some(rest) = t.strip_prefix('%') {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && rest[digits.len()..].trim_start().starts_with('=') {
            return digits.parse().into_iter().collect();
        }
    }
    label(line).into_iter().collect()
}

/// A block label line's number (`5:` or `5:   ; preds = ...`).
fn label(line: &str) -> Option<u64> {
    let digits: String = line.chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty() && line[digits.len()..].starts_with(':'))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Every `%n` of a line, in order.
fn numbers(line: &str) -> Vec<u64> {
    let mut out = Vec::new();
    renumber(line, |n| {
        out.push(n);
        None
    });
    out
}

/// The line with every number `%n` (and a leading label `n:`) replaced by
/// `f(n)`, kept where `f` gives none.
fn renumber(line: &str, mut f: impl FnMut(u64) -> Option<u64>) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    if let Some(n) = label(line) {
        let digits = n.to_string();
        out += &f(n).map_or(digits.clone(), |m| m.to_string());
        rest = &line[digits.len()..];
    }
    while let Some(at) = rest.find('%') {
        out += &rest[..=at];
        rest = &rest[at + 1..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            continue;
        }
        let n: u64 = match digits.parse() {
            Ok(n) => n,
            Err(_) => {
                out += &digits;
                rest = &rest[digits.len()..];
                continue;
            }
        };
        out += &f(n).map_or(digits.clone(), |m| m.to_string());
        rest = &rest[digits.len()..];
    }
    out + rest
}

/// The line with its value numbers and label number blanked (`%_`, `_:`).
fn blank_numbers(line: &str) -> String {
    renumber(line, |_| Some(u64::MAX)).replace(&u64::MAX.to_string(), "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGINAL: &str = "\
define void @k(ptr %0, i32 %1) {
  %3 = add i32 %1, 1
  %4 = mul i32 %3, 2
  %5 = add i32 %4, %1
  %6 = sub i32 %5, 7
  br label %7

7:
  store i32 %6, ptr %0
  ret void
}";

    fn check(variant: &str, expect: &str) {
        assert_eq!(changed_instructions(ORIGINAL, variant), expect);
    }

    #[test]
    fn renumbering_alone_is_no_change() {
        check(ORIGINAL, "");
    }

    #[test]
    fn a_deletion_shows_once_and_the_renumbered_rest_not_at_all() {
        check(
            "\
define void @k(ptr %0, i32 %1) {
  %3 = add i32 %1, 1
  %4 = add i32 %3, %1
  %5 = sub i32 %4, 7
  br label %6

6:
  store i32 %5, ptr %0
  ret void
}",
            "\
@@ variant line 1 @@
 define void @k(ptr %0, i32 %1) {
   %3 = add i32 %1, 1
-  %4 = mul i32 %3, 2
-  %5 = add i32 %4, %1
+  %4 = add i32 %3, %1
   %5 = sub i32 %4, 7
   br label %6
 
",
        );
    }

    #[test]
    fn a_replaced_operand_shows_though_the_line_aligns() {
        check(
            "\
define void @k(ptr %0, i32 %1) {
  %3 = add i32 %1, 1
  %4 = mul i32 %3, 2
  %5 = add i32 %4, %3
  %6 = sub i32 %5, 7
  br label %7

7:
  store i32 %6, ptr %0
  ret void
}",
            "\
@@ variant line 1 @@
 define void @k(ptr %0, i32 %1) {
   %3 = add i32 %1, 1
   %4 = mul i32 %3, 2
-  %5 = add i32 %4, %1
+  %5 = add i32 %4, %3
   %6 = sub i32 %5, 7
   br label %7
 
",
        );
    }

    #[test]
    fn numbers_are_blanked_in_values_and_labels_only() {
        assert_eq!(
            blank_numbers("7:  ; preds = %2"),
            "_:  ; preds = %_".to_string()
        );
        assert_eq!(
            blank_numbers("  %x.1 = fadd float 1.5, %12"),
            "  %x.1 = fadd float 1.5, %_"
        );
        assert_eq!(defined("  %12 = load i32, ptr %3"), vec![12]);
        assert_eq!(defined("define void @k(ptr %0, i32 %1) {"), vec![0, 1]);
    }
}
