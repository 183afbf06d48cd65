//! The shared-memory shadow: per byte, who wrote and who read it in which
//! barrier interval, so that two threads touching a byte between two
//! barriers (one of them writing) and reads of bytes never written are
//! verdicts.

use super::block::BlockRun;
use crate::sim::code::Inst;
use crate::sim::verdict::{Fault, Verdict};

pub(super) const NO_THREAD: u32 = u32::MAX;
const MANY: u32 = u32::MAX - 1;

/// Per shared byte: who wrote and who read it in which barrier interval.
#[derive(Clone, Copy)]
pub(super) struct Shadow {
    pub(super) written: bool,
    pub(super) write_epoch: u32,
    pub(super) writer: u32,
    pub(super) read_epoch: u32,
    pub(super) reader: u32,
}

impl BlockRun<'_> {
    /// Checks a shared access against the shadow and records it.
    pub(super) fn track_shared(
        &mut self,
        t: usize,
        inst: &Inst,
        offset: usize,
        bytes: u32,
        write: bool,
    ) -> Result<(), Verdict> {
        let me = t as u32;
        for i in offset..offset + bytes as usize {
            let s = self.shadow[i];
            let conflict = if write {
                (s.write_epoch == self.epoch && s.writer != me)
                    || (s.read_epoch == self.epoch && s.reader != me)
            } else {
                s.write_epoch == self.epoch && s.writer != me
            };
            if conflict {
                let other = if s.write_epoch == self.epoch && s.writer != me {
                    s.writer
                } else {
                    s.reader
                };
                let other_thread = (other < MANY).then(|| self.threads[other as usize].tid);
                return Err(self.verdict(
                    t,
                    inst,
                    Fault::SharedRace {
                        offset: i as u64,
                        other_thread,
                        write,
                    },
                ));
            }
            if !write && !s.written {
                return Err(self.verdict(t, inst, Fault::UninitializedShared { offset: i as u64 }));
            }
            let s = &mut self.shadow[i];
            if write {
                s.written = true;
                s.write_epoch = self.epoch;
                s.writer = me;
            } else if s.read_epoch != self.epoch {
                s.read_epoch = self.epoch;
                s.reader = me;
            } else if s.reader != me {
                s.reader = MANY;
            }
        }
        Ok(())
    }
}
