//! The byte-level pieces of the layouts of the Messenger's services (the
//! global id map's, the command line's; `docs/messenger.md`): little-endian integers, a
//! `u32` length before every string and byte string, a one-byte tag
//! before every option, boolean and variant. Decoding is strict: every
//! length is checked against what is left, every tag against the values
//! it may take, strings must be UTF-8, and a body must be read to its
//! last byte.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// Why the bytes of a service's request or reply are not valid. The
/// caller answers a bad request with a refusal and turns a bad reply into
/// its own error (the map's [`ebb_core::MapError::Refused`]); nothing
/// here panics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The body ends inside a field.
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes it needs.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// Bytes are left after the last field.
    Trailing {
        /// How many.
        extra: usize,
    },
    /// A tag (option, boolean, variant) has a value it may not take.
    BadTag {
        /// The field.
        field: &'static str,
        /// The value found.
        tag: u8,
    },
    /// A string is not UTF-8.
    NotUtf8 {
        /// The field.
        field: &'static str,
    },
    /// The message number names no operation of the service.
    UnknownOperation(u32),
    /// A reserved range is empty or inverted.
    EmptyRange {
        /// Its start.
        start: u32,
        /// Its end (excluded).
        end: u32,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Truncated {
                field,
                needed,
                available,
            } => write!(
                f,
                "truncated: {field} needs {needed} bytes but only {available} are left"
            ),
            LayoutError::Trailing { extra } => {
                write!(f, "{extra} bytes are left after the last field")
            }
            LayoutError::BadTag { field, tag } => {
                write!(f, "{field} has tag {tag}, which it may not take")
            }
            LayoutError::NotUtf8 { field } => write!(f, "{field} is not UTF-8"),
            LayoutError::UnknownOperation(number) => {
                write!(f, "message number {number} names no operation here")
            }
            LayoutError::EmptyRange { start, end } => {
                write!(f, "the id range {start}..{end} is empty")
            }
        }
    }
}

impl core::error::Error for LayoutError {}

/// Appends fields to a body.
#[derive(Default)]
pub(crate) struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    pub(crate) fn finish(self) -> Vec<u8> {
        self.bytes
    }

    pub(crate) fn u8(&mut self, value: u8) -> &mut Self {
        self.bytes.push(value);
        self
    }

    pub(crate) fn u32(&mut self, value: u32) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub(crate) fn u64(&mut self, value: u64) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub(crate) fn i64(&mut self, value: i64) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub(crate) fn bool(&mut self, value: bool) -> &mut Self {
        self.u8(u8::from(value))
    }

    /// A length, then the bytes. Lengths above `u32::MAX` cannot occur:
    /// a Messenger payload is far smaller.
    pub(crate) fn bytes(&mut self, value: &[u8]) -> &mut Self {
        self.u32(u32::try_from(value.len()).unwrap_or(u32::MAX));
        self.bytes.extend_from_slice(value);
        self
    }

    pub(crate) fn str(&mut self, value: &str) -> &mut Self {
        self.bytes(value.as_bytes())
    }

    pub(crate) fn option_bytes(&mut self, value: Option<&[u8]>) -> &mut Self {
        match value {
            None => self.u8(0),
            Some(bytes) => self.u8(1).bytes(bytes),
        }
    }
}

/// Reads fields from a body, front to back.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    /// Checks that nothing is left.
    pub(crate) fn end(&self) -> Result<(), LayoutError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(LayoutError::Trailing {
                extra: self.bytes.len(),
            })
        }
    }

    fn take(&mut self, field: &'static str, len: usize) -> Result<&'a [u8], LayoutError> {
        if self.bytes.len() < len {
            return Err(LayoutError::Truncated {
                field,
                needed: len,
                available: self.bytes.len(),
            });
        }
        let (head, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], LayoutError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(field, N)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, LayoutError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, LayoutError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, LayoutError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, LayoutError> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }

    /// A tag that must be below `limit`.
    pub(crate) fn tag(&mut self, field: &'static str, limit: u8) -> Result<u8, LayoutError> {
        let tag = self.u8(field)?;
        if tag >= limit {
            return Err(LayoutError::BadTag { field, tag });
        }
        Ok(tag)
    }

    pub(crate) fn bool(&mut self, field: &'static str) -> Result<bool, LayoutError> {
        Ok(self.tag(field, 2)? == 1)
    }

    pub(crate) fn bytes(&mut self, field: &'static str) -> Result<Vec<u8>, LayoutError> {
        let len = self.u32(field)?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        Ok(self.take(field, len)?.to_vec())
    }

    pub(crate) fn string(&mut self, field: &'static str) -> Result<String, LayoutError> {
        String::from_utf8(self.bytes(field)?).map_err(|_| LayoutError::NotUtf8 { field })
    }

    pub(crate) fn option_bytes(
        &mut self,
        field: &'static str,
    ) -> Result<Option<Vec<u8>>, LayoutError> {
        if self.bool(field)? {
            Ok(Some(self.bytes(field)?))
        } else {
            Ok(None)
        }
    }

    /// A count of items each at least `min_len` bytes long: one that
    /// cannot fit in what is left is refused before anything is
    /// allocated for it.
    pub(crate) fn count(
        &mut self,
        field: &'static str,
        min_len: usize,
    ) -> Result<usize, LayoutError> {
        let count = usize::try_from(self.u32(field)?).unwrap_or(usize::MAX);
        let needed = count.saturating_mul(min_len);
        if needed > self.bytes.len() {
            return Err(LayoutError::Truncated {
                field,
                needed,
                available: self.bytes.len(),
            });
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_bad_ones_are_named() {
        let mut writer = Writer::default();
        writer
            .u8(7)
            .u32(0x0102_0304)
            .i64(-2)
            .bool(true)
            .str("ké")
            .option_bytes(None)
            .option_bytes(Some(b"v"));
        let bytes = writer.finish();
        assert_eq!(&bytes[1..5], &[4, 3, 2, 1]);
        let mut reader = Reader::new(&bytes);
        assert_eq!(reader.u8("a"), Ok(7));
        assert_eq!(reader.u32("b"), Ok(0x0102_0304));
        assert_eq!(reader.i64("c"), Ok(-2));
        assert_eq!(reader.bool("d"), Ok(true));
        assert_eq!(reader.string("e").as_deref(), Ok("ké"));
        assert_eq!(reader.option_bytes("f"), Ok(None));
        assert_eq!(reader.option_bytes("g"), Ok(Some(b"v".to_vec())));
        assert_eq!(reader.end(), Ok(()));
        assert_eq!(
            Reader::new(&[2]).bool("flag"),
            Err(LayoutError::BadTag {
                field: "flag",
                tag: 2
            })
        );
        assert_eq!(
            Reader::new(&[1, 0, 0, 0, 0xff]).string("key"),
            Err(LayoutError::NotUtf8 { field: "key" })
        );
        assert_eq!(
            Reader::new(&[5, 0, 0, 0, b'a']).bytes("value"),
            Err(LayoutError::Truncated {
                field: "value",
                needed: 5,
                available: 1
            })
        );
        assert_eq!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff]).count("entries", 8),
            Err(LayoutError::Truncated {
                field: "entries",
                needed: 0xffff_ffff * 8,
                available: 0
            })
        );
        assert_eq!(
            Reader::new(&[1]).end(),
            Err(LayoutError::Trailing { extra: 1 })
        );
    }
}
