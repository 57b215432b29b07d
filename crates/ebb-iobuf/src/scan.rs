//! Finding one byte value in a short slice (a request line), eight bytes
//! at a time.
//!
//! The `memchr` crate's portable code is what the native build gets (its
//! target has no SIMD registers), and on lines of a few dozen bytes its
//! per-call setup dominates: `./ebb bench insns` counted 409 guest
//! instructions per memcached request in it, for the line's end, one NUL
//! scan and one call per space. This walks the slice with no setup,
//! testing a word of eight bytes with a few arithmetic instructions.
//! Where the target has SIMD (hosted), [`crate::Cursor::find`] keeps
//! `memchr`, which is faster on long slices.

/// The low seven bits of every byte.
const LOW_SEVEN: u64 = 0x7f7f_7f7f_7f7f_7f7f;
/// The high bit of every byte.
const HIGH: u64 = 0x8080_8080_8080_8080;
/// Every byte 1: times a byte value, that value in every byte.
const ONES: u64 = 0x0101_0101_0101_0101;

/// The high bit of each byte of `word` that is zero. Exact for every byte
/// (adding to the low seven bits cannot carry into the next byte), unlike
/// the usual subtract-and-mask test whose borrow marks bytes after a zero.
fn zero_bytes(word: u64) -> u64 {
    !(((word & LOW_SEVEN) + LOW_SEVEN) | word) & HIGH
}

/// The offsets of `byte` in `line`, in order.
pub fn positions(byte: u8, line: &[u8]) -> Positions<'_> {
    Positions {
        line,
        fill: u64::from(byte) * ONES,
        byte,
        next: 0,
        word_start: 0,
        found: 0,
    }
}

/// The first offset of `byte` in `line`.
pub fn find(byte: u8, line: &[u8]) -> Option<usize> {
    positions(byte, line).next()
}

/// See [`positions`].
pub struct Positions<'a> {
    line: &'a [u8],
    /// `byte` in every byte of a word.
    fill: u64,
    byte: u8,
    /// The first offset not yet looked at.
    next: usize,
    /// Where the word `found` marks starts.
    word_start: usize,
    /// The high bits of the matches in that word not yet returned.
    found: u64,
}

impl Iterator for Positions<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        loop {
            if self.found != 0 {
                let in_word = self.found.trailing_zeros() as usize / 8;
                self.found &= self.found - 1;
                return Some(self.word_start + in_word);
            }
            let Some(word) = self
                .line
                .get(self.next..self.next + 8)
                .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
            else {
                break;
            };
            self.word_start = self.next;
            self.next += 8;
            self.found = zero_bytes(u64::from_le_bytes(word) ^ self.fill);
        }
        // The last few bytes, one at a time.
        while let Some(&b) = self.line.get(self.next) {
            self.next += 1;
            if b == self.byte {
                return Some(self.next - 1);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use proptest::prelude::*;

    use super::*;

    fn naive(byte: u8, line: &[u8]) -> Vec<usize> {
        (0..line.len()).filter(|&i| line[i] == byte).collect()
    }

    #[test]
    fn finds_spaces_and_nuls_in_words_and_in_the_tail() {
        let line = b"set key 0 0 123\0 noreply";
        assert_eq!(positions(b' ', line).collect::<Vec<_>>(), naive(b' ', line));
        assert_eq!(find(0, line), Some(15));
        assert_eq!(find(b'x', line), None);
        assert_eq!(find(b' ', b""), None);
        assert_eq!(find(0x80, b"\x00\x80\x7f"), Some(1));
    }

    #[test]
    fn bytes_after_a_match_are_not_matched_by_its_borrow() {
        // 0x00 then 0x01: the subtract-and-mask test would mark both.
        let line = [0u8, 1, 0, 1, 1, 1, 1, 0, 1];
        assert_eq!(positions(0, &line).collect::<Vec<_>>(), [0, 2, 7]);
    }

    proptest! {
        // Few cases under Miri (the `unsafe` step runs this crate's tests
        // there, a thousand times slower); the word loop has no unsafe.
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 256 },
            ..ProptestConfig::default()
        })]

        #[test]
        fn positions_are_exactly_the_bytes_equal_to_the_one_sought(
            byte in prop_oneof![Just(b' '), Just(0u8), any::<u8>()],
            line in proptest::collection::vec(
                prop_oneof![Just(b' '), Just(0u8), Just(1u8), Just(0x80u8), any::<u8>()],
                0..80,
            ),
        ) {
            prop_assert_eq!(positions(byte, &line).collect::<Vec<_>>(), naive(byte, &line));
            prop_assert_eq!(find(byte, &line), naive(byte, &line).first().copied());
        }
    }
}
