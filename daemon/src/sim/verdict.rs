//! Why a simulated run failed, naming the instruction, block and thread.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    OutOfBounds {
        space: &'static str,
        buffer: usize,
        offset: u64,
        bytes: u32,
    },
    SharedRace {
        offset: u64,
        /// The other thread, when exactly one other thread touched the byte.
        other_thread: Option<[u32; 3]>,
        write: bool,
    },
    UninitializedShared {
        offset: u64,
    },
    /// A plain store to global bytes that another block (`other_block`,
    /// its CTA coordinates) also wrote with plain stores in this launch.
    GlobalRace {
        buffer: usize,
        offset: u64,
        bytes: u32,
        other_block: [u32; 3],
    },
    /// An aligned barrier this thread waits at while `other_thread` of the
    /// same block has exited (`other_barrier` None) or waits at another
    /// barrier instruction.
    DivergentBarrier {
        other_thread: [u32; 3],
        other_barrier: Option<u32>,
    },
    StepBudget {
        budget: u64,
    },
    Unsupported {
        what: String,
    },
    Unreachable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub fault: Fault,
    /// The edit engine's instruction id.
    pub instruction: u32,
    pub block: String,
    pub cta: [u32; 3],
    pub thread: [u32; 3],
}

impl Verdict {
    /// A short name for tables and JSON: `out_of_bounds`, `race`, ...
    pub fn kind(&self) -> &'static str {
        match self.fault {
            Fault::OutOfBounds { .. } => "out_of_bounds",
            Fault::SharedRace { .. } => "race",
            Fault::UninitializedShared { .. } => "uninitialized_shared",
            Fault::GlobalRace { .. } => "global_race",
            Fault::DivergentBarrier { .. } => "divergent_barrier",
            Fault::StepBudget { .. } => "step_budget",
            Fault::Unsupported { .. } => "unsupported",
            Fault::Unreachable => "unreachable",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::OutOfBounds {
                space,
                buffer,
                offset,
                bytes,
            } => match *space {
                "global" => write!(
                    f,
                    "out-of-bounds {bytes}-byte access to buffer {buffer} at byte {offset}"
                ),
                "invalid" => write!(f, "{bytes}-byte access through an invalid pointer"),
                _ => write!(
                    f,
                    "out-of-bounds {bytes}-byte {space} access at byte {offset}"
                ),
            },
            Fault::SharedRace {
                offset,
                other_thread,
                write,
            } => {
                let what = if *write { "write" } else { "read" };
                match other_thread {
                    Some(t) => write!(f, "shared-memory race: {what} of byte {offset} also touched by thread {t:?} since the last barrier"),
                    None => write!(f, "shared-memory race: {what} of byte {offset} also touched by other threads since the last barrier"),
                }
            }
            Fault::UninitializedShared { offset } => {
                write!(
                    f,
                    "read of shared byte {offset}, never written in this block"
                )
            }
            Fault::GlobalRace {
                buffer,
                offset,
                bytes,
                other_block,
            } => write!(
                f,
                "global-memory race: {bytes}-byte write to buffer {buffer} at byte {offset}, which block {other_block:?} also wrote in this launch"
            ),
            Fault::DivergentBarrier {
                other_thread,
                other_barrier: None,
            } => write!(
                f,
                "divergent barrier: reached while thread {other_thread:?} of the same block has exited"
            ),
            Fault::DivergentBarrier {
                other_thread,
                other_barrier: Some(i),
            } => write!(
                f,
                "divergent barrier: reached while thread {other_thread:?} of the same block waits at another barrier, instruction i{i}"
            ),
            Fault::StepBudget { budget } => {
                write!(f, "step budget of {budget} instructions per block exceeded")
            }
            Fault::Unsupported { what } => write!(f, "unsupported: {what}"),
            Fault::Unreachable => f.write_str("reached `unreachable`"),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (instruction i{} in block {}, block {:?}, thread {:?})",
            self.fault, self.instruction, self.block, self.cta, self.thread
        )
    }
}
