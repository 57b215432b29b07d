//! Adler-32 (RFC 1950 §8.2), computed incrementally over a stream that
//! arrives in pieces of any size.

/// The largest prime below 2^16.
const MOD_ADLER: u32 = 65_521;
/// The most bytes that can be summed before `b` may overflow 32 bits
/// (zlib's NMAX): reducing once per block keeps the inner loop cheap.
const NMAX: usize = 5552;

/// A running Adler-32 checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adler32 {
    a: u32,
    b: u32,
}

impl Default for Adler32 {
    fn default() -> Self {
        Adler32::new()
    }
}

impl Adler32 {
    /// The checksum of no bytes (1).
    pub const fn new() -> Self {
        Adler32 { a: 1, b: 0 }
    }

    /// Adds `data` to the checksum.
    pub fn update(&mut self, data: &[u8]) {
        for block in data.chunks(NMAX) {
            for &byte in block {
                self.a += u32::from(byte);
                self.b += self.a;
            }
            self.a %= MOD_ADLER;
            self.b %= MOD_ADLER;
        }
    }

    /// The checksum so far.
    pub const fn value(&self) -> u32 {
        (self.b << 16) | self.a
    }

    /// The checksum of `data`.
    pub fn of(data: &[u8]) -> u32 {
        let mut sum = Adler32::new();
        sum.update(data);
        sum.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn known_values() {
        assert_eq!(Adler32::of(b""), 1);
        // The example of the Wikipedia article and zlib's test suite.
        assert_eq!(Adler32::of(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(Adler32::of(b"abc"), 0x024D_0127);
    }

    #[test]
    fn pieces_give_the_same_sum_as_the_whole() {
        let data: Vec<u8> = (0..100_000u32)
            .map(|i| (i * 7 + i / 255).to_le_bytes()[0])
            .collect();
        let whole = Adler32::of(&data);
        let mut pieces = Adler32::new();
        for piece in data.chunks(997) {
            pieces.update(piece);
        }
        assert_eq!(pieces.value(), whole);
        // All 0xff maximises the sums: the per-block reduction must hold.
        let ones = [0xffu8; 3 * NMAX + 17];
        let mut split = Adler32::new();
        split.update(&ones[..NMAX + 1]);
        split.update(&ones[NMAX + 1..]);
        assert_eq!(split.value(), Adler32::of(&ones));
    }
}
