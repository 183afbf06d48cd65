//! How a GPU worker turns code into a loaded kernel: machine code that
//! ptxas made (in a compile worker, or here when none came, in the
//! background while the variant's guarded build is checked), or the
//! driver's JIT. The original and every variant go the same way, chosen
//! once when the original is loaded, so a measured speedup never comes from
//! the difference between two compilers.

use super::driver::Kernel;
use super::toolkit::{Assembler, Assembling, Cubin};
use super::CudaError;

/// The way this worker loads code.
#[derive(Debug)]
pub enum Loader {
    /// PTX through the driver's JIT.
    Jit,
    /// Cubins for `arch` (the device's), from ptxas.
    Assembled { assembler: Assembler, arch: String },
}

impl Loader {
    /// Loads the original: assembled for `arch` when there is an
    /// `assembler` and it takes the original's PTX, else by the JIT (and
    /// then every variant too).
    pub fn original(
        ptx: &str,
        names: &[String],
        assembler: Option<Assembler>,
        arch: &str,
    ) -> Result<(Kernel, Loader), CudaError> {
        if let Some(assembler) = assembler {
            // A toolkit newer than the driver, say, makes cubins this driver
            // cannot load: then the JIT serves, as without ptxas.
            let loaded = assembler
                .assemble(ptx, arch)
                .map_err(|e| e.to_string())
                .and_then(|cubin| Kernel::load_cubin(&cubin, names).map_err(|e| e.to_string()));
            match loaded {
                Ok(kernel) => {
                    let arch = arch.to_string();
                    tracing::info!(ptxas = %assembler.program().display(), %arch, "the original and the variants load as cubins");
                    return Ok((kernel, Loader::Assembled { assembler, arch }));
                }
                Err(e) => tracing::warn!("the original does not load as a cubin from {}, so every variant goes through the driver's JIT: {e}", assembler.program().display()),
            }
        }
        Ok((Kernel::load(ptx, names)?, Loader::Jit))
    }

    /// Loads a variant: its `cubin` when one came for this device, else
    /// its PTX assembled here, or by the JIT when the original was.
    pub fn variant(
        &self,
        ptx: &str,
        cubin: Option<&Cubin>,
        names: &[String],
    ) -> Result<Kernel, CudaError> {
        self.load(self.prepare(ptx, cubin), ptx, names)
    }

    /// Starts what loading a variant needs that can go on beside other
    /// work: ptxas, when this worker loads cubins and none came.
    pub fn prepare<'a>(&self, ptx: &str, cubin: Option<&'a Cubin>) -> Prepared<'a> {
        match (self, cubin) {
            (Loader::Jit, _) => Prepared::Ptx,
            (Loader::Assembled { .. }, Some(cubin)) => Prepared::Cubin(cubin),
            (Loader::Assembled { assembler, arch }, None) => {
                Prepared::Assembling(assembler.start(ptx, arch).map_err(|e| e.to_string()))
            }
        }
    }

    /// Loads the variant `prepare` started on (`ptx` is the same).
    pub fn load(
        &self,
        prepared: Prepared<'_>,
        ptx: &str,
        names: &[String],
    ) -> Result<Kernel, CudaError> {
        let Loader::Assembled { assembler, arch } = self else {
            return Kernel::load(ptx, names);
        };
        let assembled = match prepared {
            Prepared::Ptx => return Kernel::load(ptx, names),
            Prepared::Cubin(cubin) => match Kernel::load_cubin(cubin, names) {
                Ok(kernel) => return Ok(kernel),
                Err(e) if e.poisons_context() => return Err(e),
                // Made for another GPU, say: assemble it here instead.
                Err(e) => {
                    tracing::debug!("the variant's cubin does not load ({e}); assembling it here");
                    assembler.assemble(ptx, arch).map_err(|e| e.to_string())
                }
            },
            Prepared::Assembling(started) => {
                started.and_then(|a| a.finish().map_err(|e| e.to_string()))
            }
        };
        let cubin = assembled.map_err(|log| CudaError::InvalidPtx { log })?;
        Kernel::load_cubin(&cubin, names)
    }
}

/// A variant's code on its way to being loaded (`Loader::prepare`).
#[derive(Debug)]
pub enum Prepared<'a> {
    /// The JIT loads the PTX.
    Ptx,
    /// The cubin a compile worker made.
    Cubin(&'a Cubin),
    /// ptxas running here, or why it could not start.
    Assembling(Result<Assembling, String>),
}
