//! Wire protocols behind one small trait.
//!
//! A [`Protocol`] encodes a [`Request`] by appending bytes to a buffer and
//! parses replies from the front of a byte buffer, one complete reply at a
//! time: an incomplete reply (split across reads) is `Ok(None)` and nothing
//! is consumed, so the caller keeps the bytes and calls again after the next
//! read. Replies come back in request order (every protocol here is
//! pipelined in order), so the caller matches each reply to its oldest
//! request in flight. Adding a protocol (HTTP, echo) is one more
//! implementation and one more [`ProtocolKind`].

use std::fmt;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read a key.
    Get,
    /// Store a value under a key.
    Set,
}

/// One request to encode.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// Get or set.
    pub op: Op,
    /// The key (at most 250 bytes for memcached).
    pub key: &'a [u8],
    /// The value of a set (ignored by gets).
    pub value: &'a [u8],
}

/// How one reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A get that found its key.
    Hit,
    /// A get that did not find its key.
    Miss,
    /// A set that stored its value.
    Stored,
    /// A well-formed error reply (`SERVER_ERROR ...`, a non-zero status, ...).
    Error,
}

/// Bytes the protocol cannot make sense of: the stream is lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// Totals of parsed replies (see [`Protocol::parse_all`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplyCounts {
    /// Complete replies.
    pub replies: u64,
    /// Gets that hit.
    pub hits: u64,
    /// Gets that missed.
    pub misses: u64,
    /// Sets that stored.
    pub stored: u64,
    /// Error replies.
    pub errors: u64,
}

impl ReplyCounts {
    /// Counts one reply.
    pub fn add(&mut self, outcome: Outcome) {
        self.replies += 1;
        match outcome {
            Outcome::Hit => self.hits += 1,
            Outcome::Miss => self.misses += 1,
            Outcome::Stored => self.stored += 1,
            Outcome::Error => self.errors += 1,
        }
    }

    /// Adds `other` to these totals.
    pub fn merge(&mut self, other: &ReplyCounts) {
        self.replies += other.replies;
        self.hits += other.hits;
        self.misses += other.misses;
        self.stored += other.stored;
        self.errors += other.errors;
    }
}

/// A request/reply protocol; see the [module docs](self).
pub trait Protocol: Send {
    /// A short name (`text`, `binary`).
    fn name(&self) -> &'static str;

    /// Appends the encoding of `request` to `out`.
    fn encode(&mut self, request: &Request<'_>, out: &mut Vec<u8>);

    /// Parses at most one complete reply at the start of `buf`: the bytes it
    /// took and its outcome, `Ok(None)` when `buf` holds only part of a
    /// reply (nothing is consumed), an error when the bytes are not a reply.
    fn parse_one(&mut self, buf: &[u8]) -> Result<Option<(usize, Outcome)>, ProtocolError>;

    /// Parses every complete reply at the start of `buf`, adds them to
    /// `counts` and returns the bytes consumed (the rest is a partial reply).
    fn parse_all(&mut self, buf: &[u8], counts: &mut ReplyCounts) -> Result<usize, ProtocolError> {
        let mut pos = 0;
        while let Some((used, outcome)) = self.parse_one(&buf[pos..])? {
            pos += used;
            counts.add(outcome);
        }
        Ok(pos)
    }
}

/// The protocols this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProtocolKind {
    /// The memcached text protocol (`get`/`set`).
    Text,
    /// The memcached binary protocol (GET/SET opcodes).
    Binary,
    /// Redis's RESP (`GET`/`SET` as arrays of bulk strings).
    Resp,
}

impl ProtocolKind {
    /// A fresh protocol instance (one per connection or thread).
    pub fn create(self) -> Box<dyn Protocol> {
        match self {
            ProtocolKind::Text => Box::new(MemcachedText),
            ProtocolKind::Binary => Box::new(MemcachedBinary),
            ProtocolKind::Resp => Box::new(Resp),
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolKind::Text => "text",
            ProtocolKind::Binary => "binary",
            ProtocolKind::Resp => "resp",
        }
    }
}

/// Appends the decimal digits of `n` (no allocation).
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        // `n % 10` is below 10, so the narrowing is exact.
        digits[i] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Longest reply line accepted before the stream is declared lost.
const MAX_LINE: usize = 8192;
/// Largest value accepted in a reply (memcached's item limit is 1 MiB by
/// default, 1 GiB at most).
const MAX_VALUE: usize = 1 << 30;

/// The memcached text protocol: `get KEY`, `set KEY 0 0 LEN` + data.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemcachedText;

/// The index of the first `\n` in `buf`.
fn find_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// The line at the start of `buf` without its `\r\n`, and the length
/// including it; `Ok(None)` when incomplete.
fn line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    match find_newline(buf) {
        Some(nl) => {
            let text = if nl > 0 && buf[nl - 1] == b'\r' {
                &buf[..nl - 1]
            } else {
                &buf[..nl]
            };
            Ok(Some((text, nl + 1)))
        }
        None if buf.len() > MAX_LINE => Err(ProtocolError(format!(
            "no end of line in the first {MAX_LINE} bytes of a reply: {}",
            show(&buf[..64])
        ))),
        None => Ok(None),
    }
}

/// Up to 64 bytes of `bytes`, printable.
fn show(bytes: &[u8]) -> String {
    let n = bytes.len().min(64);
    format!("{:?}", String::from_utf8_lossy(&bytes[..n]))
}

/// The `LEN` of a `VALUE KEY FLAGS LEN [CAS]` line.
fn value_length(text: &[u8]) -> Result<usize, ProtocolError> {
    let bad = || ProtocolError(format!("malformed VALUE line {}", show(text)));
    let field = text.split(|&b| b == b' ').filter(|f| !f.is_empty()).nth(3);
    let field = field.ok_or_else(bad)?;
    let s = std::str::from_utf8(field).map_err(|_| bad())?;
    let n: usize = s.parse().map_err(|_| bad())?;
    if n > MAX_VALUE {
        return Err(bad());
    }
    Ok(n)
}

impl Protocol for MemcachedText {
    fn name(&self) -> &'static str {
        "text"
    }

    fn encode(&mut self, request: &Request<'_>, out: &mut Vec<u8>) {
        match request.op {
            Op::Get => {
                out.extend_from_slice(b"get ");
                out.extend_from_slice(request.key);
                out.extend_from_slice(b"\r\n");
            }
            Op::Set => {
                out.extend_from_slice(b"set ");
                out.extend_from_slice(request.key);
                out.extend_from_slice(b" 0 0 ");
                push_decimal(out, crate::u64_of(request.value.len()));
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(request.value);
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    fn parse_one(&mut self, buf: &[u8]) -> Result<Option<(usize, Outcome)>, ProtocolError> {
        let Some((text, mut pos)) = line(buf)? else {
            return Ok(None);
        };
        let outcome = match text {
            b"STORED" => Outcome::Stored,
            b"END" => Outcome::Miss,
            b"NOT_STORED" | b"EXISTS" | b"NOT_FOUND" | b"ERROR" => Outcome::Error,
            _ if text.starts_with(b"CLIENT_ERROR") || text.starts_with(b"SERVER_ERROR") => {
                Outcome::Error
            }
            _ if text.starts_with(b"VALUE ") => {
                // One or more VALUE blocks, then END.
                let mut text = text;
                loop {
                    let len = value_length(text)?;
                    let data_end = pos + len;
                    if buf.len() < data_end + 2 {
                        return Ok(None);
                    }
                    if &buf[data_end..data_end + 2] != b"\r\n" {
                        return Err(ProtocolError(format!(
                            "value of {len} bytes not followed by \\r\\n: {}",
                            show(&buf[data_end..])
                        )));
                    }
                    pos = data_end + 2;
                    let Some((next, used)) = line(&buf[pos..])? else {
                        return Ok(None);
                    };
                    pos += used;
                    if next == b"END" {
                        break Outcome::Hit;
                    }
                    if !next.starts_with(b"VALUE ") {
                        return Err(ProtocolError(format!(
                            "expected VALUE or END after a value, got {}",
                            show(next)
                        )));
                    }
                    text = next;
                }
            }
            _ => {
                return Err(ProtocolError(format!(
                    "unexpected memcached text reply {}",
                    show(text)
                )))
            }
        };
        Ok(Some((pos, outcome)))
    }
}

/// The memcached binary protocol: GET (0x00) and SET (0x01) requests.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemcachedBinary;

/// Binary protocol constants.
pub mod binary {
    /// Magic byte of a request.
    pub const REQUEST: u8 = 0x80;
    /// Magic byte of a response.
    pub const RESPONSE: u8 = 0x81;
    /// GET opcode.
    pub const GET: u8 = 0x00;
    /// SET opcode.
    pub const SET: u8 = 0x01;
    /// Header length.
    pub const HEADER: usize = 24;
    /// Status: no error.
    pub const STATUS_OK: u16 = 0;
    /// Status: key not found.
    pub const STATUS_NOT_FOUND: u16 = 1;
}

/// Appends a binary request header.
fn binary_header(out: &mut Vec<u8>, opcode: u8, key_len: usize, extras: u8, body: usize) {
    // Keys are at most 250 bytes and values far below 4 GiB; saturate
    // rather than wrap if a caller breaks that.
    let key_len = u16::try_from(key_len).unwrap_or(u16::MAX);
    let body = u32::try_from(body).unwrap_or(u32::MAX);
    out.extend_from_slice(&[binary::REQUEST, opcode]);
    out.extend_from_slice(&key_len.to_be_bytes());
    out.extend_from_slice(&[extras, 0, 0, 0]); // extras, data type, vbucket
    out.extend_from_slice(&body.to_be_bytes());
    out.extend_from_slice(&[0; 12]); // opaque, cas
}

impl Protocol for MemcachedBinary {
    fn name(&self) -> &'static str {
        "binary"
    }

    fn encode(&mut self, request: &Request<'_>, out: &mut Vec<u8>) {
        let key = request.key;
        match request.op {
            Op::Get => {
                binary_header(out, binary::GET, key.len(), 0, key.len());
                out.extend_from_slice(key);
            }
            Op::Set => {
                let body = 8 + key.len() + request.value.len();
                binary_header(out, binary::SET, key.len(), 8, body);
                out.extend_from_slice(&[0; 8]); // flags, expiration
                out.extend_from_slice(key);
                out.extend_from_slice(request.value);
            }
        }
    }

    fn parse_one(&mut self, buf: &[u8]) -> Result<Option<(usize, Outcome)>, ProtocolError> {
        if buf.len() < binary::HEADER {
            return Ok(None);
        }
        if buf[0] != binary::RESPONSE {
            return Err(ProtocolError(format!(
                "binary reply starts with 0x{:02x}, not 0x81: {}",
                buf[0],
                show(&buf[..binary::HEADER])
            )));
        }
        let body = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
        let body = usize::try_from(body).unwrap_or(usize::MAX);
        if body > MAX_VALUE {
            return Err(ProtocolError(format!(
                "binary reply claims a body of {body} bytes"
            )));
        }
        let total = binary::HEADER + body;
        if buf.len() < total {
            return Ok(None);
        }
        let status = u16::from_be_bytes([buf[6], buf[7]]);
        let opcode = buf[1];
        let outcome = match (status, opcode) {
            (binary::STATUS_OK, binary::SET) => Outcome::Stored,
            (binary::STATUS_OK, _) => Outcome::Hit,
            (binary::STATUS_NOT_FOUND, binary::GET) => Outcome::Miss,
            _ => Outcome::Error,
        };
        Ok(Some((total, outcome)))
    }
}

/// Redis's protocol, RESP (redis.io, "Redis serialization protocol
/// specification"): requests are arrays of bulk strings, as
/// `redis-benchmark` and client libraries send them; replies to GET are a
/// bulk string (hit) or the null bulk string `$-1` (miss; RESP3's `_`
/// too), to SET the simple string `+OK`, and errors start with `-`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Resp;

/// Appends the RESP bulk string `bytes`: `$LEN\r\nBYTES\r\n`.
fn resp_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    push_decimal(out, crate::u64_of(bytes.len()));
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

impl Protocol for Resp {
    fn name(&self) -> &'static str {
        "resp"
    }

    fn encode(&mut self, request: &Request<'_>, out: &mut Vec<u8>) {
        match request.op {
            Op::Get => {
                out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
                resp_bulk(out, request.key);
            }
            Op::Set => {
                out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
                resp_bulk(out, request.key);
                resp_bulk(out, request.value);
            }
        }
    }

    fn parse_one(&mut self, buf: &[u8]) -> Result<Option<(usize, Outcome)>, ProtocolError> {
        let Some((text, used)) = line(buf)? else {
            return Ok(None);
        };
        let outcome = match text.first() {
            Some(b'+') => Outcome::Stored,
            Some(b'-') => Outcome::Error,
            Some(b'_') if text.len() == 1 => Outcome::Miss,
            Some(b'$') if &text[1..] == b"-1" => Outcome::Miss,
            Some(b'$') => {
                let bad = || ProtocolError(format!("malformed bulk string header {}", show(text)));
                let digits = std::str::from_utf8(&text[1..]).map_err(|_| bad())?;
                let len: usize = digits.parse().map_err(|_| bad())?;
                if len > MAX_VALUE {
                    return Err(bad());
                }
                let end = used + len;
                if buf.len() < end + 2 {
                    return Ok(None);
                }
                if &buf[end..end + 2] != b"\r\n" {
                    return Err(ProtocolError(format!(
                        "bulk string of {len} bytes not followed by \\r\\n: {}",
                        show(&buf[end..])
                    )));
                }
                return Ok(Some((end + 2, Outcome::Hit)));
            }
            _ => {
                return Err(ProtocolError(format!(
                    "unexpected RESP reply to GET or SET {}",
                    show(text)
                )))
            }
        };
        Ok(Some((used, outcome)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(key: &[u8]) -> Request<'_> {
        Request {
            op: Op::Get,
            key,
            value: b"",
        }
    }

    #[test]
    fn text_requests_are_memcached_commands() {
        let mut p = MemcachedText;
        let mut out = Vec::new();
        p.encode(&get(b"k1"), &mut out);
        p.encode(
            &Request {
                op: Op::Set,
                key: b"key",
                value: b"hello",
            },
            &mut out,
        );
        assert_eq!(out, b"get k1\r\nset key 0 0 5\r\nhello\r\n");
    }

    #[test]
    fn decimals() {
        for n in [0u64, 7, 10, 12_345, u64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }

    #[test]
    fn text_replies_parse_whole_and_split_at_every_byte() {
        let stream: &[u8] = b"STORED\r\nEND\r\nVALUE k 0 5\r\nhe\r\no\r\nEND\r\n\
                              SERVER_ERROR out of memory\r\nVALUE a 0 1\r\nx\r\nVALUE b 0 0\r\n\r\nEND\r\n";
        let want = [
            Outcome::Stored,
            Outcome::Miss,
            Outcome::Hit,
            Outcome::Error,
            Outcome::Hit,
        ];
        for split in 0..=stream.len() {
            let mut p = MemcachedText;
            let mut got = Vec::new();
            let mut buf = stream[..split].to_vec();
            let mut fed = split;
            loop {
                let mut pos = 0;
                while let Some((n, o)) = p.parse_one(&buf[pos..]).expect("valid") {
                    pos += n;
                    got.push(o);
                }
                buf.drain(..pos);
                if fed == stream.len() {
                    break;
                }
                buf.extend_from_slice(&stream[fed..]);
                fed = stream.len();
            }
            assert!(buf.is_empty(), "split {split}: left {buf:?}");
            assert_eq!(got, want, "split {split}");
        }
    }

    #[test]
    fn text_garbage_is_an_error() {
        let mut p = MemcachedText;
        assert!(
            matches!(p.parse_one(b"HELLO\r\n"), Err(ProtocolError(e)) if e.contains("unexpected memcached text reply"))
        );
        assert!(
            matches!(p.parse_one(b"VALUE k 0 x\r\n"), Err(ProtocolError(e)) if e.contains("malformed VALUE line"))
        );
        assert!(
            matches!(p.parse_one(b"VALUE k 0 1\r\nab\r\nEND\r\n"), Err(ProtocolError(e)) if e.contains("not followed by \\r\\n"))
        );
        assert!(
            matches!(p.parse_one(&[b'a'; MAX_LINE + 1]), Err(ProtocolError(e)) if e.contains("no end of line in the first 8192 bytes"))
        );
        assert_eq!(p.parse_one(b"STOR").expect("partial"), None);
    }

    #[test]
    fn resp_requests_are_arrays_of_bulk_strings() {
        let mut p = Resp;
        let mut out = Vec::new();
        p.encode(&get(b"k1"), &mut out);
        p.encode(
            &Request {
                op: Op::Set,
                key: b"key",
                value: b"hello",
            },
            &mut out,
        );
        assert_eq!(
            out,
            b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nhello\r\n"
        );
    }

    #[test]
    fn resp_replies_parse_whole_and_split_at_every_byte() {
        let stream: &[u8] =
            b"+OK\r\n$-1\r\n$5\r\nhe\r\no\r\n-OOM command not allowed\r\n$0\r\n\r\n_\r\n";
        for split in 0..=stream.len() {
            let mut p = Resp;
            let mut counts = ReplyCounts::default();
            let used = p.parse_all(&stream[..split], &mut counts).expect("valid");
            let rest = p.parse_all(&stream[used..], &mut counts).expect("valid");
            assert_eq!(used + rest, stream.len(), "split {split}");
            assert_eq!(
                counts,
                ReplyCounts {
                    replies: 6,
                    hits: 2,
                    misses: 2,
                    stored: 1,
                    errors: 1
                },
                "split {split}"
            );
        }
    }

    #[test]
    fn resp_garbage_is_an_error() {
        let mut p = Resp;
        assert!(
            matches!(p.parse_one(b":1\r\n"), Err(ProtocolError(e)) if e.contains("unexpected RESP reply"))
        );
        assert!(
            matches!(p.parse_one(b"$x\r\n"), Err(ProtocolError(e)) if e.contains("malformed bulk string header"))
        );
        assert!(
            matches!(p.parse_one(b"$1\r\nab\r\n"), Err(ProtocolError(e)) if e.contains("not followed by"))
        );
        assert!(
            matches!(p.parse_one(b"$99999999999\r\n"), Err(ProtocolError(e)) if e.contains("malformed bulk string header"))
        );
        assert_eq!(p.parse_one(b"$5\r\nab").expect("partial"), None);
    }

    proptest::proptest! {
        /// Whatever a server sends, the parser answers (a reply, a need
        /// for more bytes, or an error) without panicking, and never
        /// claims more bytes than it was given.
        #[test]
        fn any_bytes_parse_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            for kind in [ProtocolKind::Text, ProtocolKind::Binary, ProtocolKind::Resp] {
                if let Ok(Some((used, _))) = kind.create().parse_one(&bytes) {
                    proptest::prop_assert!(used > 0 && used <= bytes.len());
                }
            }
        }
    }

    #[test]
    fn binary_round_trip_and_splits() {
        let mut p = MemcachedBinary;
        let mut req = Vec::new();
        p.encode(&get(b"abc"), &mut req);
        assert_eq!(req.len(), 24 + 3);
        assert_eq!(&req[..2], &[0x80, 0x00]);
        assert_eq!(&req[2..4], &3u16.to_be_bytes());
        assert_eq!(&req[8..12], &3u32.to_be_bytes());
        req.clear();
        p.encode(
            &Request {
                op: Op::Set,
                key: b"abc",
                value: b"12345",
            },
            &mut req,
        );
        assert_eq!(req[4], 8);
        assert_eq!(&req[8..12], &16u32.to_be_bytes());
        assert_eq!(req.len(), 24 + 16);

        let reply = |opcode: u8, status: u16, body: &[u8]| {
            let mut r = vec![0x81, opcode, 0, 0, 0, 0];
            r.extend_from_slice(&status.to_be_bytes());
            r.extend_from_slice(&u32::try_from(body.len()).expect("small").to_be_bytes());
            r.extend_from_slice(&[0; 12]);
            r.extend_from_slice(body);
            r
        };
        let mut stream = reply(0x01, 0, b"");
        stream.extend(reply(0x00, 0, b"\0\0\0\0value"));
        stream.extend(reply(0x00, 1, b"Not found"));
        stream.extend(reply(0x01, 0x82, b"Out of memory"));
        for split in 0..=stream.len() {
            let mut counts = ReplyCounts::default();
            let used = p.parse_all(&stream[..split], &mut counts).expect("valid");
            let used2 = p.parse_all(&stream[used..], &mut counts).expect("valid");
            assert_eq!(used + used2, stream.len());
            assert_eq!(
                counts,
                ReplyCounts {
                    replies: 4,
                    hits: 1,
                    misses: 1,
                    stored: 1,
                    errors: 1
                },
                "split {split}"
            );
        }
        assert!(
            matches!(p.parse_one(&[0x80; 24]), Err(ProtocolError(e)) if e.contains("not 0x81"))
        );
    }
}
