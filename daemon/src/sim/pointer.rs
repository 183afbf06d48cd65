//! Simulated pointers are 64-bit values tagged with their memory:
//! bits 56..64 the space, bits 40..56 the buffer (global) or global-variable
//! (constant) index, bits 0..40 the byte offset. Pointer arithmetic that runs
//! off a region changes the tag or leaves a huge offset, and so is caught as
//! out of bounds; null (space 0) is never valid.

pub const GLOBAL: u8 = 1;
pub const SHARED: u8 = 2;
pub const LOCAL: u8 = 3;
pub const CONSTANT: u8 = 4;

const OFFSET_BITS: u32 = 40;
const INDEX_BITS: u32 = 16;

pub fn make(space: u8, index: u64, offset: u64) -> u64 {
    (u64::from(space) << (OFFSET_BITS + INDEX_BITS)) | (index << OFFSET_BITS) | offset
}

/// (space, index, offset)
pub fn split(p: u64) -> (u8, usize, u64) {
    let space = (p >> (OFFSET_BITS + INDEX_BITS)) as u8;
    let index = ((p >> OFFSET_BITS) & ((1 << INDEX_BITS) - 1)) as usize;
    (space, index, p & ((1 << OFFSET_BITS) - 1))
}

pub fn space_name(space: u8) -> &'static str {
    match space {
        GLOBAL => "global",
        SHARED => "shared",
        LOCAL => "local",
        CONSTANT => "constant",
        _ => "invalid",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_wrap() {
        let p = make(GLOBAL, 3, 1234);
        assert_eq!(split(p), (GLOBAL, 3, 1234));
        // An offset of -4 from the start of buffer 3 lands in buffer 2 at a
        // huge offset: out of bounds, never another buffer's data.
        let (space, index, offset) = split(p.wrapping_sub(1238));
        assert_eq!((space, index), (GLOBAL, 2));
        assert!(offset > 1 << 39);
        assert_eq!(split(0).0, 0);
    }
}
