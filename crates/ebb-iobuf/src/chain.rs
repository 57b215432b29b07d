//! [`IoChain`]: a sequence of [`IoBuf`] segments forming one byte stream.

use alloc::vec::Vec;

use bytes::{Bytes, BytesMut};

use crate::segments::{IntoSegments, Segments};
use crate::{Cursor, IoBuf, IoBufError, IoBufMut};

/// An ordered sequence of [`IoBuf`] segments that together form one logical
/// byte stream: received data as it arrived (one segment per receive
/// buffer), or a reply to transmit with scatter/gather (a header buffer in
/// front of payload views).
///
/// Empty segments are never stored, and the total length is kept, so
/// [`len`](IoChain::len) is O(1). Splitting or trimming in the middle of a
/// segment turns that segment into views of the same memory; no operation
/// except [`to_vec`](IoChain::to_vec), [`copy_to_slice`](IoChain::copy_to_slice)
/// and a multi-segment [`into_iobuf`](IoChain::into_iobuf) copies bytes.
///
/// Offsets and lengths past the end are errors ([`IoBufError::OutOfRange`])
/// and leave the chain unchanged. Equality compares contents, not how they
/// are split into segments.
#[derive(Clone, Default, Debug)]
pub struct IoChain {
    segs: Segments,
    len: usize,
}

impl IoChain {
    /// An empty chain (no allocation).
    #[must_use]
    pub const fn new() -> Self {
        Self {
            segs: Segments::new(),
            len: 0,
        }
    }

    /// Total number of bytes in all segments.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the chain holds no bytes (and so no segments).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of segments (none of them empty).
    #[must_use]
    pub fn segment_count(&self) -> usize {
        self.segs.len()
    }

    /// The segments, front to back.
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &IoBuf> + ExactSizeIterator + '_ {
        self.segs.iter()
    }

    /// Appends `buf` as the last segment (dropped if empty).
    pub fn push_back(&mut self, buf: IoBuf) {
        if !buf.is_empty() {
            self.len += buf.len();
            self.segs.push_back(buf);
        }
    }

    /// Makes room for `segments` more segments without aborting when
    /// memory runs out, so that a reply that grows with what a client asks
    /// for can be refused instead.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfMemory`] if the segment list cannot grow; the
    /// chain is unchanged.
    pub fn try_reserve(&mut self, segments: usize) -> Result<(), IoBufError> {
        self.segs
            .try_reserve(segments)
            .map_err(|_| IoBufError::OutOfMemory {
                requested: segments.saturating_mul(core::mem::size_of::<IoBuf>()),
            })
    }

    /// Prepends `buf` as the first segment (dropped if empty); this is how a
    /// header buffer goes in front of a payload.
    pub fn push_front(&mut self, buf: IoBuf) {
        if !buf.is_empty() {
            self.len += buf.len();
            self.segs.push_front(buf);
        }
    }

    /// Removes and returns the first segment.
    pub fn pop_front(&mut self) -> Option<IoBuf> {
        let buf = self.segs.pop_front()?;
        self.len -= buf.len();
        Some(buf)
    }

    /// Moves all of `other`'s segments to the end of `self`, leaving `other`
    /// empty.
    pub fn append(&mut self, other: &mut IoChain) {
        self.len += other.len;
        other.len = 0;
        self.segs.append(&mut other.segs);
    }

    /// Removes all segments.
    pub fn clear(&mut self) {
        self.segs.clear();
        self.len = 0;
    }

    /// Splits off and returns the first `at` bytes; `self` keeps the rest.
    /// A segment straddling `at` becomes two views of its memory.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if `at > len()`; `self` is unchanged.
    pub fn split_to(&mut self, at: usize) -> Result<IoChain, IoBufError> {
        self.check(at)?;
        let mut head = IoChain::new();
        let mut need = at;
        while need > 0 {
            let Some(front) = self.segs.front_mut() else {
                break;
            };
            if front.len() <= need {
                need -= front.len();
                if let Some(seg) = self.segs.pop_front() {
                    head.push_back(seg);
                }
            } else {
                head.push_back(IoBuf::from(front.bytes.split_to(need)));
                need = 0;
            }
        }
        self.len -= at;
        Ok(head)
    }

    /// Splits off and returns the bytes from `at` on; `self` keeps the first
    /// `at`. A segment straddling `at` becomes two views of its memory.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if `at > len()`; `self` is unchanged.
    pub fn split_off(&mut self, at: usize) -> Result<IoChain, IoBufError> {
        self.check(at)?;
        let mut tail = IoChain::new();
        let mut need = self.len - at;
        while need > 0 {
            let Some(back) = self.segs.back_mut() else {
                break;
            };
            if back.len() <= need {
                need -= back.len();
                if let Some(seg) = self.segs.pop_back() {
                    tail.push_front(seg);
                }
            } else {
                let keep = back.len() - need;
                tail.push_front(IoBuf::from(back.bytes.split_off(keep)));
                need = 0;
            }
        }
        self.len = at;
        Ok(tail)
    }

    /// Drops the first `n` bytes.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if `n > len()`; `self` is unchanged.
    pub fn trim_front(&mut self, n: usize) -> Result<(), IoBufError> {
        self.check(n)?;
        let mut need = n;
        while let Some(front) = self.segs.front_mut() {
            if front.len() <= need {
                need -= front.len();
                self.segs.pop_front();
            } else {
                bytes::Buf::advance(&mut front.bytes, need);
                break;
            }
        }
        self.len -= n;
        Ok(())
    }

    /// Drops the last `n` bytes.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if `n > len()`; `self` is unchanged.
    pub fn trim_back(&mut self, n: usize) -> Result<(), IoBufError> {
        self.check(n)?;
        let mut need = n;
        while let Some(back) = self.segs.back_mut() {
            if back.len() <= need {
                need -= back.len();
                self.segs.pop_back();
            } else {
                let keep = back.len() - need;
                back.bytes.truncate(keep);
                break;
            }
        }
        self.len -= n;
        Ok(())
    }

    /// Copies all bytes into a new `Vec` (for tests and slow paths).
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        self.extend_vec(&mut v);
        v
    }

    /// Copies all bytes into a new buffer of exactly their length, or
    /// fails without aborting when the allocator has no memory for it (a
    /// server copying a client's data answers "out of memory" instead).
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfMemory`] if the buffer cannot be allocated.
    pub fn try_to_iobuf(&self) -> Result<IoBuf, IoBufError> {
        let mut v = Vec::new();
        v.try_reserve_exact(self.len)
            .map_err(|_| IoBufError::OutOfMemory {
                requested: self.len,
            })?;
        self.extend_vec(&mut v);
        Ok(IoBuf::from_vec(v))
    }

    /// Appends every segment to `v`.
    fn extend_vec(&self, v: &mut Vec<u8>) {
        for seg in self.segs.iter() {
            v.extend_from_slice(seg);
        }
    }

    /// Copies the first `dst.len()` bytes into `dst`.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if `dst` is longer than the chain; `dst`
    /// is not written.
    pub fn copy_to_slice(&self, dst: &mut [u8]) -> Result<(), IoBufError> {
        self.check(dst.len())?;
        let mut dst = dst;
        for seg in self.segs.iter() {
            if dst.is_empty() {
                break;
            }
            let n = seg.len().min(dst.len());
            let (now, rest) = dst.split_at_mut(n);
            now.copy_from_slice(&seg[..n]);
            dst = rest;
        }
        Ok(())
    }

    /// Gathers all bytes into one segment, for a reader that keeps a
    /// growing request (a large value arriving in many receive buffers)
    /// without holding on to the buffers. The first segment's memory is
    /// extended in place when this chain alone owns it and it has room;
    /// otherwise the bytes move to a new buffer with room for as many again.
    /// A request coalesced every few segments while it grows to n bytes is
    /// so copied O(n) bytes in all, where copying it whole each time
    /// copied O(n² / segment size).
    ///
    /// If a new buffer is needed and the allocator has no memory for it,
    /// the chain is left as it was (the same bytes, only not gathered), so
    /// a server under memory pressure carries on instead of aborting.
    pub fn coalesce(&mut self) {
        // The error only says the chain stayed in segments.
        let _ = self.try_coalesce();
    }

    /// [`IoChain::coalesce`], saying whether there was memory.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfMemory`] if a new buffer was needed and could
    /// not be allocated; the chain is unchanged.
    pub fn try_coalesce(&mut self) -> Result<(), IoBufError> {
        if self.segs.len() <= 1 {
            return Ok(());
        }
        self.merge(self.len, self.len.saturating_mul(2)).map(drop)
    }

    /// Gathers all bytes into one segment with room for `capacity` bytes
    /// in all, for a reader that knows how long the request it is
    /// receiving will be (memcached's `set` line gives the value's
    /// length): later segments up to `capacity` then [`IoChain::coalesce`]
    /// in place, so that each byte is copied once, into a buffer allocated
    /// once at its final size. A first segment this chain alone owns, with
    /// that much room, is extended in place. Without memory for the buffer
    /// the chain stays in segments, as with [`IoChain::coalesce`].
    ///
    /// Returns the capacity of the one buffer now holding the chain (what
    /// its allocation holds, for a caller that keeps a view of it and
    /// charges it to a budget), or 0 if the chain stayed in segments or is
    /// empty.
    pub fn gather(&mut self, capacity: usize) -> usize {
        let capacity = capacity.max(self.len);
        // The error only says the chain stayed in segments.
        self.merge(capacity, capacity).unwrap_or(0)
    }

    /// Merges every segment into one: in the first segment's memory if this
    /// chain alone owns it and it has room for `fits` bytes, else into a
    /// new buffer with room for `room`. Returns the merged buffer's
    /// capacity (0 for an empty chain). Without memory for that buffer the
    /// chain is left as it was.
    fn merge(&mut self, fits: usize, room: usize) -> Result<usize, IoBufError> {
        let Some(first) = self.segs.pop_front() else {
            return Ok(0);
        };
        let mut merged = match first.into_bytes().try_into_mut() {
            Ok(owned) if owned.capacity() >= fits => owned,
            Ok(owned) => self.with_room(owned.freeze(), room)?,
            Err(shared) => self.with_room(shared, room)?,
        };
        for seg in IntoSegments::new(core::mem::take(&mut self.segs)) {
            merged.extend_from_slice(&seg);
        }
        let capacity = merged.capacity();
        self.segs.push_back(IoBuf::from(merged.freeze()));
        Ok(capacity)
    }

    /// A buffer holding `head` with capacity for `room` bytes, or `head`
    /// put back at the front of the chain if there is no memory.
    fn with_room(&mut self, head: Bytes, room: usize) -> Result<BytesMut, IoBufError> {
        let capacity = room.max(head.len());
        let mut buf = Vec::new();
        if buf.try_reserve_exact(capacity).is_err() {
            self.segs.push_front(IoBuf::from(head));
            return Err(IoBufError::OutOfMemory {
                requested: capacity,
            });
        }
        buf.extend_from_slice(&head);
        Ok(BytesMut::from(Bytes::from(buf)))
    }

    /// Whether the bytes are in at most one segment.
    #[must_use]
    pub fn is_contiguous(&self) -> bool {
        self.segs.len() <= 1
    }

    /// All bytes as one slice, if they are in at most one segment (an empty
    /// chain gives an empty slice).
    #[must_use]
    pub fn contiguous(&self) -> Option<&[u8]> {
        match self.segs.len() {
            0 => Some(&[]),
            1 => self.segs.front().map(IoBuf::as_slice),
            _ => None,
        }
    }

    /// All bytes as one [`IoBuf`]: the segment itself if there is at most
    /// one (no copy), otherwise a new buffer with the bytes copied.
    #[must_use]
    pub fn into_iobuf(mut self) -> IoBuf {
        match self.segs.len() {
            0 => IoBuf::new(),
            1 => self.segs.pop_front().unwrap_or_default(),
            _ => IoBuf::from_vec(self.to_vec()),
        }
    }

    /// One slice per segment, in order: the scatter/gather list for
    /// `writev`, `sendmsg` or a device's descriptor chain.
    #[must_use]
    pub fn io_slices(&self) -> Vec<&[u8]> {
        self.segs.iter().map(IoBuf::as_slice).collect()
    }

    /// The bytes, one at a time, across segments.
    pub fn iter_bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.segs.iter().flat_map(|seg| seg.iter().copied())
    }

    /// A cursor at the start of the chain.
    #[must_use]
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor::new(self)
    }

    /// The segment at `index`.
    pub(crate) fn segment(&self, index: usize) -> Option<&IoBuf> {
        self.segs.get(index)
    }

    /// The segments from `index` on, the first one starting at `offset`.
    pub(crate) fn chunks_from(&self, index: usize, offset: usize) -> impl Iterator<Item = &[u8]> {
        self.segs
            .iter()
            .skip(index)
            .enumerate()
            .map(move |(i, seg)| {
                let start = if i == 0 { offset } else { 0 };
                seg.get(start..).unwrap_or_default()
            })
    }

    fn check(&self, n: usize) -> Result<(), IoBufError> {
        if n > self.len {
            Err(IoBufError::OutOfRange {
                requested: n,
                available: self.len,
            })
        } else {
            Ok(())
        }
    }
}

/// Compares two sequences of chunks holding the same number of bytes.
fn chunks_eq<'a>(
    mut a: impl Iterator<Item = &'a [u8]>,
    mut b: impl Iterator<Item = &'a [u8]>,
) -> bool {
    let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
    loop {
        while x.is_empty() {
            match a.next() {
                Some(c) => x = c,
                None => return b.all(<[u8]>::is_empty) && y.is_empty(),
            }
        }
        while y.is_empty() {
            match b.next() {
                Some(c) => y = c,
                None => return false,
            }
        }
        let n = x.len().min(y.len());
        if x[..n] != y[..n] {
            return false;
        }
        x = &x[n..];
        y = &y[n..];
    }
}

impl PartialEq for IoChain {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && chunks_eq(
                self.segs.iter().map(IoBuf::as_slice),
                other.segs.iter().map(IoBuf::as_slice),
            )
    }
}

impl Eq for IoChain {}

impl PartialEq<[u8]> for IoChain {
    fn eq(&self, other: &[u8]) -> bool {
        self.len == other.len()
            && chunks_eq(
                self.segs.iter().map(IoBuf::as_slice),
                core::iter::once(other),
            )
    }
}

impl From<IoBuf> for IoChain {
    fn from(buf: IoBuf) -> Self {
        let mut chain = IoChain::new();
        chain.push_back(buf);
        chain
    }
}

impl From<IoBufMut> for IoChain {
    fn from(buf: IoBufMut) -> Self {
        Self::from(buf.freeze())
    }
}

impl FromIterator<IoBuf> for IoChain {
    fn from_iter<I: IntoIterator<Item = IoBuf>>(iter: I) -> Self {
        let mut chain = IoChain::new();
        chain.extend(iter);
        chain
    }
}

impl Extend<IoBuf> for IoChain {
    fn extend<I: IntoIterator<Item = IoBuf>>(&mut self, iter: I) {
        for buf in iter {
            self.push_back(buf);
        }
    }
}

impl IntoIterator for IoChain {
    type Item = IoBuf;
    type IntoIter = IntoSegments;

    /// The segments, front to back (for handing them to a device).
    fn into_iter(self) -> Self::IntoIter {
        IntoSegments::new(self.segs)
    }
}

impl<'a> IntoIterator for &'a IoChain {
    type Item = &'a IoBuf;
    type IntoIter = core::slice::Iter<'a, IoBuf>;

    fn into_iter(self) -> Self::IntoIter {
        self.segs.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::IoChain;
    use crate::{IoBuf, IoBufError, IoBufMut};
    use alloc::vec;
    use alloc::vec::Vec;

    #[test]
    fn coalesce_keeps_the_bytes_in_one_segment_and_reuses_its_room() {
        let mut c = IoChain::new();
        c.push_back(IoBuf::from_static(b"get "));
        c.push_back(IoBuf::from_vec(b"some".to_vec()));
        c.push_back(IoBuf::from_vec(b"key".to_vec()));
        c.coalesce();
        assert_eq!(c.segment_count(), 1);
        assert_eq!(c.to_vec(), b"get somekey");
        assert_eq!(c.len(), 11);
        // The new buffer has room for as many bytes again: the next
        // coalesce appends in place.
        let first = c.segments().next().unwrap().as_ptr();
        c.push_back(IoBuf::from_vec(b" more".to_vec()));
        c.coalesce();
        assert_eq!(c.to_vec(), b"get somekey more");
        assert_eq!(c.segments().next().unwrap().as_ptr(), first);
        // After the front is consumed, the rest still coalesces.
        c.trim_front(4).unwrap();
        c.push_back(IoBuf::from_static(b"!"));
        c.coalesce();
        assert_eq!(c.to_vec(), b"somekey more!");
        assert_eq!(c.segment_count(), 1);
    }

    #[test]
    fn try_reserve_makes_room_for_segments_and_refuses_the_impossible() {
        let mut c = chain(&[b"ab"]);
        c.try_reserve(3).unwrap();
        assert!(matches!(
            c.try_reserve(usize::MAX),
            Err(IoBufError::OutOfMemory { .. })
        ));
        assert_eq!(c.to_vec(), b"ab");
    }

    #[test]
    fn try_to_iobuf_copies_every_segment_into_one_buffer() {
        let c = chain(&[b"ab", b"cde", b"f"]);
        let copy = c.try_to_iobuf().unwrap();
        assert_eq!(copy.as_slice(), b"abcdef");
        assert_eq!(c.segment_count(), 3);
    }

    #[test]
    fn gather_allocates_once_at_the_size_asked_and_fills_in_place() {
        let mut c = IoChain::new();
        c.push_back(IoBuf::from_static(b"set k 0 0 6\r\n"));
        c.push_back(IoBuf::from_static(b"ab"));
        assert_eq!(c.gather(21), 21);
        assert_eq!(c.segment_count(), 1);
        let first = c.segments().next().unwrap().as_ptr();
        for part in [&b"cd"[..], b"ef", b"\r\n"] {
            c.push_back(IoBuf::from_vec(part.to_vec()));
            c.coalesce();
            assert_eq!(c.segments().next().unwrap().as_ptr(), first);
        }
        assert_eq!(c.to_vec(), b"set k 0 0 6\r\nabcdef\r\n");
        // Gathering again at the size it has room for copies nothing.
        assert_eq!(c.gather(21), 21);
        assert_eq!(c.segments().next().unwrap().as_ptr(), first);
    }

    #[test]
    fn coalesce_does_not_write_into_a_shared_first_segment() {
        let shared = IoBuf::from_vec(b"abc".to_vec());
        let mut c = IoChain::new();
        c.push_back(shared.clone());
        c.push_back(IoBuf::from_static(b"def"));
        c.coalesce();
        assert_eq!(c.to_vec(), b"abcdef");
        assert_eq!(shared.as_slice(), b"abc");
    }

    fn chain(parts: &[&'static [u8]]) -> IoChain {
        parts.iter().map(|p| IoBuf::from_static(p)).collect()
    }

    #[test]
    fn empty_segments_are_not_stored() {
        let mut c = chain(&[b"", b"ab", b"", b"c"]);
        c.push_front(IoBuf::new());
        c.push_back(IoBuf::new());
        assert_eq!(c.segment_count(), 2);
        assert_eq!(c.len(), 3);
        assert!(c.segments().all(|s| !s.is_empty()));
    }

    #[test]
    fn split_in_the_middle_of_a_segment() {
        let base = IoBuf::copy_from_slice(b"abcdefgh");
        let p = base.as_ptr() as usize;
        let mut c = IoChain::from(base.slice(..3).unwrap());
        c.push_back(base.slice(3..).unwrap());
        let head = c.split_to(5).unwrap();
        assert_eq!(head.to_vec(), b"abcde");
        assert_eq!(c.to_vec(), b"fgh");
        assert_eq!(c.segments().next().unwrap().as_ptr() as usize, p + 5);
        let mut c = chain(&[b"abc", b"def", b"gh"]);
        let tail = c.split_off(4).unwrap();
        assert_eq!(c.to_vec(), b"abcd");
        assert_eq!(tail.to_vec(), b"efgh");
        assert_eq!(tail.segment_count(), 2);
        assert_eq!(c.segment_count(), 2);
    }

    #[test]
    fn trims_and_errors() {
        let mut c = chain(&[b"abc", b"def", b"gh"]);
        let e = IoBufError::OutOfRange {
            requested: 9,
            available: 8,
        };
        assert_eq!(c.split_to(9), Err(e));
        assert_eq!(c.split_off(9), Err(e));
        assert_eq!(c.trim_front(9), Err(e));
        assert_eq!(c.trim_back(9), Err(e));
        assert_eq!(c.copy_to_slice(&mut [0; 9]), Err(e));
        assert_eq!(c.to_vec(), b"abcdefgh");
        c.trim_front(4).unwrap();
        c.trim_back(3).unwrap();
        assert_eq!(c.to_vec(), b"e");
        c.trim_back(1).unwrap();
        assert!(c.is_empty());
        assert_eq!(c.segment_count(), 0);
    }

    #[test]
    fn append_prepend_and_equality() {
        let mut a = chain(&[b"ab", b"cd"]);
        let mut b = chain(&[b"e", b"f"]);
        a.append(&mut b);
        assert!(b.is_empty());
        a.push_front(IoBuf::from_static(b"hdr:"));
        assert_eq!(a, chain(&[b"hdr:abcdef"]));
        assert_eq!(a, *b"hdr:abcdef".as_slice());
        assert_ne!(a, chain(&[b"hdr:abcdeg"]));
        assert_ne!(a, chain(&[b"hdr:abcde"]));
        assert_eq!(IoChain::new(), *b"".as_slice());
        let mut buf = [0u8; 6];
        a.copy_to_slice(&mut buf).unwrap();
        assert_eq!(&buf, b"hdr:ab");
        assert_eq!(a.io_slices(), vec![&b"hdr:"[..], b"ab", b"cd", b"e", b"f"]);
        assert_eq!(a.iter_bytes().collect::<Vec<_>>(), b"hdr:abcdef");
        assert_eq!(a.pop_front().unwrap().as_slice(), b"hdr:");
        assert_eq!(a.len(), 6);
    }

    #[test]
    fn contiguity() {
        let one = IoChain::from(IoBuf::from_static(b"xy"));
        assert!(one.is_contiguous());
        assert_eq!(one.contiguous(), Some(&b"xy"[..]));
        let p = one.segments().next().unwrap().as_ptr();
        assert_eq!(one.into_iobuf().as_ptr(), p);
        let two = chain(&[b"x", b"y"]);
        assert!(!two.is_contiguous());
        assert_eq!(two.contiguous(), None);
        assert_eq!(two.into_iobuf().as_slice(), b"xy");
        assert_eq!(IoChain::new().contiguous(), Some(&[][..]));
        let mut m = IoBufMut::with_headroom(2, 2);
        m.extend_from_slice(b"zz");
        assert_eq!(IoChain::from(m), *b"zz".as_slice());
    }
}
