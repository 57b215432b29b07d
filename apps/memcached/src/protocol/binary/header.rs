//! The 24-byte request and response headers.

use ebb_iobuf::{Header, IoBufMut};

use super::opcodes::RESPONSE_MAGIC;

/// Size of a request or response header.
pub const HEADER_LEN: usize = 24;

/// A request header, fields in host order (the opaque is kept as sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// Must be [`super::REQUEST_MAGIC`].
    pub magic: u8,
    /// The command.
    pub opcode: u8,
    /// Key length.
    pub keylen: u16,
    /// Extras length.
    pub extlen: u8,
    /// Data type (ignored, as memcached does).
    pub datatype: u8,
    /// vbucket id (ignored).
    pub vbucket: u16,
    /// Extras + key + value length.
    pub bodylen: u32,
    /// Echoed in the response.
    pub opaque: [u8; 4],
    /// Compare-and-swap value.
    pub cas: u64,
}

impl Header for RequestHeader {
    const LEN: usize = HEADER_LEN;

    fn from_bytes(b: &[u8]) -> Self {
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&b[..HEADER_LEN]);
        RequestHeader {
            magic: h[0],
            opcode: h[1],
            keylen: u16::from_be_bytes([h[2], h[3]]),
            extlen: h[4],
            datatype: h[5],
            vbucket: u16::from_be_bytes([h[6], h[7]]),
            bodylen: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
            opaque: [h[12], h[13], h[14], h[15]],
            cas: u64::from_be_bytes([h[16], h[17], h[18], h[19], h[20], h[21], h[22], h[23]]),
        }
    }
}

/// A response header.
#[derive(Clone, Copy, Debug)]
pub struct ResponseHeader {
    /// The request's opcode (quiet variants keep theirs).
    pub opcode: u8,
    /// Status code.
    pub status: u16,
    /// Extras length.
    pub extlen: u8,
    /// Key length.
    pub keylen: u16,
    /// Extras + key + value length.
    pub bodylen: u32,
    /// The request's opaque.
    pub opaque: [u8; 4],
    /// CAS value.
    pub cas: u64,
}

impl ResponseHeader {
    /// Appends the header to `buf`.
    pub fn write(&self, buf: &mut IoBufMut) {
        buf.put_u8(RESPONSE_MAGIC);
        buf.put_u8(self.opcode);
        buf.put_u16_be(self.keylen);
        buf.put_u8(self.extlen);
        buf.put_u8(0);
        buf.put_u16_be(self.status);
        buf.put_u32_be(self.bodylen);
        buf.extend_from_slice(&self.opaque);
        buf.put_u64_be(self.cas);
    }
}
