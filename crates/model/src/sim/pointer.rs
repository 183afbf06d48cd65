//! Simulated pointers are 64-bit values tagged with their memory:
//! bits 56..64 the space, bits 40..56 the buffer (global) or global-variable
//! (constant) index, bits 0..40 the byte offset. Pointer arithmetic that runs
//! off a region changes the tag or leaves a huge offset, and so is caught as
//! out of bounds; null (space 0) is never valid.

pub const GLOBAL: u8 = 1;
pub const SHARED: u8 = 2;
pub const LOCAL: u8 = 3;
pub const CONSTANT: u8 = 4;

pub const OFFSET_BITS: u32 = 40;
const INDEX_BITS: u32 = 16;

pub fn make(space: u8, index: u64, offset: u64) -> u64 {
    (u64::from(space) << (OFFSET_BITS + INDEX_BITS)) | (index << OFFSET_BITS) | offset
}

/// An offset as the signed number it stands for: pointer arithmetic wraps
/// in the offset's 40 bits, so a step back from a buffer's start is a huge
/// unsigned offset.
pub fn signed_offset(offset: u64) -> i64 {
    crate::sim::code::sign_extend(offset, OFFSET_BITS)
}

/// (space, index, offset)
pub fn split(p: u64) -> (u8, usize, u64) {
    let space = (p >> (OFFSET_BITS + INDEX_BITS)) as u8;
    let index = ((p >> OFFSET_BITS) & ((1 << INDEX_BITS) - 1)) as usize;
    (space, index, p & ((1 << OFFSET_BITS) - 1))
}

/// (space, index, offset) of the region whose start is nearest `p`, the
/// offset in two's complement over the offset's bits (see
/// [`signed_offset`]): `make(GLOBAL, 3, 0) - 4` is region 3's byte -4, not
/// region 2's byte 2^40 - 4.
pub fn split_nearest(p: u64) -> (u8, usize, u64) {
    let half = 1u64 << (OFFSET_BITS - 1);
    let (space, index, offset) = split(p.wrapping_add(half));
    (
        space,
        index,
        offset.wrapping_sub(half) & ((1 << OFFSET_BITS) - 1),
    )
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
        // The nearest region is the one the address stepped back from.
        let (space, index, offset) = split_nearest(p.wrapping_sub(1238));
        assert_eq!((space, index, signed_offset(offset)), (GLOBAL, 3, -4));
        let first = make(GLOBAL, 0, 0).wrapping_sub(256);
        let (space, index, offset) = split_nearest(first);
        assert_eq!((space, index, signed_offset(offset)), (GLOBAL, 0, -256));
        assert_eq!(split_nearest(make(GLOBAL, 1, 40)), (GLOBAL, 1, 40));
    }
}
