//! Little-endian fields in and out of a control structure: a writer over
//! a `Vec`, and a reader over a slice whose every read checks the length
//! first, so that no byte from the network can make a decoder panic.

use alloc::string::String;
use alloc::vec::Vec;

use crate::DecodeError;
use ebb_fs::MAX_PATH_LEN;

/// Reads fields from the front of a slice.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    /// Bytes read so far (for the errors' `needed`).
    read: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, read: 0 }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() < n {
            return Err(DecodeError::Truncated {
                needed: self.read + n,
                available: self.read + self.bytes.len(),
            });
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        self.read += n;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_le_bytes)
    }

    pub(crate) fn i64(&mut self) -> Result<i64, DecodeError> {
        self.array().map(i64::from_le_bytes)
    }

    /// A reserved field of `N` bytes, which must be zero.
    pub(crate) fn reserved<const N: usize>(&mut self) -> Result<(), DecodeError> {
        let bytes = self.array::<N>()?;
        if bytes.iter().all(|&b| b == 0) {
            return Ok(());
        }
        let mut value = [0u8; 4];
        let n = N.min(4);
        value[..n].copy_from_slice(&bytes[..n]);
        Err(DecodeError::Reserved {
            value: u32::from_le_bytes(value).max(1),
        })
    }

    /// A path: its length (u16), then that many bytes of UTF-8.
    pub(crate) fn path(&mut self) -> Result<String, DecodeError> {
        let len = usize::from(self.u16()?);
        if len > MAX_PATH_LEN {
            return Err(DecodeError::PathTooLong { len });
        }
        let bytes = self.take(len)?;
        core::str::from_utf8(bytes)
            .map(String::from)
            .map_err(|_| DecodeError::PathNotUtf8)
    }

    /// Nothing may be left.
    pub(crate) fn end(&self) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Trailing {
                extra: self.bytes.len(),
            })
        }
    }
}

/// Appends a path (its length as u16, then its bytes); the caller checked
/// it is at most [`MAX_PATH_LEN`] bytes.
pub(crate) fn put_path(out: &mut Vec<u8>, path: &str) {
    let len = u16::try_from(path.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(path.as_bytes());
}
