//! Request framing: the request line, the data block after it, and the
//! bytes memcached swallows after refusing a store.

use alloc::borrow::Cow;

use ebb_iobuf::IoChain;

use crate::protocol::Outcome;

/// memcached closes a connection whose request line has no `\n` within
/// this many bytes (its `try_read_command_ascii`), unless it is a large
/// multiget.
///
/// memcached decides this on what has arrived, so its answer depends on
/// how the stream was split into reads: a 3000-byte unknown command gets
/// `ERROR` when it arrives in one read and a close when a read ends past
/// its first 2048 bytes. We follow memcached (the differential tests send
/// each request in one write, `tests/random_frames.rs` and
/// `tests/differential.rs`); the fuzz check (`tests/fuzz_check`) compares
/// different splits only of streams without such a line.
pub const LINE_MAX: usize = 2048;

/// memcached lets a `get`/`gets` line grow without bound; we close the
/// connection past this.
pub const MULTIGET_LINE_MAX: usize = 4 << 20;

/// A request line found at the start of the input.
pub struct Request<'a> {
    /// All input received so far.
    pub input: &'a IoChain,
    /// The line as memcached sees it: without `\n`, without a `\r` before
    /// it, cut at the first NUL. Borrowed from the first receive buffer
    /// when the whole line is in it (almost always), so that a request
    /// costs no allocation for its line; copied only when it spans
    /// buffers.
    pub line: Cow<'a, [u8]>,
    /// Offset just past the line's `\n`.
    pub line_end: usize,
}

impl<'a> Request<'a> {
    /// The first line of `input`, if its `\n` has arrived.
    pub fn parse(input: &'a IoChain) -> Option<Self> {
        let newline = input.cursor().find(b"\n")?;
        let first = input.segments().next().map(|seg| seg.as_slice());
        let mut line = match first {
            Some(first) if first.len() > newline => Cow::Borrowed(&first[..newline]),
            _ => Cow::Owned(input.cursor().read_chain(newline).ok()?.to_vec()),
        };
        if line.len() > 1 && line.last() == Some(&b'\r') {
            let len = line.len() - 1;
            line = cut(line, len);
        }
        if let Some(nul) = ebb_iobuf::scan::find(0, &line) {
            line = cut(line, nul);
        }
        Some(Request {
            input,
            line,
            line_end: newline + 1,
        })
    }
}

/// The first `len` bytes of `line`, borrowed or owned as it was.
fn cut(line: Cow<'_, [u8]>, len: usize) -> Cow<'_, [u8]> {
    match line {
        Cow::Borrowed(line) => Cow::Borrowed(&line[..len]),
        Cow::Owned(mut line) => {
            line.truncate(len);
            Cow::Owned(line)
        }
    }
}

/// What to do with input that has no `\n` yet.
pub fn without_newline(input: &IoChain) -> Outcome {
    if input.len() <= LINE_MAX {
        return Outcome::Incomplete;
    }
    let mut head = [0u8; 110];
    let n = head.len().min(input.len());
    if input.copy_to_slice(&mut head[..n]).is_err() {
        return Outcome::Close;
    }
    let spaces = head.iter().take_while(|&&b| b == b' ').count();
    let rest = &head[spaces..n];
    let multiget = spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "));
    if multiget && input.len() <= MULTIGET_LINE_MAX {
        Outcome::Incomplete
    } else {
        Outcome::Close
    }
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
