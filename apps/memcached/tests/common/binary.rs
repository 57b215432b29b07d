//! Binary protocol requests for the tests: opcodes (the server's own
//! names for memcached's `protocol_binary.h`) and a request builder whose
//! `bodylen` may lie.

pub use memcached::protocol::binary::opcodes::*;

/// Shorter names for incr/decr.
pub const INCR: u8 = INCREMENT;
pub const DECR: u8 = DECREMENT;
pub const INCRQ: u8 = INCREMENTQ;
pub const DECRQ: u8 = DECREMENTQ;

/// A request; its bodylen may lie.
#[derive(Clone)]
pub struct Req {
    pub magic: u8,
    pub opcode: u8,
    pub key: Vec<u8>,
    pub extras: Vec<u8>,
    pub value: Vec<u8>,
    pub cas: u64,
    pub opaque: u32,
    pub bodylen: Option<u32>,
}

pub fn req(opcode: u8, key: &[u8]) -> Req {
    Req {
        magic: 0x80,
        opcode,
        key: key.to_vec(),
        extras: Vec::new(),
        value: Vec::new(),
        cas: 0,
        opaque: 0,
        bodylen: None,
    }
}

impl Req {
    pub fn extras(mut self, extras: &[u8]) -> Req {
        self.extras = extras.to_vec();
        self
    }
    pub fn value(mut self, value: &[u8]) -> Req {
        self.value = value.to_vec();
        self
    }
    pub fn cas(mut self, cas: u64) -> Req {
        self.cas = cas;
        self
    }
    pub fn opaque(mut self, opaque: u32) -> Req {
        self.opaque = opaque;
        self
    }
    pub fn bodylen(mut self, bodylen: u32) -> Req {
        self.bodylen = Some(bodylen);
        self
    }
    pub fn magic(mut self, magic: u8) -> Req {
        self.magic = magic;
        self
    }
    pub fn bytes(&self) -> Vec<u8> {
        let keylen = u16::try_from(self.key.len()).unwrap();
        let extlen = u8::try_from(self.extras.len()).unwrap();
        let body = self.extras.len() + self.key.len() + self.value.len();
        let bodylen = self.bodylen.unwrap_or(u32::try_from(body).unwrap());
        let mut out = vec![self.magic, self.opcode];
        out.extend_from_slice(&keylen.to_be_bytes());
        out.push(extlen);
        out.push(0);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&bodylen.to_be_bytes());
        out.extend_from_slice(&self.opaque.to_be_bytes());
        out.extend_from_slice(&self.cas.to_be_bytes());
        out.extend_from_slice(&self.extras);
        out.extend_from_slice(&self.key);
        out.extend_from_slice(&self.value);
        out
    }
}

/// Extras of set/add/replace.
pub fn store_extras(flags: u32, exptime: u32) -> Vec<u8> {
    let mut e = flags.to_be_bytes().to_vec();
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

/// Extras of incr/decr.
pub fn delta_extras(delta: u64, initial: u64, exptime: u32) -> Vec<u8> {
    let mut e = delta.to_be_bytes().to_vec();
    e.extend_from_slice(&initial.to_be_bytes());
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

pub fn set(key: &[u8], value: &[u8], flags: u32, exptime: u32) -> Req {
    req(SET, key)
        .extras(&store_extras(flags, exptime))
        .value(value)
}
