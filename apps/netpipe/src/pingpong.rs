//! The ping-pong server: a length-prefixed message in, its payload back.
//!
//! Messages are accumulated until complete, then returned whole, as
//! NetPIPE's receiver does (the reply does not start before the message has
//! fully arrived, so the round trip includes the full transfer both ways).
//! A message that arrived in a few pieces goes back as the very receive
//! buffers (no copy); once one spans more than [`ZERO_COPY_SEGMENTS`]
//! pieces it is copied into one buffer as it arrives, so large messages do
//! not hold on to many of the platform's receive buffers (as
//! apps/memcached does for large requests).

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

use ebb_net::{AcceptFn, IoBuf, IoChain, TcpConnection, TcpHandler};

/// Bytes of the length prefix (big-endian `u32`).
pub const PING_HEADER_LEN: usize = 4;
/// The largest message accepted; a larger length aborts the connection.
pub const MAX_MESSAGE_LEN: usize = 16 << 20;
/// Most receive buffers a message may hold before it is copied.
pub const ZERO_COPY_SEGMENTS: usize = 8;

/// What the handler is waiting for.
#[derive(Debug)]
enum Pending {
    /// The length prefix (possibly split across receives).
    Header,
    /// `len` payload bytes, kept as received.
    Chain { len: usize, chain: IoChain },
    /// `len` payload bytes, copied into one buffer.
    Copied { len: usize, bytes: Vec<u8> },
}

/// One ping-pong connection.
#[derive(Debug)]
pub struct PingPong {
    /// Received bytes not yet consumed (a partial header).
    input: IoChain,
    pending: Pending,
    /// Messages answered so far.
    answered: u64,
}

impl Default for PingPong {
    fn default() -> Self {
        PingPong::new()
    }
}

/// Why a connection is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PingPongError {
    /// The length prefix exceeds [`MAX_MESSAGE_LEN`].
    TooLong(usize),
}

impl PingPong {
    /// A connection waiting for its first message.
    pub fn new() -> Self {
        PingPong {
            input: IoChain::new(),
            pending: Pending::Header,
            answered: 0,
        }
    }

    /// Messages answered so far.
    pub fn answered(&self) -> u64 {
        self.answered
    }

    /// Consumes `data` and returns the replies it completes, in order.
    /// Pure protocol logic, so it can be tested without a network.
    pub fn receive(&mut self, data: IoChain) -> Result<Vec<IoChain>, PingPongError> {
        let mut replies = Vec::new();
        let mut data = data;
        self.input.append(&mut data);
        loop {
            match &mut self.pending {
                Pending::Header => {
                    if self.input.len() < PING_HEADER_LEN {
                        return Ok(replies);
                    }
                    let header = self
                        .input
                        .split_to(PING_HEADER_LEN)
                        .expect("length checked");
                    let mut prefix = [0u8; PING_HEADER_LEN];
                    header.copy_to_slice(&mut prefix).expect("four bytes");
                    let len = usize::try_from(u32::from_be_bytes(prefix)).unwrap_or(usize::MAX);
                    if len > MAX_MESSAGE_LEN {
                        return Err(PingPongError::TooLong(len));
                    }
                    self.pending = Pending::Chain {
                        len,
                        chain: IoChain::new(),
                    };
                }
                Pending::Chain { len, chain } => {
                    let want = *len - chain.len();
                    let take = want.min(self.input.len());
                    let mut piece = self.input.split_to(take).expect("within input");
                    chain.append(&mut piece);
                    if chain.len() == *len {
                        replies.push(core::mem::take(chain));
                        self.finish_message();
                    } else if chain.segment_count() > ZERO_COPY_SEGMENTS {
                        let mut bytes = Vec::with_capacity(*len);
                        bytes.extend(chain.segments().flat_map(|s| s.as_slice().iter().copied()));
                        self.pending = Pending::Copied { len: *len, bytes };
                    } else {
                        return Ok(replies);
                    }
                }
                Pending::Copied { len, bytes } => {
                    let want = *len - bytes.len();
                    let take = want.min(self.input.len());
                    let piece = self.input.split_to(take).expect("within input");
                    for segment in piece.segments() {
                        bytes.extend_from_slice(segment.as_slice());
                    }
                    if bytes.len() < *len {
                        return Ok(replies);
                    }
                    let whole = core::mem::take(bytes);
                    replies.push(IoChain::from(IoBuf::from_vec(whole)));
                    self.finish_message();
                }
            }
        }
    }

    fn finish_message(&mut self) {
        self.pending = Pending::Header;
        self.answered += 1;
    }
}

impl TcpHandler for PingPong {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        match self.receive(data) {
            Ok(replies) => {
                for reply in replies {
                    if conn.send_or_buffer(reply).is_err() {
                        conn.abort();
                        return;
                    }
                }
            }
            Err(PingPongError::TooLong(_)) => conn.abort(),
        }
    }
}

/// Handler factory for listeners.
pub fn ping_pong_accept() -> AcceptFn {
    Arc::new(|_conn: &TcpConnection| Box::new(PingPong::new()) as Box<dyn TcpHandler>)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload: &[u8]) -> Vec<u8> {
        let mut bytes = u32::try_from(payload.len())
            .expect("small")
            .to_be_bytes()
            .to_vec();
        bytes.extend_from_slice(payload);
        bytes
    }

    fn chain(bytes: &[u8]) -> IoChain {
        IoChain::from(IoBuf::copy_from_slice(bytes))
    }

    #[test]
    fn whole_messages_come_back_and_pipelined_ones_in_order() {
        let mut server = PingPong::new();
        let mut input = message(b"a");
        input.extend(message(b"hello"));
        input.extend(message(b""));
        let replies = server.receive(chain(&input)).expect("ok");
        let bodies: Vec<Vec<u8>> = replies.iter().map(IoChain::to_vec).collect();
        assert_eq!(bodies, [b"a".to_vec(), b"hello".to_vec(), Vec::new()]);
        assert_eq!(server.answered(), 3);
    }

    #[test]
    fn split_headers_and_many_pieces_are_reassembled() {
        let payload: Vec<u8> = (0..100_000u32).map(|i| i.to_le_bytes()[1]).collect();
        let input = message(&payload);
        for piece_len in [1usize, 3, 1000, 4096, 70_000] {
            let mut server = PingPong::new();
            let mut replies = Vec::new();
            for piece in input.chunks(piece_len) {
                replies.extend(server.receive(chain(piece)).expect("ok"));
            }
            assert_eq!(replies.len(), 1, "piece length {piece_len}");
            assert_eq!(replies[0].to_vec(), payload, "piece length {piece_len}");
        }
    }

    #[test]
    fn a_few_pieces_go_back_without_copying() {
        let mut server = PingPong::new();
        let first = IoBuf::copy_from_slice(&message(b"0123456789")[..8]);
        let second = IoBuf::copy_from_slice(b"456789");
        let first_ptr = first.as_slice()[4..].as_ptr();
        assert!(server.receive(IoChain::from(first)).expect("ok").is_empty());
        let reply = server.receive(IoChain::from(second)).expect("ok").remove(0);
        assert_eq!(reply.to_vec(), b"0123456789");
        assert_eq!(
            reply
                .segments()
                .next()
                .expect("a segment")
                .as_slice()
                .as_ptr(),
            first_ptr
        );
    }

    #[test]
    fn oversized_lengths_are_refused() {
        let mut server = PingPong::new();
        let len = u32::try_from(MAX_MESSAGE_LEN + 1).expect("fits");
        assert_eq!(
            server
                .receive(chain(&len.to_be_bytes()))
                .expect_err("too long"),
            PingPongError::TooLong(MAX_MESSAGE_LEN + 1)
        );
    }
}
