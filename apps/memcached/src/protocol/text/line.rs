//! Request framing: the request line, the data block after it, and the
//! bytes memcached swallows after refusing a store.

use alloc::vec::Vec;

use ebb_iobuf::IoChain;

use crate::protocol::Outcome;

/// A request line longer than this closes the connection, unless it is a
/// large multiget: memcached's read buffer (`READ_BUFFER_SIZE`), which a
/// line must fit in when it arrives in one read. (memcached also closes
/// when a read leaves more than 2048 bytes without a `\n`, which makes the
/// answer to one stream depend on how it was split into reads; see
/// [`line_too_long`].)
pub const LINE_MAX: usize = 16384;

/// memcached lets a `get`/`gets` line grow without bound; we close the
/// connection past this.
pub const MULTIGET_LINE_MAX: usize = 4 << 20;

/// A request line found at the start of the input.
pub struct Request<'a> {
    /// All input received so far.
    pub input: &'a IoChain,
    /// The line as memcached sees it: without `\n`, without a `\r` before
    /// it, cut at the first NUL.
    pub line: Vec<u8>,
    /// Offset just past the line's `\n`.
    pub line_end: usize,
}

impl<'a> Request<'a> {
    /// The first line of `input`, if its `\n` has arrived.
    pub fn parse(input: &'a IoChain) -> Option<Self> {
        let newline = input.cursor().find(b"\n")?;
        let mut line = input.cursor().read_chain(newline).ok()?.to_vec();
        if line.len() > 1 && line.last() == Some(&b'\r') {
            line.pop();
        }
        if let Some(nul) = line.iter().position(|&b| b == 0) {
            line.truncate(nul);
        }
        Some(Request {
            input,
            line,
            line_end: newline + 1,
        })
    }
}

/// What to do with input that has no `\n` yet.
pub fn without_newline(input: &IoChain) -> Outcome {
    if line_too_long(input, input.len()) {
        Outcome::Close
    } else {
        Outcome::Incomplete
    }
}

/// Whether a request line of which `len` bytes (before its `\n`, if any)
/// are in `input` closes the connection.
///
/// memcached decides this while the line is unterminated, so its answer
/// depends on how the bytes were split into reads: a 3000-byte unknown
/// command gets `ERROR` when it arrives in one read and a close when a
/// read ends after its first 2048 bytes. We decide on the line's length
/// alone, so that a TCP stream gets the same replies however it is
/// segmented (the fuzz check, `tests/fuzz_check`, holds us to that), and
/// as memcached answers a client that sends each request in one write
/// (the random-frames differential test, `tests/random_frames.rs`): a
/// line is served up to memcached's read buffer, [`LINE_MAX`].
pub fn line_too_long(input: &IoChain, len: usize) -> bool {
    if len <= LINE_MAX {
        return false;
    }
    let mut head = [0u8; 110];
    let n = head.len().min(input.len());
    if input.copy_to_slice(&mut head[..n]).is_err() {
        return true;
    }
    let spaces = head.iter().take_while(|&&b| b == b' ').count();
    let rest = &head[spaces..n];
    let multiget = spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "));
    !multiget || len > MULTIGET_LINE_MAX
}

/// A data block after a request line.
pub enum Block {
    /// Not all of it has arrived.
    Incomplete,
    /// It does not end with `\r\n`.
    Bad,
    /// The value (without `\r\n`), still in the receive buffers (the
    /// caller copies it: [`crate::protocol::Context::copy_value`]).
    Good(IoChain),
}

/// The block of `len` bytes (value and `\r\n`) starting at `start`.
pub fn data_block(input: &IoChain, start: usize, len: usize) -> Block {
    let Some(end) = start.checked_add(len).filter(|&end| end <= input.len()) else {
        return Block::Incomplete;
    };
    let mut cursor = input.cursor();
    if cursor.skip(start).is_err() || len < 2 {
        return Block::Incomplete;
    }
    let Ok(value) = cursor.read_chain(len - 2) else {
        return Block::Incomplete;
    };
    match cursor.read_array::<2>() {
        Ok(crlf) if crlf == *b"\r\n" && cursor.position() == end => Block::Good(value),
        Ok(_) => Block::Bad,
        Err(_) => Block::Incomplete,
    }
}

/// Consumes the line and throws away the `len` bytes after it as they
/// arrive (memcached's `conn_swallow`), without buffering them.
pub fn swallow(line_end: usize, len: usize) -> Outcome {
    Outcome::Discard {
        consumed: line_end,
        discard: len,
    }
}
