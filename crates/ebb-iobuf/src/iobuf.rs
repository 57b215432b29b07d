//! [`IoBuf`]: an immutable, reference-counted view of bytes.

use alloc::vec::Vec;
use core::borrow::Borrow;
use core::ops::{Bound, Deref, RangeBounds};

use bytes::Bytes;

use crate::{IoBufError, IoBufMut};

/// An immutable, cheap-to-clone view of a reference-counted memory region.
///
/// Cloning, [`slice`](IoBuf::slice), [`split_to`](IoBuf::split_to),
/// [`split_off`](IoBuf::split_off) and the trims make or change views of the
/// same memory; none of them copies bytes. The memory is freed (or handed
/// back to its owner, see [`from_owner`](IoBuf::from_owner)) when the last
/// view of it is dropped.
///
/// A thin wrapper over [`bytes::Bytes`]; `From<Bytes>`
/// and [`into_bytes`](IoBuf::into_bytes) convert both ways for free.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IoBuf {
    pub(crate) bytes: Bytes,
}

impl IoBuf {
    /// An empty buffer (no allocation).
    #[must_use]
    pub const fn new() -> Self {
        Self {
            bytes: Bytes::new(),
        }
    }

    /// A view of static memory: no allocation, no reference count.
    #[must_use]
    pub const fn from_static(data: &'static [u8]) -> Self {
        Self {
            bytes: Bytes::from_static(data),
        }
    }

    /// Takes ownership of `vec`'s allocation without copying.
    #[must_use]
    pub fn from_vec(vec: Vec<u8>) -> Self {
        Self {
            bytes: Bytes::from(vec),
        }
    }

    /// Copies `data` into a new allocation (the one constructor that copies).
    #[must_use]
    pub fn copy_from_slice(data: &[u8]) -> Self {
        Self {
            bytes: Bytes::copy_from_slice(data),
        }
    }

    /// Views memory owned by `owner` without copying it.
    ///
    /// The buffer's bytes are `owner.as_ref()`. `owner` is dropped when the
    /// last view of it (this buffer, its clones, slices and split-off parts)
    /// is dropped: a receive buffer whose `Drop` returns it to the device or
    /// kernel is given back exactly when the application lets go of the data.
    pub fn from_owner<O>(owner: O) -> Self
    where
        O: AsRef<[u8]> + Send + 'static,
    {
        Self {
            bytes: Bytes::from_owner(owner),
        }
    }

    /// Number of bytes in the view.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the view holds no bytes.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes of the view.
    #[must_use]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    /// Address of the first byte of the view (for identity checks and for
    /// handing the memory to a device).
    #[must_use]
    pub fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }

    /// A new view of `range` (offsets relative to this view); no copy.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if the range ends past [`len`](IoBuf::len),
    /// [`IoBufError::InvalidRange`] if it starts after it ends.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<Self, IoBufError> {
        let len = self.len();
        let out_of_range = |requested| IoBufError::OutOfRange {
            requested,
            available: len,
        };
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.checked_add(1).ok_or(out_of_range(s))?,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1).ok_or(out_of_range(e))?,
            Bound::Excluded(&e) => e,
            Bound::Unbounded => len,
        };
        if end > len {
            return Err(out_of_range(end));
        }
        if start > end {
            return Err(IoBufError::InvalidRange { start, end });
        }
        Ok(Self {
            bytes: self.bytes.slice(start..end),
        })
    }

    /// Splits off and returns the first `at` bytes; `self` keeps the rest.
    /// Both are views of the same memory.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if `at > len()`; `self` is unchanged.
    pub fn split_to(&mut self, at: usize) -> Result<Self, IoBufError> {
        self.check(at)?;
        Ok(Self {
            bytes: self.bytes.split_to(at),
        })
    }

    /// Splits off and returns the bytes from `at` on; `self` keeps the first
    /// `at`. Both are views of the same memory.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if `at > len()`; `self` is unchanged.
    pub fn split_off(&mut self, at: usize) -> Result<Self, IoBufError> {
        self.check(at)?;
        Ok(Self {
            bytes: self.bytes.split_off(at),
        })
    }

    /// Drops the first `n` bytes from the view.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if `n > len()`; `self` is unchanged.
    pub fn trim_front(&mut self, n: usize) -> Result<(), IoBufError> {
        self.check(n)?;
        bytes::Buf::advance(&mut self.bytes, n);
        Ok(())
    }

    /// Drops the last `n` bytes from the view.
    ///
    /// # Errors
    ///
    /// [`IoBufError::OutOfRange`] if `n > len()`; `self` is unchanged.
    pub fn trim_back(&mut self, n: usize) -> Result<(), IoBufError> {
        self.check(n)?;
        self.bytes.truncate(self.len() - n);
        Ok(())
    }

    /// The underlying [`Bytes`].
    #[must_use]
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Converts into the underlying [`Bytes`] (no copy).
    #[must_use]
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    fn check(&self, n: usize) -> Result<(), IoBufError> {
        if n > self.len() {
            Err(IoBufError::OutOfRange {
                requested: n,
                available: self.len(),
            })
        } else {
            Ok(())
        }
    }
}

impl Deref for IoBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for IoBuf {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Borrow<[u8]> for IoBuf {
    fn borrow(&self) -> &[u8] {
        &self.bytes
    }
}

impl core::fmt::Debug for IoBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&self.bytes, f)
    }
}

impl PartialEq<[u8]> for IoBuf {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl From<Bytes> for IoBuf {
    fn from(bytes: Bytes) -> Self {
        Self { bytes }
    }
}

impl From<IoBuf> for Bytes {
    fn from(buf: IoBuf) -> Self {
        buf.bytes
    }
}

impl From<Vec<u8>> for IoBuf {
    fn from(vec: Vec<u8>) -> Self {
        Self::from_vec(vec)
    }
}

impl From<&'static [u8]> for IoBuf {
    fn from(data: &'static [u8]) -> Self {
        Self::from_static(data)
    }
}

impl From<IoBufMut> for IoBuf {
    fn from(buf: IoBufMut) -> Self {
        buf.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::IoBuf;
    use crate::IoBufError;
    use alloc::vec;
    use alloc::vec::Vec;

    #[test]
    fn from_vec_does_not_copy() {
        let mut v = Vec::with_capacity(64);
        v.extend_from_slice(b"hello");
        let p = v.as_ptr();
        let b = IoBuf::from_vec(v);
        assert_eq!(b.as_ptr(), p);
        let v = vec![7u8; 32];
        let p = v.as_ptr();
        assert_eq!(IoBuf::from(v).as_ptr(), p);
    }

    #[test]
    fn slice_and_split_are_views() {
        let mut b = IoBuf::copy_from_slice(b"0123456789");
        let base = b.as_ptr() as usize;
        let s = b.slice(2..5).unwrap();
        assert_eq!(&*s, b"234");
        assert_eq!(s.as_ptr() as usize, base + 2);
        assert_eq!(&*b.slice(..=1).unwrap(), b"01");
        assert_eq!(&*b.slice(8..).unwrap(), b"89");
        let head = b.split_to(3).unwrap();
        assert_eq!(&*head, b"012");
        assert_eq!(b.as_ptr() as usize, base + 3);
        let tail = b.split_off(4).unwrap();
        assert_eq!(&*b, b"3456");
        assert_eq!(&*tail, b"789");
        assert_eq!(tail.as_ptr() as usize, base + 7);
    }

    #[test]
    fn out_of_range_is_an_error_and_changes_nothing() {
        let mut b = IoBuf::from_static(b"abc");
        let e = IoBufError::OutOfRange {
            requested: 4,
            available: 3,
        };
        assert_eq!(b.split_to(4), Err(e));
        assert_eq!(b.split_off(4), Err(e));
        assert_eq!(b.trim_front(4), Err(e));
        assert_eq!(b.trim_back(4), Err(e));
        assert_eq!(b.slice(1..4), Err(e));
        assert_eq!(
            b.slice(core::ops::Range { start: 2, end: 1 }),
            Err(IoBufError::InvalidRange { start: 2, end: 1 })
        );
        assert_eq!(
            b.slice(..=usize::MAX),
            Err(IoBufError::OutOfRange {
                requested: usize::MAX,
                available: 3
            })
        );
        assert_eq!(&*b, b"abc");
        b.trim_front(1).unwrap();
        b.trim_back(1).unwrap();
        assert_eq!(&*b, b"b");
        b.trim_front(1).unwrap();
        assert!(b.is_empty());
    }

    #[test]
    fn bytes_round_trip() {
        let b = IoBuf::from(bytes::Bytes::from_static(b"xyz"));
        let p = b.as_ptr();
        let bytes = b.into_bytes();
        assert_eq!(bytes.as_ptr(), p);
        assert_eq!(IoBuf::from(bytes), *b"xyz".as_slice());
    }
}
