//! [`Variant`]: one replay of a patch serving several uses. A compile
//! worker hashes the patched IR, lowers it for its simulator pre-screen and
//! emits PTX only for a variant the pre-screen passed, so a variant the
//! simulator rejects costs one replay and no code generation
//! (docs/evolve.md, "The pre-screen").

use crate::{
    codegen, content_hash, lower, CodegenOptions, Compiled, IrError, KernelIr, LiveModule,
};
use gevo_model::sim::code::Program;
use inkwell::context::Context;
use inkwell::module::Module;

/// A patch replayed on the original and verified, inside its own context.
pub struct Variant<'a, 'c> {
    ir: &'a KernelIr,
    context: &'c Context,
    module: &'a Module<'c>,
    live: &'a LiveModule<'a>,
    text: Option<String>,
}

impl Variant<'_, '_> {
    /// The patched IR's text, printed once.
    pub fn text(&mut self) -> &str {
        self.text
            .get_or_insert_with(|| self.module.print_to_string().to_string())
    }

    /// Hash of the patched IR's text: two patches whose replays give the
    /// same IR have the same hash (and the same PTX).
    pub fn ir_hash(&mut self) -> String {
        content_hash(self.text().as_bytes())
    }

    /// Every chosen kernel lowered for the simulator, in order.
    pub fn lower_all(&self) -> Result<Vec<Program>, IrError> {
        self.live
            .parts
            .iter()
            .map(|f| lower::lower(self.module.as_mut_ptr(), f))
            .collect()
    }

    /// The (first) chosen kernel lowered for the simulator.
    pub fn lower_first(&self) -> Result<Program, IrError> {
        lower::lower(self.module.as_mut_ptr(), &self.live.parts[0])
    }

    /// Emits PTX. Code generation strips and links the module, so the
    /// variant is used up.
    pub fn compile(mut self, options: &CodegenOptions) -> Result<Compiled, IrError> {
        let ir = match self.text.take() {
            Some(text) => text,
            None => self.module.print_to_string().to_string(),
        };
        let ptx = codegen::emit_ptx(self.context, self.module, &self.ir.kernels, options)?;
        Ok(Compiled {
            ptx_hash: content_hash(ptx.as_bytes()),
            ir,
            ptx,
        })
    }
}

impl KernelIr {
    /// Replays `patch` and verifies it, then hands the variant to `then`.
    pub fn with_variant<T>(
        &self,
        patch: &crate::Patch,
        then: impl FnOnce(Variant<'_, '_>) -> T,
    ) -> Result<T, IrError> {
        self.with_patched(patch, |context, module, live| {
            Ok(then(Variant {
                ir: self,
                context,
                module,
                live,
                text: None,
            }))
        })
    }
}
