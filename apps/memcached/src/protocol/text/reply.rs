//! A reply under construction, with memcached's `noreply` rules.

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoChain};

use crate::protocol::common::KEY_MAX_LENGTH;

/// Reply buffers for one request. Nothing reaches the connection unless
/// the request completes.
pub struct Reply {
    /// The reply so far.
    pub chain: IoChain,
    /// memcached's `c->noreply`: `string` replies are dropped.
    pub noreply: bool,
}

impl Default for Reply {
    fn default() -> Self {
        Self::new()
    }
}

impl Reply {
    /// An empty reply.
    pub fn new() -> Self {
        Reply {
            chain: IoChain::new(),
            noreply: false,
        }
    }

    /// Refuses a key longer than memcached's limit with its reply; says
    /// whether it did.
    pub fn refuse_long_key(&mut self, key: &[u8]) -> bool {
        let refused = key.len() > KEY_MAX_LENGTH;
        if refused {
            self.string(b"CLIENT_ERROR bad command line format");
        }
        refused
    }

    /// memcached's `out_string`: a status line, unless noreply. Replaces
    /// anything built so far (memcached resets the response object).
    pub fn string(&mut self, text: &'static [u8]) {
        self.chain.clear();
        if !self.noreply {
            self.chain.push_back(IoBuf::from_static(text));
            self.chain.push_back(IoBuf::from_static(b"\r\n"));
        }
    }

    /// memcached's `out_errstring`: a status line even under noreply.
    pub fn error(&mut self, text: &'static [u8]) {
        self.noreply = false;
        self.string(text);
    }

    /// A built line (which must end with `\r\n`), unless noreply.
    pub fn line(&mut self, line: Vec<u8>) {
        self.chain.clear();
        if !self.noreply {
            self.chain.push_back(IoBuf::from_vec(line));
        }
    }

    /// Appends a buffer regardless of noreply.
    pub fn push(&mut self, buf: IoBuf) {
        if !buf.is_empty() {
            self.chain.push_back(buf);
        }
    }
}
