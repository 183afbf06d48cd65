//! Global memory: one buffer per kernel buffer argument, shared by the worker
//! threads that run blocks in parallel. Words are relaxed atomics, so blocks
//! that a mutated kernel makes touch the same bytes cannot cause undefined
//! behaviour here (on x86-64 relaxed loads and stores are plain moves).
//! `Writers` records, per launch, which block wrote each part of it.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::OnceLock;

pub struct GlobalMemory {
    buffers: Vec<Buffer>,
    /// Buffers a store may not touch (`protect`): inputs the original
    /// kernel never writes.
    read_only: Vec<bool>,
}

struct Buffer {
    words: Vec<AtomicU32>,
    len: u64,
}

impl Buffer {
    fn byte(&self, i: u64) -> u8 {
        (self.words[(i / 4) as usize].load(Relaxed) >> (8 * (i % 4))) as u8
    }

    fn set_byte(&self, i: u64, b: u8) {
        let shift = 8 * (i % 4);
        let _ = self.words[(i / 4) as usize].fetch_update(Relaxed, Relaxed, |w| {
            Some((w & !(0xff << shift)) | (u32::from(b) << shift))
        });
    }
}

impl GlobalMemory {
    pub fn new(contents: &[&[u8]]) -> Self {
        let buffers = contents
            .iter()
            .map(|bytes| {
                let words = bytes
                    .chunks(4)
                    .map(|c| {
                        let mut w = [0u8; 4];
                        w[..c.len()].copy_from_slice(c);
                        AtomicU32::new(u32::from_le_bytes(w))
                    })
                    .collect();
                Buffer {
                    words,
                    len: bytes.len() as u64,
                }
            })
            .collect();
        GlobalMemory {
            read_only: vec![false; contents.len()],
            buffers,
        }
    }

    /// Makes a store into buffer `index` a verdict (`Fault::InputWritten`),
    /// naming the storing instruction.
    pub fn protect(&mut self, index: usize) {
        if let Some(r) = self.read_only.get_mut(index) {
            *r = true;
        }
    }

    /// Whether stores into buffer `index` are a verdict.
    pub fn read_only(&self, index: usize) -> bool {
        self.read_only.get(index).copied().unwrap_or(false)
    }

    /// Every buffer's words, to restore a launch's starting state.
    pub(crate) fn snapshot(&self) -> Vec<Vec<u32>> {
        self.buffers
            .iter()
            .map(|b| b.words.iter().map(|w| w.load(Relaxed)).collect())
            .collect()
    }

    pub(crate) fn restore(&self, snapshot: &[Vec<u32>]) {
        for (b, words) in self.buffers.iter().zip(snapshot) {
            for (w, &v) in b.words.iter().zip(words) {
                w.store(v, Relaxed);
            }
        }
    }

    pub fn contents(&self, index: usize) -> Vec<u8> {
        let b = &self.buffers[index];
        (0..b.len).map(|i| b.byte(i)).collect()
    }

    fn buffer(&self, index: usize, offset: u64, bytes: u32) -> Option<&Buffer> {
        self.buffers.get(index).filter(|b| {
            offset
                .checked_add(u64::from(bytes))
                .is_some_and(|end| end <= b.len)
        })
    }

    /// Whether buffer `index` has `bytes` bytes at `offset`.
    pub fn in_bounds(&self, index: usize, offset: u64, bytes: u32) -> bool {
        self.buffer(index, offset, bytes).is_some()
    }

    /// Little-endian value of `bytes` bytes at `offset`, or `None` out of bounds.
    pub fn read(&self, index: usize, offset: u64, bytes: u32) -> Option<u64> {
        let b = self.buffer(index, offset, bytes)?;
        if bytes == 4 && offset % 4 == 0 {
            return Some(u64::from(b.words[(offset / 4) as usize].load(Relaxed)));
        }
        if bytes == 8 && offset % 4 == 0 {
            let w = (offset / 4) as usize;
            return Some(
                u64::from(b.words[w].load(Relaxed))
                    | (u64::from(b.words[w + 1].load(Relaxed)) << 32),
            );
        }
        Some((0..u64::from(bytes)).fold(0, |v, i| v | (u64::from(b.byte(offset + i)) << (8 * i))))
    }

    /// Writes the low `bytes` bytes of `v`; false when out of bounds.
    pub fn write(&self, index: usize, offset: u64, bytes: u32, v: u64) -> bool {
        let Some(b) = self.buffer(index, offset, bytes) else {
            return false;
        };
        if bytes == 4 && offset % 4 == 0 {
            b.words[(offset / 4) as usize].store(v as u32, Relaxed);
        } else if bytes == 8 && offset % 4 == 0 {
            let w = (offset / 4) as usize;
            b.words[w].store(v as u32, Relaxed);
            b.words[w + 1].store((v >> 32) as u32, Relaxed);
        } else {
            for i in 0..u64::from(bytes) {
                b.set_byte(offset + i, (v >> (8 * i)) as u8);
            }
        }
        true
    }

    /// Atomic read-modify-write of an aligned 4- or 8-byte value; returns the old value.
    pub fn update(
        &self,
        index: usize,
        offset: u64,
        bytes: u32,
        f: &dyn Fn(u64) -> u64,
    ) -> Option<u64> {
        let b = self.buffer(index, offset, bytes)?;
        if bytes == 4 && offset % 4 == 0 {
            let old = b.words[(offset / 4) as usize]
                .fetch_update(Relaxed, Relaxed, |w| Some(f(u64::from(w)) as u32))
                .expect("update closure always returns Some");
            return Some(u64::from(old));
        }
        // Wider or unaligned atomics: not atomic across worker threads, but
        // deterministic within a block.
        let old = self.read(index, offset, bytes)?;
        self.write(index, offset, bytes, f(old));
        Some(old)
    }
}

/// Which block last wrote each granule (4-byte word, or byte) of global
/// memory with a plain store during one launch: 0 for none, else the block's
/// linear index + 1. One per launch; a buffer's table is made on its first
/// plain store, so read-only buffers cost nothing.
pub(crate) struct Writers {
    /// log2 of the granule size: 2 (words) or 0 (bytes).
    shift: u32,
    /// Only one worker thread runs blocks: plain stores suffice.
    exclusive: bool,
    lens: Vec<u64>,
    tables: Vec<OnceLock<Box<[AtomicU32]>>>,
}

impl Writers {
    pub(crate) fn new(memory: &GlobalMemory, shift: u32, exclusive: bool) -> Self {
        Writers {
            shift,
            exclusive,
            lens: memory.buffers.iter().map(|b| b.len).collect(),
            tables: memory.buffers.iter().map(|_| OnceLock::new()).collect(),
        }
    }

    /// Records block `me` (index + 1; 0 records nothing) as the writer of
    /// bytes `offset..offset + bytes` of buffer `index`, which the caller has
    /// bounds-checked. Returns another block (index + 1) that wrote one of
    /// them in this launch. Every pair of blocks writing one granule is seen
    /// by whichever of them writes second: with several workers a block's
    /// first write of a granule is an atomic swap, so two first writes
    /// cannot both miss.
    pub(crate) fn claim(&self, index: usize, offset: u64, bytes: u32, me: u32) -> Result<(), u32> {
        let (Some(table), Some(&len)) = (self.tables.get(index), self.lens.get(index)) else {
            return Ok(());
        };
        if me == 0 || bytes == 0 {
            return Ok(());
        }
        let shift = self.shift;
        let table = table.get_or_init(|| {
            (0..len.div_ceil(1 << shift))
                .map(|_| AtomicU32::new(0))
                .collect()
        });
        let first = offset >> shift;
        let last = (offset + u64::from(bytes) - 1) >> shift;
        for granule in table.iter().take(last as usize + 1).skip(first as usize) {
            // Rewriting a granule this block owns needs no atomic swap, and
            // neither does anything when no other thread is writing.
            let seen = granule.load(Relaxed);
            if seen == me {
                continue;
            }
            let previous = if self.exclusive {
                granule.store(me, Relaxed);
                seen
            } else {
                granule.swap(me, Relaxed)
            };
            if previous != 0 && previous != me {
                return Err(previous);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_report_other_blocks_per_granule() {
        let memory = GlobalMemory::new(&[&[0u8; 16]]);
        for exclusive in [false, true] {
            let words = Writers::new(&memory, 2, exclusive);
            assert_eq!(words.claim(0, 0, 4, 1), Ok(()));
            assert_eq!(words.claim(0, 0, 4, 1), Ok(()), "the same block again");
            assert_eq!(words.claim(0, 4, 4, 2), Ok(()));
            // Bytes 2..6 touch block 1's word first.
            assert_eq!(words.claim(0, 2, 4, 3), Err(1));
            assert_eq!(words.claim(0, 12, 1, 4), Ok(()));
            assert_eq!(words.claim(0, 15, 1, 5), Err(4), "one word, other bytes");

            let bytes = Writers::new(&memory, 0, exclusive);
            assert_eq!(bytes.claim(0, 0, 2, 1), Ok(()));
            assert_eq!(bytes.claim(0, 2, 2, 2), Ok(()), "neighbouring bytes");
            assert_eq!(bytes.claim(0, 1, 1, 2), Err(1));
            assert_eq!(bytes.claim(0, 0, 1, 0), Ok(()), "block 0 is not recorded");
            assert_eq!(bytes.claim(1, 0, 1, 1), Ok(()), "no such buffer");
        }
    }

    #[test]
    fn snapshot_restores_contents() {
        let memory = GlobalMemory::new(&[&[1, 2, 3, 4, 5], &[6]]);
        let start = memory.snapshot();
        assert!(memory.write(0, 3, 2, 0xffff));
        assert!(memory.write(1, 0, 1, 0));
        memory.restore(&start);
        assert_eq!(memory.contents(0), [1, 2, 3, 4, 5]);
        assert_eq!(memory.contents(1), [6]);
    }
}
