//! Shared memory poisoned at each kernel's entry in the guarded build
//! (docs/evolve.md, "Guarded check builds"). On the GPU, a block's shared
//! memory starts as whatever an earlier block on the same multiprocessor
//! left there, often the very value a variant that skips a write needs,
//! so a variant that reads shared bytes never written in its block passes
//! the output check; the simulator alone saw it. In the guarded build
//! every kernel that uses shared memory first has its threads fill each
//! `__shared__` array it uses (and the `extern __shared__` array, over the
//! launch's dynamic bytes) with the poison (`__gevo_poison_shared`), then
//! a barrier, then its body: such a read now gives the poison, which
//! reaches the outputs, and the comparison with the original's rejects it.
//!
//! The fill goes in before the guards are inserted: it is not planned, so
//! not guarded, and the guards' own entry code (the parameters' ranges, the
//! warp's live lanes, placed at the entry later) lands before it, where
//! the lanes of a warp are still together. All threads of a block are at
//! the entry, so the barrier after the fill is reached by all of them.

use super::super::error::IrError;
use super::super::llvm;
use super::{build_error, entry_position, guard_error, is_runtime, runtime_function};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Module;
use inkwell::values::BasicMetadataValueEnum;
use std::collections::BTreeSet;

/// What one kernel's entry fills.
pub(super) struct Fill {
    kernel: llvm::Value,
    /// The shared arrays it uses (its own code or its callees'): the
    /// array, and its bytes (None: the `extern __shared__` array, as many
    /// bytes as the launch gives).
    arrays: Vec<(llvm::Value, Option<u64>)>,
}

/// The fills of the chosen `kernels` that use shared memory (none for a
/// kernel that uses none; the module's other kernels are never launched).
pub(super) fn plan_fills(module: &Module<'_>, kernels: &[llvm::Value]) -> Vec<Fill> {
    let layout = llvm::DataLayout::of(module.as_mut_ptr());
    let shared: Vec<(llvm::Value, Option<u64>, BTreeSet<llvm::Value>)> =
        llvm::globals(module.as_mut_ptr())
            .into_iter()
            .filter(|g| g.address_space == 3 && !is_runtime(&llvm::value_name(g.value)))
            .map(|g| {
                let bytes = g.initializer.map(|_| layout.alloc_size(g.value_type));
                (g.value, bytes, user_functions(g.value))
            })
            .collect();
    let mut fills = Vec::new();
    for &kernel in kernels {
        let reached = reachable(kernel);
        let mut arrays = Vec::new();
        let mut dynamic = false;
        for (global, bytes, users) in &shared {
            if users.is_disjoint(&reached) {
                continue;
            }
            // Every `extern __shared__` array is the same dynamic memory:
            // one fill serves them all.
            if bytes.is_none() && std::mem::replace(&mut dynamic, true) {
                continue;
            }
            arrays.push((*global, *bytes));
        }
        if !arrays.is_empty() {
            fills.push(Fill { kernel, arrays });
        }
    }
    fills
}

/// The functions whose code uses `global`, directly or through constant
/// expressions.
fn user_functions(global: llvm::Value) -> BTreeSet<llvm::Value> {
    let mut out = BTreeSet::new();
    let mut pending = llvm::users(global);
    while let Some(user) = pending.pop() {
        if llvm::is_instruction(user) {
            if let Some(block) = llvm::parent(user) {
                out.insert(llvm::block_function(block));
            }
        } else if !llvm::is_global_value(user) {
            pending.extend(llvm::users(user));
        }
    }
    out
}

/// `kernel` and the defined functions it calls, transitively.
fn reachable(kernel: llvm::Value) -> BTreeSet<llvm::Value> {
    let mut seen = BTreeSet::from([kernel]);
    let mut pending = vec![kernel];
    while let Some(function) = pending.pop() {
        for block in llvm::blocks(function) {
            for inst in llvm::instructions(block) {
                let callee = match llvm::is_call(inst) {
                    true => llvm::called_function(inst),
                    false => None,
                };
                if let Some(callee) = callee {
                    if !llvm::blocks(callee).is_empty() && seen.insert(callee) {
                        pending.push(callee);
                    }
                }
            }
        }
    }
    seen
}

/// Inserts each fill at its kernel's entry: a call of
/// `__gevo_poison_shared` per array, then one barrier.
pub(super) fn insert_fills<'c>(
    context: &'c Context,
    module: &Module<'c>,
    fills: &[Fill],
) -> Result<(), IrError> {
    if fills.is_empty() {
        return Ok(());
    }
    let poison = runtime_function(module, "__gevo_poison_shared")?;
    let dynamic_bytes = runtime_function(module, "__gevo_dynamic_shared_bytes")?;
    let barrier = Intrinsic::find("llvm.nvvm.barrier.sync")
        .and_then(|i| i.get_declaration(module, &[]))
        .ok_or_else(|| guard_error("no llvm.nvvm.barrier.sync intrinsic".into()))?;
    let builder = context.create_builder();
    let i64_type = context.i64_type();
    for fill in fills {
        builder.position_before(&entry_position(fill.kernel));
        for &(global, bytes) in &fill.arrays {
            let base = module
                .get_global(&llvm::value_name(global))
                .ok_or_else(|| guard_error("a planned shared array is gone".into()))?
                .as_pointer_value();
            let bytes = match bytes {
                Some(n) => i64_type.const_int(n, false),
                None => super::call_i64(&builder, dynamic_bytes)?,
            };
            let args: [BasicMetadataValueEnum<'c>; 2] = [base.into(), bytes.into()];
            builder.build_call(poison, &args, "").map_err(build_error)?;
        }
        builder
            .build_call(barrier, &[context.i32_type().const_zero().into()], "")
            .map_err(build_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::super::{CodegenOptions, KernelIr};

    /// Each case of poison_cases.ll, guarded: a kernel whose name begins
    /// with `fills_` calls the fill once per array it uses (its `; fills:`
    /// line) and then the barrier, before its
    /// own first instruction (`%first`), and the build verifies and
    /// compiles; a `plain_` kernel's guarded build has no fill.
    #[test]
    fn kernels_using_shared_memory_fill_it_first() {
        let text = include_str!("poison_cases.ll");
        let mut cases = 0;
        for (kernel, expected) in cases_of(text) {
            let ir = KernelIr::parse("poison_cases.ll", text.as_bytes(), Some(&kernel))
                .unwrap_or_else(|e| panic!("{kernel}: {e}"));
            let options = CodegenOptions::default();
            let (guarded, _) = ir
                .guarded_ir(&ir.empty_patch(), &options)
                .unwrap_or_else(|e| panic!("{kernel}: {e}"));
            // The fill's runtime compiles too.
            let build = ir
                .compile_guarded(&ir.empty_patch(), &options)
                .unwrap_or_else(|e| panic!("{kernel}: {e}"));
            assert_eq!(build.poisons_shared, !expected.is_empty(), "{kernel}");
            let body = function_body(&guarded, &kernel);
            let lines: Vec<&str> = body.lines().collect();
            let fills: Vec<String> = body
                .lines()
                .filter(|l| l.contains("@__gevo_poison_shared("))
                .map(|l| {
                    let at = l.find("addrspace(3) @").expect("the array") + 14;
                    let rest = &l[at..];
                    rest[..rest.find([',', ')']).unwrap()].to_string()
                })
                .collect();
            assert_eq!(fills, expected, "{kernel}:\n{body}");
            let first_own = lines
                .iter()
                .position(|l| l.contains("%first ="))
                .expect("each case marks its first instruction");
            match kernel.starts_with("fills_") {
                true => {
                    let barrier = lines
                        .iter()
                        .position(|l| l.contains("@llvm.nvvm.barrier.sync(i32 0)"))
                        .unwrap_or_else(|| panic!("{kernel}: no barrier\n{body}"));
                    let last_fill = lines
                        .iter()
                        .rposition(|l| l.contains("@__gevo_poison_shared("))
                        .unwrap();
                    assert!(
                        last_fill < barrier && barrier < first_own,
                        "{kernel}:\n{body}"
                    );
                }
                false => {
                    assert!(kernel.starts_with("plain_"), "{kernel}");
                    assert!(!body.contains("__gevo_poison_shared"), "{kernel}:\n{body}");
                }
            }
            cases += 1;
        }
        assert_eq!(cases, 5);
    }

    /// The cases' kernels, each with the arrays its comment expects
    /// (`; fills: @a @b`, or nothing).
    fn cases_of(text: &str) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        let mut expected = Vec::new();
        for line in text.lines() {
            if let Some(names) = line.strip_prefix("; fills:") {
                expected = names
                    .split_whitespace()
                    .map(|n| n.trim_start_matches('@').to_string())
                    .collect();
            } else if let Some(rest) = line.strip_prefix("define void @") {
                let name = rest[..rest.find('(').unwrap()].to_string();
                if name.starts_with("fills_") || name.starts_with("plain_") {
                    out.push((name, std::mem::take(&mut expected)));
                }
            }
        }
        out
    }

    /// The text of `name`'s definition in `module`.
    fn function_body<'t>(module: &'t str, name: &str) -> &'t str {
        let start = module
            .find(&format!("@{name}("))
            .unwrap_or_else(|| panic!("{name} in the guarded IR"));
        let start = module[..start].rfind("define").unwrap();
        let end = start + module[start..].find("\n}\n").unwrap();
        &module[start..end]
    }
}
