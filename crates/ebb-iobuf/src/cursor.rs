//! [`Cursor`]: typed reads from an [`IoChain`] across segment boundaries.

use alloc::vec;

use crate::{IoBuf, IoBufError, IoChain};

/// A fixed-size header that a [`Cursor`] can read.
///
/// `from_bytes` only decodes fields; checking what they mean (version,
/// lengths, checksums) is the caller's next step.
pub trait Header: Sized {
    /// Size of the header on the wire, in bytes.
    const LEN: usize;

    /// Decodes the header from exactly [`LEN`](Header::LEN) bytes.
    fn from_bytes(bytes: &[u8]) -> Self;
}

/// Headers up to this size that straddle segments are assembled on the
/// stack; larger ones in a temporary heap buffer.
const STACK_HEADER: usize = 128;

/// A read position in an [`IoChain`].
///
/// Reads work across segment boundaries; a read that needs more bytes than
/// remain returns [`IoBufError::Truncated`] and leaves the cursor where it
/// was, so a parser can wait for more data and try again. The cursor borrows
/// the chain; to consume what was parsed, drop the cursor and call
/// `chain.trim_front(cursor.position())` (or `split_to` to keep it).
/// Clone the cursor to look ahead and come back.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    chain: &'a IoChain,
    /// Offset from the start of the chain.
    pos: usize,
    /// Segment holding the byte at `pos` (the segment count at the end).
    seg: usize,
    /// Offset of `pos` in that segment (0 at the end).
    off: usize,
}

macro_rules! int_reads {
    ($($ty:ident: $read:ident, $peek:ident, $from:ident, $order:literal;)*) => {$(
        #[doc = concat!("Reads a ", $order, " `", stringify!($ty), "` and advances past it.")]
        ///
        /// # Errors
        ///
        /// [`IoBufError::Truncated`] if too few bytes remain; the cursor does
        /// not move.
        pub fn $read(&mut self) -> Result<$ty, IoBufError> {
            self.read_array().map($ty::$from)
        }

        #[doc = concat!("Reads a ", $order, " `", stringify!($ty), "` without advancing.")]
        ///
        /// # Errors
        ///
        /// [`IoBufError::Truncated`] if too few bytes remain.
        pub fn $peek(&self) -> Result<$ty, IoBufError> {
            self.peek_array().map($ty::$from)
        }
    )*};
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `chain`.
    #[must_use]
    pub fn new(chain: &'a IoChain) -> Self {
        Self {
            chain,
            pos: 0,
            seg: 0,
            off: 0,
        }
    }

    /// The chain being read.
    #[must_use]
    pub fn chain(&self) -> &'a IoChain {
        self.chain
    }

    /// Bytes read or skipped so far (offset from the start of the chain).
    #[must_use]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left after the cursor.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.chain.len() - self.pos
    }

    /// The rest of the current segment: the bytes after the cursor that can
    /// be borrowed as one slice (empty only at the end).
    #[must_use]
    pub fn chunk(&self) -> &'a [u8] {
        self.chain
            .segment(self.seg)
            .and_then(|seg| seg.get(self.off..))
            .unwrap_or_default()
    }

    /// Advances by `n` bytes.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] if fewer than `n` bytes remain; the cursor
    /// does not move.
    pub fn skip(&mut self, n: usize) -> Result<(), IoBufError> {
        self.check(n)?;
        self.advance(n);
        Ok(())
    }

    /// Copies the next `dst.len()` bytes into `dst` without advancing.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] if too few bytes remain; `dst` is not
    /// written.
    pub fn peek_into(&self, dst: &mut [u8]) -> Result<(), IoBufError> {
        self.check(dst.len())?;
        let mut dst = dst;
        for chunk in self.chain.chunks_from(self.seg, self.off) {
            if dst.is_empty() {
                break;
            }
            let n = chunk.len().min(dst.len());
            let (now, rest) = dst.split_at_mut(n);
            now.copy_from_slice(&chunk[..n]);
            dst = rest;
        }
        Ok(())
    }

    /// Copies the next `dst.len()` bytes into `dst` and advances past them.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] if too few bytes remain; `dst` is not
    /// written and the cursor does not move.
    pub fn read_into(&mut self, dst: &mut [u8]) -> Result<(), IoBufError> {
        self.peek_into(dst)?;
        self.advance(dst.len());
        Ok(())
    }

    /// The next `N` bytes as an array, without advancing.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] if fewer than `N` bytes remain.
    pub fn peek_array<const N: usize>(&self) -> Result<[u8; N], IoBufError> {
        if let Some(Ok(array)) = self.chunk().get(..N).map(<[u8; N]>::try_from) {
            return Ok(array);
        }
        let mut array = [0; N];
        self.peek_into(&mut array)?;
        Ok(array)
    }

    /// Reads the next `N` bytes as an array.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] if fewer than `N` bytes remain; the cursor
    /// does not move.
    pub fn read_array<const N: usize>(&mut self) -> Result<[u8; N], IoBufError> {
        let array = self.peek_array()?;
        self.advance(N);
        Ok(array)
    }

    /// Reads one byte.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] at the end; the cursor does not move.
    pub fn read_u8(&mut self) -> Result<u8, IoBufError> {
        self.read_array().map(|[b]: [u8; 1]| b)
    }

    /// The next byte, without advancing.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] at the end.
    pub fn peek_u8(&self) -> Result<u8, IoBufError> {
        self.peek_array().map(|[b]: [u8; 1]| b)
    }

    int_reads! {
        u16: read_u16_be, peek_u16_be, from_be_bytes, "big-endian (network order)";
        u32: read_u32_be, peek_u32_be, from_be_bytes, "big-endian (network order)";
        u64: read_u64_be, peek_u64_be, from_be_bytes, "big-endian (network order)";
        u16: read_u16_le, peek_u16_le, from_le_bytes, "little-endian";
        u32: read_u32_le, peek_u32_le, from_le_bytes, "little-endian";
        u64: read_u64_le, peek_u64_le, from_le_bytes, "little-endian";
    }

    /// Decodes a `H` from the next [`H::LEN`](Header::LEN) bytes without
    /// advancing. When they lie in one segment they are passed to
    /// [`Header::from_bytes`] in place; otherwise they are assembled first.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] if too few bytes remain.
    pub fn peek_header<H: Header>(&self) -> Result<H, IoBufError> {
        if let Some(bytes) = self.chunk().get(..H::LEN) {
            return Ok(H::from_bytes(bytes));
        }
        self.check(H::LEN)?;
        if H::LEN <= STACK_HEADER {
            let mut stack = [0; STACK_HEADER];
            let bytes = &mut stack[..H::LEN];
            self.peek_into(bytes)?;
            Ok(H::from_bytes(bytes))
        } else {
            let mut heap = vec![0; H::LEN];
            self.peek_into(&mut heap)?;
            Ok(H::from_bytes(&heap))
        }
    }

    /// Decodes a `H` from the next [`H::LEN`](Header::LEN) bytes and
    /// advances past them.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] if too few bytes remain; the cursor does
    /// not move.
    pub fn read_header<H: Header>(&mut self) -> Result<H, IoBufError> {
        let header = self.peek_header()?;
        self.advance(H::LEN);
        Ok(header)
    }

    /// The next `n` bytes as a chain of views of the same segments (no
    /// copy), advancing past them.
    ///
    /// # Errors
    ///
    /// [`IoBufError::Truncated`] if fewer than `n` bytes remain; the cursor
    /// does not move.
    pub fn read_chain(&mut self, n: usize) -> Result<IoChain, IoBufError> {
        self.check(n)?;
        let mut out = IoChain::new();
        let mut need = n;
        let mut index = self.seg;
        let mut offset = self.off;
        while need > 0 {
            let Some(seg) = self.chain.segment(index) else {
                break;
            };
            let take = (seg.len() - offset).min(need);
            out.push_back(IoBuf::from(seg.bytes.slice(offset..offset + take)));
            need -= take;
            index += 1;
            offset = 0;
        }
        self.advance(n);
        Ok(out)
    }

    /// Everything after the cursor, as a chain of views (no copy), without
    /// advancing.
    #[must_use]
    pub fn rest(&self) -> IoChain {
        self.clone()
            .read_chain(self.remaining())
            .unwrap_or_default()
    }

    /// Offset from the cursor of the first occurrence of `needle` after it,
    /// found across segment boundaries (`Some(0)` for an empty needle).
    #[must_use]
    pub fn find(&self, needle: &[u8]) -> Option<usize> {
        let Some((&first, rest)) = needle.split_first() else {
            return Some(0);
        };
        let remaining = self.remaining();
        if needle.len() > remaining {
            return None;
        }
        // Offset from the cursor of the first byte of the current chunk.
        let mut base = 0;
        for (i, chunk) in self.chain.chunks_from(self.seg, self.off).enumerate() {
            let mut from = 0;
            // A word at a time (`./ebb bench insns` counted a byte at a
            // time as a tenth of a memcached request).
            while let Some(hit) = find_byte(first, &chunk[from..]) {
                let at = from + hit;
                let found = base + at;
                if found + needle.len() > remaining {
                    return None;
                }
                // Compare the rest of the needle with the bytes after the hit,
                // which may continue in the following segments.
                let (index, offset) = if i == 0 {
                    (self.seg, self.off + at + 1)
                } else {
                    (self.seg + i, at + 1)
                };
                let after = self
                    .chain
                    .chunks_from(index, offset)
                    .flat_map(|c| c.iter().copied());
                if after.take(rest.len()).eq(rest.iter().copied()) {
                    return Some(found);
                }
                from = at + 1;
            }
            base += chunk.len();
        }
        None
    }

    /// If `needle` occurs after the cursor, returns the bytes before it as
    /// a chain of views (no copy) and advances past the needle; otherwise
    /// returns `None` and does not move (wait for more data).
    ///
    /// For a text protocol: `cursor.take_until(b"\r\n")` gives the next line
    /// without its terminator.
    pub fn take_until(&mut self, needle: &[u8]) -> Option<IoChain> {
        let at = self.find(needle)?;
        let before = self.read_chain(at).ok()?;
        self.advance(needle.len());
        Some(before)
    }

    fn check(&self, needed: usize) -> Result<(), IoBufError> {
        let remaining = self.remaining();
        if needed > remaining {
            Err(IoBufError::Truncated { needed, remaining })
        } else {
            Ok(())
        }
    }

    /// Moves forward by `n <= remaining()` bytes.
    fn advance(&mut self, n: usize) {
        self.pos += n;
        let mut n = n;
        while n > 0 {
            let Some(seg) = self.chain.segment(self.seg) else {
                break;
            };
            let left = seg.len() - self.off;
            if n < left {
                self.off += n;
                return;
            }
            n -= left;
            self.seg += 1;
            self.off = 0;
        }
    }
}

/// The first `byte` in `hay`: `memchr`'s SIMD code where the target has
/// SIMD registers (hosted), [`crate::scan`]'s word loop where it has not
/// (native), on which `memchr`'s portable code costs more per call.
fn find_byte(byte: u8, hay: &[u8]) -> Option<usize> {
    #[cfg(target_feature = "sse2")]
    {
        memchr::memchr(byte, hay)
    }
    #[cfg(not(target_feature = "sse2"))]
    {
        crate::scan::find(byte, hay)
    }
}

#[cfg(test)]
mod tests {
    use super::Header;
    use crate::{IoBuf, IoBufError, IoChain};

    fn chain(parts: &[&'static [u8]]) -> IoChain {
        parts.iter().map(|p| IoBuf::from_static(p)).collect()
    }

    #[derive(Debug, PartialEq)]
    struct Udp {
        src: u16,
        dst: u16,
        len: u16,
        sum: u16,
    }

    impl Header for Udp {
        const LEN: usize = 8;
        fn from_bytes(b: &[u8]) -> Self {
            let f = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
            Udp {
                src: f(0),
                dst: f(2),
                len: f(4),
                sum: f(6),
            }
        }
    }

    #[test]
    fn integers_across_boundaries() {
        let c = chain(&[b"\x01\x02", b"\x03", b"\x04\x05\x06\x07\x08\x09"]);
        let mut cur = c.cursor();
        assert_eq!(cur.peek_u8(), Ok(1));
        assert_eq!(cur.read_u32_be(), Ok(0x0102_0304));
        assert_eq!(cur.position(), 4);
        assert_eq!(cur.read_u16_le(), Ok(0x0605));
        assert_eq!(
            cur.read_u64_be(),
            Err(IoBufError::Truncated {
                needed: 8,
                remaining: 3
            })
        );
        assert_eq!(cur.position(), 6);
        assert_eq!(cur.read_array::<3>(), Ok([7, 8, 9]));
        assert_eq!(cur.remaining(), 0);
        assert!(cur.chunk().is_empty());
        assert_eq!(
            cur.read_u8(),
            Err(IoBufError::Truncated {
                needed: 1,
                remaining: 0
            })
        );
    }

    #[test]
    fn headers_across_boundaries() {
        let c = chain(&[b"\x00\x35\x12", b"\x34\x00\x08\xab\xcd!"]);
        let want = Udp {
            src: 53,
            dst: 0x1234,
            len: 8,
            sum: 0xabcd,
        };
        let mut cur = c.cursor();
        assert_eq!(cur.peek_header::<Udp>(), Ok(want));
        cur.skip(1).unwrap();
        cur.skip(1).unwrap();
        assert_eq!(
            cur.read_header::<Udp>(),
            Err(IoBufError::Truncated {
                needed: 8,
                remaining: 7
            })
        );
        assert_eq!(cur.position(), 2);
        assert_eq!(
            cur.skip(8),
            Err(IoBufError::Truncated {
                needed: 8,
                remaining: 7
            })
        );
    }

    #[test]
    fn find_and_take_lines() {
        let c = chain(&[b"get a\r", b"\nset b 0 0 1\r\nx\r", b"\n"]);
        let mut cur = c.cursor();
        assert_eq!(cur.find(b"\r\n"), Some(5));
        assert_eq!(cur.take_until(b"\r\n").unwrap().to_vec(), b"get a");
        assert_eq!(cur.take_until(b"\r\n").unwrap().to_vec(), b"set b 0 0 1");
        let data = cur.read_chain(1).unwrap();
        assert_eq!(data.to_vec(), b"x");
        assert_eq!(cur.find(b"\r\n"), Some(0));
        assert_eq!(cur.find(b"\r\n\r"), None);
        assert_eq!(cur.take_until(b"\r\n").unwrap().len(), 0);
        assert_eq!(cur.remaining(), 0);
        assert_eq!(cur.take_until(b"\r\n"), None);
        assert_eq!(cur.find(b""), Some(0));
    }

    #[test]
    fn read_chain_is_views() {
        let base = IoBuf::copy_from_slice(b"0123456789");
        let p = base.as_ptr() as usize;
        let c: IoChain = [base.slice(..4).unwrap(), base.slice(4..).unwrap()]
            .into_iter()
            .collect();
        let mut cur = c.cursor();
        cur.skip(2).unwrap();
        let mid = cur.read_chain(5).unwrap();
        assert_eq!(mid.segment_count(), 2);
        let ptrs: alloc::vec::Vec<usize> = mid.segments().map(|s| s.as_ptr() as usize).collect();
        assert_eq!(ptrs, [p + 2, p + 4]);
        assert_eq!(cur.rest().to_vec(), b"789");
        assert_eq!(cur.position(), 7);
    }
}
