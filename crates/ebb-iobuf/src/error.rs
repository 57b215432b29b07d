//! The error type shared by buffers, chains and cursors.

use core::fmt;

/// Why a buffer, chain or cursor operation was refused.
///
/// Whenever one of these is returned, the buffer, chain or cursor the
/// operation was called on is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoBufError {
    /// An offset or length reaches past the end of a buffer or chain.
    OutOfRange {
        /// The offset or length that was asked for.
        requested: usize,
        /// How many bytes the buffer or chain holds.
        available: usize,
    },
    /// A range's start lies after its end.
    InvalidRange {
        /// The start of the range.
        start: usize,
        /// The end of the range (exclusive).
        end: usize,
    },
    /// A cursor read needs more bytes than remain after the cursor.
    Truncated {
        /// How many bytes the read needs.
        needed: usize,
        /// How many bytes remain after the cursor.
        remaining: usize,
    },
    /// A prepend needs more headroom than the buffer has left.
    NoHeadroom {
        /// How many bytes were to be prepended.
        needed: usize,
        /// How many bytes of headroom are left.
        headroom: usize,
    },
    /// The allocator could not provide a buffer this large (a `try_`
    /// operation, for callers that answer "out of memory" instead of
    /// aborting).
    OutOfMemory {
        /// How many bytes were asked for.
        requested: usize,
    },
}

impl fmt::Display for IoBufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::OutOfRange {
                requested,
                available,
            } => write!(
                f,
                "offset or length {requested} is beyond the {available} bytes available"
            ),
            Self::InvalidRange { start, end } => {
                write!(f, "range start {start} is after its end {end}")
            }
            Self::Truncated { needed, remaining } => write!(
                f,
                "the read needs {needed} bytes but only {remaining} remain"
            ),
            Self::NoHeadroom { needed, headroom } => write!(
                f,
                "prepending {needed} bytes needs more than the {headroom} bytes of headroom left"
            ),
            Self::OutOfMemory { requested } => {
                write!(f, "no memory for a buffer of {requested} bytes")
            }
        }
    }
}

impl core::error::Error for IoBufError {}

#[cfg(test)]
mod tests {
    use super::IoBufError;
    use alloc::string::ToString;

    #[test]
    fn messages_are_sentences() {
        let e = IoBufError::OutOfRange {
            requested: 9,
            available: 4,
        };
        assert_eq!(
            e.to_string(),
            "offset or length 9 is beyond the 4 bytes available"
        );
        let e = IoBufError::Truncated {
            needed: 4,
            remaining: 1,
        };
        assert_eq!(e.to_string(), "the read needs 4 bytes but only 1 remain");
        let e = IoBufError::NoHeadroom {
            needed: 20,
            headroom: 14,
        };
        assert!(e.to_string().contains("14 bytes of headroom"));
        let e = IoBufError::InvalidRange { start: 5, end: 2 };
        assert_eq!(e.to_string(), "range start 5 is after its end 2");
    }
}
