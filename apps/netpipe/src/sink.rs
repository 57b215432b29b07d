//! The bulk throughput sink: transfers in, a count and a checksum out.
//!
//! A transfer is an 8-byte big-endian length and that many bytes. The bytes
//! are checksummed as they arrive and their buffers dropped at once (the
//! sink holds no data). When the last byte is in, the sink sends 12 bytes:
//! the count (8, big-endian) and the Adler-32 of the data (4, big-endian).
//! A connection can carry several transfers one after the other.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

use ebb_net::{AcceptFn, IoBuf, IoChain, TcpConnection, TcpHandler};

use crate::adler32::Adler32;

/// Bytes of a transfer's length prefix.
pub const SINK_HEADER_LEN: usize = 8;
/// Bytes of the sink's answer: count and checksum.
pub const SINK_REPLY_LEN: usize = 12;

/// One sink connection.
#[derive(Debug, Default)]
pub struct Sink {
    /// A partial length prefix.
    header: IoChain,
    /// The current transfer: bytes still expected, and the sum so far.
    transfer: Option<(u64, u64, Adler32)>,
    /// Transfers completed on this connection.
    completed: u64,
}

impl Sink {
    /// A connection waiting for its first transfer.
    pub fn new() -> Self {
        Sink::default()
    }

    /// Transfers completed so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Consumes `data`; returns the answers of the transfers it completes.
    pub fn receive(&mut self, mut data: IoChain) -> Vec<[u8; SINK_REPLY_LEN]> {
        let mut answers = Vec::new();
        while !data.is_empty() {
            match &mut self.transfer {
                None => {
                    let take = (SINK_HEADER_LEN - self.header.len()).min(data.len());
                    let mut piece = data.split_to(take).expect("within data");
                    self.header.append(&mut piece);
                    if self.header.len() == SINK_HEADER_LEN {
                        let mut prefix = [0u8; SINK_HEADER_LEN];
                        self.header.copy_to_slice(&mut prefix).expect("eight bytes");
                        self.header.clear();
                        let total = u64::from_be_bytes(prefix);
                        self.transfer = Some((total, total, Adler32::new()));
                    }
                }
                Some((_, left, sum)) => {
                    let take = usize::try_from(*left).unwrap_or(usize::MAX).min(data.len());
                    let piece = data.split_to(take).expect("within data");
                    for segment in piece.segments() {
                        sum.update(segment.as_slice());
                    }
                    *left -= piece.len() as u64;
                    // `piece` and its receive buffers are dropped here.
                }
            }
            if let Some((total, 0, sum)) = self.transfer {
                let mut answer = [0u8; SINK_REPLY_LEN];
                answer[..8].copy_from_slice(&total.to_be_bytes());
                answer[8..].copy_from_slice(&sum.value().to_be_bytes());
                answers.push(answer);
                self.transfer = None;
                self.completed += 1;
            }
        }
        answers
    }
}

impl TcpHandler for Sink {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        for answer in self.receive(data) {
            if conn
                .send_or_buffer(IoChain::from(IoBuf::from_vec(answer.to_vec())))
                .is_err()
            {
                conn.abort();
                return;
            }
        }
    }
}

/// Handler factory for listeners.
pub fn sink_accept() -> AcceptFn {
    Arc::new(|_conn: &TcpConnection| Box::new(Sink::new()) as Box<dyn TcpHandler>)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transfer(data: &[u8]) -> Vec<u8> {
        let mut bytes = (data.len() as u64).to_be_bytes().to_vec();
        bytes.extend_from_slice(data);
        bytes
    }

    fn answer(data: &[u8]) -> [u8; SINK_REPLY_LEN] {
        let mut expected = [0u8; SINK_REPLY_LEN];
        expected[..8].copy_from_slice(&(data.len() as u64).to_be_bytes());
        expected[8..].copy_from_slice(&Adler32::of(data).to_be_bytes());
        expected
    }

    #[test]
    fn transfers_in_any_pieces_are_counted_and_summed() {
        let data: Vec<u8> = (0..50_000u32).map(|i| i.to_le_bytes()[0] ^ 0x5a).collect();
        let mut input = transfer(&data);
        input.extend(transfer(b""));
        input.extend(transfer(b"tail"));
        for piece_len in [1usize, 7, 4096, input.len()] {
            let mut sink = Sink::new();
            let mut answers = Vec::new();
            for piece in input.chunks(piece_len) {
                answers.extend(sink.receive(IoChain::from(IoBuf::copy_from_slice(piece))));
            }
            assert_eq!(
                answers,
                [answer(&data), answer(b""), answer(b"tail")],
                "pieces of {piece_len}"
            );
            assert_eq!(sink.completed(), 3);
        }
    }
}
