//! [`IoBufMut`]: a uniquely owned, writable buffer with headroom.

use alloc::vec::Vec;
use core::ops::{Deref, DerefMut};

use bytes::Bytes;

use crate::{IoBuf, IoBufError};

/// A uniquely owned, writable buffer with headroom in front of its data.
///
/// The headroom lets protocol layers prepend their headers in place
/// ([`prepend`](IoBufMut::prepend), [`prepend_zeroed`](IoBufMut::prepend_zeroed))
/// instead of copying the payload behind a new header. Appending past the
/// capacity reallocates, like a `Vec` (the buffer is still private then, so
/// no view sees the move). [`freeze`](IoBufMut::freeze) turns the buffer into
/// an [`IoBuf`] without copying.
///
/// Layout: `[ headroom | data | spare capacity ]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct IoBufMut {
    /// Headroom followed by the data; `buf[head..]` is the data.
    buf: Vec<u8>,
    head: usize,
}

impl IoBufMut {
    /// An empty buffer without headroom (no allocation).
    #[must_use]
    pub const fn new() -> Self {
        Self {
            buf: Vec::new(),
            head: 0,
        }
    }

    /// An empty buffer without headroom that can hold `capacity` bytes
    /// before reallocating.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_headroom(0, capacity)
    }

    /// An empty buffer with `headroom` bytes reserved in front for
    /// prepending, and room for `capacity` bytes of data.
    #[must_use]
    pub fn with_headroom(headroom: usize, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(headroom.saturating_add(capacity));
        buf.resize(headroom, 0);
        Self {
            buf,
            head: headroom,
        }
    }

    /// Number of data bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.buf.len() - self.head
    }

    /// Whether the buffer holds no data.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes that can still be prepended without copying.
    #[must_use]
    pub fn headroom(&self) -> usize {
        self.head
    }

    /// Data bytes the buffer can hold before appending reallocates.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.buf.capacity() - self.head
    }

    /// The data.
    #[must_use]
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[self.head..]
    }

    /// The data, writable.
    #[must_use]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.head..]
    }

    /// Writes `data` into the headroom, in front of the current data.
    ///
    /// # Errors
    ///
    /// [`IoBufError::NoHeadroom`] if `data` is longer than
    /// [`headroom`](IoBufMut::headroom); the buffer is unchanged.
    pub fn prepend(&mut self, data: &[u8]) -> Result<(), IoBufError> {
        self.prepend_zeroed(data.len())?.copy_from_slice(data);
        Ok(())
    }

    /// Grows the data by `n` zero bytes at the front, taken from the
    /// headroom, and returns them for the caller to fill in (for example
    /// through a packet view's setters).
    ///
    /// # Errors
    ///
    /// [`IoBufError::NoHeadroom`] if `n` exceeds the headroom; the buffer is
    /// unchanged.
    pub fn prepend_zeroed(&mut self, n: usize) -> Result<&mut [u8], IoBufError> {
        if n > self.head {
            return Err(IoBufError::NoHeadroom {
                needed: n,
                headroom: self.head,
            });
        }
        let start = self.head - n;
        let front = &mut self.buf[start..self.head];
        front.fill(0);
        self.head = start;
        Ok(front)
    }

    /// Appends `data`.
    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Appends `n` zero bytes and returns them for the caller to fill in.
    pub fn extend_zeroed(&mut self, n: usize) -> &mut [u8] {
        let old = self.buf.len();
        self.buf.resize(old.saturating_add(n), 0);
        &mut self.buf[old..]
    }

    /// Sets the data length to `len`, truncating or appending copies of
    /// `value`.
    pub fn resize(&mut self, len: usize, value: u8) {
        self.buf.resize(self.head.saturating_add(len), value);
    }

    /// Appends one byte.
    pub fn put_u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// Appends a big-endian (network order) `u16`.
    pub fn put_u16_be(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a big-endian (network order) `u32`.
    pub fn put_u32_be(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a big-endian (network order) `u64`.
    pub fn put_u64_be(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a little-endian `u16`.
    pub fn put_u16_le(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a little-endian `u32`.
    pub fn put_u32_le(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a little-endian `u64`.
    pub fn put_u64_le(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }

    /// Turns the buffer into an immutable [`IoBuf`] of its data, without
    /// copying. The headroom stays allocated until the last view is dropped.
    #[must_use]
    pub fn freeze(self) -> IoBuf {
        let head = self.head;
        IoBuf::from(Bytes::from(self.buf).slice(head..))
    }
}

impl Deref for IoBufMut {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for IoBufMut {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl AsRef<[u8]> for IoBufMut {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsMut<[u8]> for IoBufMut {
    fn as_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl core::fmt::Debug for IoBufMut {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IoBufMut")
            .field("headroom", &self.head)
            .field("data", &self.as_slice())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::IoBufMut;
    use crate::IoBufError;

    #[test]
    fn prepend_uses_headroom_in_place() {
        let mut b = IoBufMut::with_headroom(8, 16);
        assert_eq!(b.headroom(), 8);
        assert!(b.capacity() >= 16);
        b.extend_from_slice(b"payload");
        let payload_ptr = b.as_ptr();
        b.prepend(b"tcp").unwrap();
        b.prepend(b"ip").unwrap();
        assert_eq!(b.headroom(), 3);
        assert_eq!(&*b, b"iptcppayload");
        assert_eq!(b.as_ptr().wrapping_add(5), payload_ptr);
        assert_eq!(
            b.prepend(b"ether"),
            Err(IoBufError::NoHeadroom {
                needed: 5,
                headroom: 3
            })
        );
        assert_eq!(&*b, b"iptcppayload");
        b.prepend_zeroed(3).unwrap().copy_from_slice(b"eth");
        assert_eq!(b.headroom(), 0);
        assert_eq!(&*b, b"ethiptcppayload");
    }

    #[test]
    fn integers_and_resize() {
        let mut b = IoBufMut::with_capacity(32);
        b.put_u8(1);
        b.put_u16_be(0x0203);
        b.put_u32_be(0x0405_0607);
        b.put_u64_be(0x0809_0a0b_0c0d_0e0f);
        b.put_u16_le(0x0203);
        b.put_u32_le(0x0405_0607);
        b.put_u64_le(0x0809_0a0b_0c0d_0e0f);
        assert_eq!(
            &b[..15],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
        );
        assert_eq!(&b[15..17], &[3, 2]);
        assert_eq!(&b[17..21], &[7, 6, 5, 4]);
        assert_eq!(&b[21..], &[15, 14, 13, 12, 11, 10, 9, 8]);
        b.resize(3, 0);
        assert_eq!(&*b, &[1, 2, 3]);
        b.resize(5, 9);
        assert_eq!(&*b, &[1, 2, 3, 9, 9]);
        b.as_mut_slice()[0] = 42;
        b.extend_zeroed(2)[1] = 7;
        assert_eq!(&*b, &[42, 2, 3, 9, 9, 0, 7]);
    }

    #[test]
    fn freeze_does_not_copy() {
        let mut b = IoBufMut::with_headroom(4, 8);
        b.extend_from_slice(b"data");
        b.prepend(b"hd").unwrap();
        let p = b.as_ptr();
        let frozen = b.freeze();
        assert_eq!(frozen.as_ptr(), p);
        assert_eq!(&*frozen, b"hddata");
    }
}
