//! Memory access paths: plain and vector loads and stores in the global,
//! shared, local and constant spaces, with their bounds checks and memory
//! cost; a plain global store also claims its bytes for this block
//! (`Writers`), so that two blocks writing the same bytes are a verdict.

use super::block::BlockRun;
use super::cta_of;
use crate::sim::code::{Inst, Reg};
use crate::sim::cost;
use crate::sim::pointer;
use crate::sim::verdict::{Fault, Verdict};

impl BlockRun<'_> {
    pub(super) fn out_of_bounds(&self, t: usize, inst: &Inst, p: u64, bytes: u32) -> Verdict {
        // Named by the region nearest the address: a step back from a
        // region's start borrows into the tag, and is that region's byte -n.
        let (space, index, offset) = pointer::split_nearest(p);
        self.verdict(
            t,
            inst,
            Fault::OutOfBounds {
                space: pointer::space_name(space),
                buffer: index,
                offset,
                bytes,
            },
        )
    }

    /// A plain store to global memory (one call from the interpreter loop).
    #[inline(never)]
    fn store_global(
        &self,
        t: usize,
        inst: &Inst,
        p: u64,
        v: u64,
        bytes: u32,
    ) -> Result<(), Verdict> {
        let (_, index, offset) = pointer::split(p);
        if self.memory.read_only(index) && self.memory.in_bounds(index, offset, bytes) {
            return Err(self.input_written(t, inst, index, offset, bytes));
        }
        if !self.memory.write(index, offset, bytes, v) {
            return Err(self.out_of_bounds(t, inst, p, bytes));
        }
        self.claim_global(t, inst, index, offset, bytes)
    }

    /// A store into a protected buffer (an input the original never
    /// writes): a verdict, before the bytes change.
    pub(super) fn input_written(
        &self,
        t: usize,
        inst: &Inst,
        index: usize,
        offset: u64,
        bytes: u32,
    ) -> Verdict {
        self.verdict(
            t,
            inst,
            Fault::InputWritten {
                buffer: index,
                offset,
                bytes,
            },
        )
    }

    /// Records this block as the writer of global bytes (a plain store);
    /// a verdict if another block wrote any of them in this launch.
    fn claim_global(
        &self,
        t: usize,
        inst: &Inst,
        index: usize,
        offset: u64,
        bytes: u32,
    ) -> Result<(), Verdict> {
        self.writers
            .claim(index, offset, bytes, self.writer)
            .map_err(|other| {
                let fault = Fault::GlobalRace {
                    buffer: index,
                    offset,
                    bytes,
                    other_block: cta_of(self.dims, other as usize - 1),
                };
                self.verdict(t, inst, fault)
            })
    }

    pub(super) fn load(
        &mut self,
        t: usize,
        inst: &Inst,
        p: u64,
        bytes: u32,
    ) -> Result<u64, Verdict> {
        let (space, index, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let end = offset + u64::from(bytes);
        let value = match space {
            pointer::GLOBAL => self.memory.read(index, offset, bytes),
            pointer::SHARED if end <= self.shared.len() as u64 => {
                self.track_shared(t, inst, offset as usize, bytes, false)?;
                Some(read_le(&self.shared[offset as usize..end as usize]))
            }
            pointer::LOCAL if end <= self.threads[t].local.len() as u64 => Some(read_le(
                &self.threads[t].local[offset as usize..end as usize],
            )),
            pointer::CONSTANT => self
                .program
                .constant_globals
                .get(index)
                .filter(|g| end <= g.len() as u64)
                .map(|g| read_le(&g[offset as usize..end as usize])),
            _ => None,
        };
        value.ok_or_else(|| self.out_of_bounds(t, inst, p, bytes))
    }

    pub(super) fn store(
        &mut self,
        t: usize,
        inst: &Inst,
        p: u64,
        v: u64,
        bytes: u32,
    ) -> Result<(), Verdict> {
        let (space, _, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let end = offset + u64::from(bytes);
        let ok = match space {
            pointer::GLOBAL => return self.store_global(t, inst, p, v, bytes),
            pointer::SHARED if end <= self.shared.len() as u64 => {
                self.track_shared(t, inst, offset as usize, bytes, true)?;
                write_le(&mut self.shared[offset as usize..end as usize], v);
                true
            }
            pointer::LOCAL if end <= self.threads[t].local.len() as u64 => {
                write_le(&mut self.threads[t].local[offset as usize..end as usize], v);
                true
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(self.out_of_bounds(t, inst, p, bytes))
        }
    }

    /// Whether `bytes` bytes at `offset` of the space's region `index` exist.
    fn accessible(&self, t: usize, space: u8, index: usize, offset: u64, bytes: u64) -> bool {
        let Some(end) = offset.checked_add(bytes) else {
            return false;
        };
        match space {
            pointer::GLOBAL => {
                u32::try_from(bytes).is_ok_and(|bytes| self.memory.in_bounds(index, offset, bytes))
            }
            pointer::SHARED => end <= self.shared.len() as u64,
            pointer::LOCAL => end <= self.threads[t].local.len() as u64,
            pointer::CONSTANT => self
                .program
                .constant_globals
                .get(index)
                .is_some_and(|g| end <= g.len() as u64),
            _ => false,
        }
    }

    /// A vector load: the whole access is checked once (bounds, and the
    /// shared shadow for every byte), then each element is read.
    pub(super) fn load_vector(
        &mut self,
        t: usize,
        inst: &Inst,
        p: u64,
        elem_bytes: u32,
        lanes: u32,
    ) -> Result<(), Verdict> {
        let (space, index, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let total = elem_bytes.saturating_mul(lanes);
        if !self.accessible(t, space, index, offset, u64::from(total)) {
            return Err(self.out_of_bounds(t, inst, p, total));
        }
        if space == pointer::SHARED {
            self.track_shared(t, inst, offset as usize, total, false)?;
        }
        for lane in 0..lanes {
            let at = (offset + u64::from(lane * elem_bytes)) as usize;
            let range = at..at + elem_bytes as usize;
            let value = match space {
                pointer::GLOBAL => self.memory.read(index, at as u64, elem_bytes),
                pointer::SHARED => self.shared.get(range).map(read_le),
                pointer::LOCAL => self.threads[t].local.get(range).map(read_le),
                _ => self
                    .program
                    .constant_globals
                    .get(index)
                    .and_then(|g| g.get(range))
                    .map(read_le),
            };
            // In bounds: checked above for the whole access.
            self.threads[t].regs[(inst.dst + lane) as usize] = value.unwrap_or(0);
        }
        Ok(())
    }

    /// A vector store of registers `value..value + lanes`, checked as one access.
    pub(super) fn store_vector(
        &mut self,
        t: usize,
        inst: &Inst,
        p: u64,
        value: Reg,
        elem_bytes: u32,
        lanes: u32,
    ) -> Result<(), Verdict> {
        let (space, index, offset) = pointer::split(p);
        self.cost += cost::memory_weight(space);
        let total = elem_bytes.saturating_mul(lanes);
        if space == pointer::CONSTANT || !self.accessible(t, space, index, offset, u64::from(total))
        {
            return Err(self.out_of_bounds(t, inst, p, total));
        }
        match space {
            pointer::SHARED => self.track_shared(t, inst, offset as usize, total, true)?,
            pointer::GLOBAL if self.memory.read_only(index) => {
                return Err(self.input_written(t, inst, index, offset, total))
            }
            pointer::GLOBAL => self.claim_global(t, inst, index, offset, total)?,
            _ => {}
        }
        for lane in 0..lanes {
            let v = self.threads[t].regs[(value + lane) as usize];
            let at = (offset + u64::from(lane * elem_bytes)) as usize;
            let range = at..at + elem_bytes as usize;
            match space {
                pointer::GLOBAL => {
                    self.memory.write(index, at as u64, elem_bytes, v);
                }
                pointer::SHARED => write_le(&mut self.shared[range], v),
                _ => write_le(&mut self.threads[t].local[range], v),
            }
        }
        Ok(())
    }
}

pub(super) fn read_le(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(buf)
}

pub(super) fn write_le(dst: &mut [u8], v: u64) {
    let n = dst.len();
    dst.copy_from_slice(&v.to_le_bytes()[..n]);
}
