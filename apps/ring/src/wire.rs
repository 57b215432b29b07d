//! The worker Ebb's messages and their control structures: fixed
//! little-endian layouts, as the Messenger's own (see `docs/messenger.md`);
//! the data itself is the payload, never copied.
//!
//! | message | control | payload | reply control |
//! | --- | --- | --- | --- |
//! | [`WORK`] | [`WorkOrder`]: round u32, slice u32 | the slice | [`WorkDone`]: round u32, digest u64 |
//! | [`TOKEN`] | [`Token`]: round u32, total u64, hops u16, hop timeout u32 (ms), then node u32 + worker u32 per hop | none | [`TokenReply`]: status u32, node u32, total u64 (a broken ring's reason as UTF-8 in the payload) |

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use ebb_core::{EbbId, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Message, MessageNumber};

/// Work on a slice: the node computes its digest, keeps it for the round
/// and replies with it.
pub const WORK: MessageNumber = MessageNumber(1);
/// The token: the node adds its digest of the round to the total and
/// passes the token on to the next hop itself; the reply is the last
/// node's.
pub const TOKEN: MessageNumber = MessageNumber(2);

/// The refusal code of a control structure that does not decode.
pub const BAD_CONTROL: u32 = 1;

/// A node of the ring: the node and its worker Ebb (the first id of the
/// node's global range).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerNode {
    /// The node.
    pub node: NodeId,
    /// Its worker Ebb.
    pub worker: EbbId,
}

/// A control structure that does not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadControl {
    /// What it was to be.
    pub what: &'static str,
    /// Its length.
    pub len: usize,
}

impl fmt::Display for BadControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a {} control of {} bytes does not decode",
            self.what, self.len
        )
    }
}

/// [`WORK`]'s control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkOrder {
    /// The round.
    pub round: u32,
    /// Which slice of the round's data this is.
    pub slice: u32,
}

/// [`WORK`]'s reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkDone {
    /// The round.
    pub round: u32,
    /// The slice's digest.
    pub digest: u64,
}

/// [`TOKEN`]'s control.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The round.
    pub round: u32,
    /// The digests added so far (wrapping).
    pub total: u64,
    /// The nodes still to visit after the receiving one, in order.
    pub hops: Vec<WorkerNode>,
    /// The unit of the calls' bounds, in milliseconds: the receiving node
    /// gives its call to the next hop [`crate::token_bound`] of it (the
    /// frontend's `--call-timeout`).
    pub hop_timeout_ms: u32,
}

/// A token with more hops than its layout holds ([`Token::MAX_HOPS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyHops {
    /// The hops it was to list.
    pub hops: usize,
}

impl fmt::Display for TooManyHops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a token cannot list {} hops (at most {})",
            self.hops,
            Token::MAX_HOPS
        )
    }
}

/// [`TOKEN`]'s reply: how the ring ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenReply {
    /// Status 0: every node added its digest; the total.
    Done {
        /// The ring's total.
        total: u64,
    },
    /// Status 1: the call to node `at` failed (the reason, as text).
    Broken {
        /// The node that could not be called.
        at: NodeId,
        /// Why.
        why: String,
    },
    /// Status 2: node `at` has no digest for the round (it got no work).
    NoWork {
        /// The node.
        at: NodeId,
    },
}

impl WorkOrder {
    /// As a message with the slice as payload.
    #[must_use]
    pub fn message(self, slice: IoChain) -> Message {
        Message {
            control: control(&[&self.round.to_le_bytes(), &self.slice.to_le_bytes()]),
            payload: slice,
        }
    }

    /// Decodes the control.
    ///
    /// # Errors
    ///
    /// Not 8 bytes.
    pub fn decode(control: &IoChain) -> Result<WorkOrder, BadControl> {
        let bytes = exactly::<8>(control, "work order")?;
        Ok(WorkOrder {
            round: u32_at(&bytes, 0),
            slice: u32_at(&bytes, 4),
        })
    }
}

impl WorkDone {
    /// As a reply.
    #[must_use]
    pub fn message(self) -> Message {
        Message {
            control: control(&[&self.round.to_le_bytes(), &self.digest.to_le_bytes()]),
            payload: IoChain::new(),
        }
    }

    /// Decodes the control.
    ///
    /// # Errors
    ///
    /// Not 12 bytes.
    pub fn decode(control: &IoChain) -> Result<WorkDone, BadControl> {
        let bytes = exactly::<12>(control, "work reply")?;
        Ok(WorkDone {
            round: u32_at(&bytes, 0),
            digest: u64_at(&bytes, 4),
        })
    }
}

impl Token {
    /// Bytes before the hops.
    const FIXED_LEN: usize = 18;
    /// Bytes per hop.
    const HOP_LEN: usize = 8;

    /// The most hops a token lists (its count is a u16): a ring of at most
    /// 65,536 nodes.
    pub const MAX_HOPS: usize = u16::MAX as usize;

    /// As a message.
    ///
    /// # Errors
    ///
    /// More than [`Token::MAX_HOPS`] hops (never cut short: a token that
    /// skipped nodes would come back with a wrong total).
    pub fn message(&self) -> Result<Message, TooManyHops> {
        let hops = u16::try_from(self.hops.len()).map_err(|_| TooManyHops {
            hops: self.hops.len(),
        })?;
        let mut bytes = Vec::with_capacity(Self::FIXED_LEN + Self::HOP_LEN * self.hops.len());
        bytes.extend_from_slice(&self.round.to_le_bytes());
        bytes.extend_from_slice(&self.total.to_le_bytes());
        bytes.extend_from_slice(&hops.to_le_bytes());
        bytes.extend_from_slice(&self.hop_timeout_ms.to_le_bytes());
        for hop in &self.hops {
            bytes.extend_from_slice(&hop.node.0.to_le_bytes());
            bytes.extend_from_slice(&hop.worker.raw().to_le_bytes());
        }
        Ok(Message {
            control: IoChain::from(IoBuf::from_vec(bytes)),
            payload: IoChain::new(),
        })
    }

    /// Decodes the control.
    ///
    /// # Errors
    ///
    /// A length that is not 18 + 8 × hops, or a hop naming no valid Ebb id.
    pub fn decode(control: &IoChain) -> Result<Token, BadControl> {
        let bad = BadControl {
            what: "token",
            len: control.len(),
        };
        let bytes = control.to_vec();
        if bytes.len() < Self::FIXED_LEN {
            return Err(bad);
        }
        let hops = usize::from(u16::from_le_bytes([bytes[12], bytes[13]]));
        if bytes.len() != Self::FIXED_LEN + Self::HOP_LEN * hops {
            return Err(bad);
        }
        let hops = bytes[Self::FIXED_LEN..]
            .chunks_exact(Self::HOP_LEN)
            .map(|hop| {
                Ok(WorkerNode {
                    node: NodeId(u32_at(hop, 0)),
                    worker: EbbId::new(u32_at(hop, 4)).map_err(|_| bad)?,
                })
            })
            .collect::<Result<_, BadControl>>()?;
        Ok(Token {
            round: u32_at(&bytes, 0),
            total: u64_at(&bytes, 4),
            hops,
            hop_timeout_ms: u32_at(&bytes, 14),
        })
    }
}

impl TokenReply {
    /// As a reply.
    #[must_use]
    pub fn message(&self) -> Message {
        let (status, node, total, why): (u32, NodeId, u64, &str) = match self {
            TokenReply::Done { total } => (0, NodeId(0), *total, ""),
            TokenReply::Broken { at, why } => (1, *at, 0, why),
            TokenReply::NoWork { at } => (2, *at, 0, ""),
        };
        Message {
            control: control(&[
                &status.to_le_bytes(),
                &node.0.to_le_bytes(),
                &total.to_le_bytes(),
            ]),
            payload: if why.is_empty() {
                IoChain::new()
            } else {
                IoChain::from(IoBuf::copy_from_slice(why.as_bytes()))
            },
        }
    }

    /// Decodes a reply.
    ///
    /// # Errors
    ///
    /// A control that is not 16 bytes, or an unknown status.
    pub fn decode(reply: &Message) -> Result<TokenReply, BadControl> {
        let bytes = exactly::<16>(&reply.control, "token reply")?;
        let at = NodeId(u32_at(&bytes, 4));
        match u32_at(&bytes, 0) {
            0 => Ok(TokenReply::Done {
                total: u64_at(&bytes, 8),
            }),
            1 => Ok(TokenReply::Broken {
                at,
                why: String::from_utf8_lossy(&reply.payload.to_vec()).into_owned(),
            }),
            2 => Ok(TokenReply::NoWork { at }),
            _ => Err(BadControl {
                what: "token reply",
                len: bytes.len(),
            }),
        }
    }
}

/// A control chain of `parts`, in one buffer.
fn control(parts: &[&[u8]]) -> IoChain {
    IoChain::from(IoBuf::from_vec(parts.concat()))
}

fn exactly<const N: usize>(control: &IoChain, what: &'static str) -> Result<[u8; N], BadControl> {
    let mut bytes = [0; N];
    if control.len() != N || control.copy_to_slice(&mut bytes).is_err() {
        return Err(BadControl {
            what,
            len: control.len(),
        });
    }
    Ok(bytes)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    fn worker(node: u32) -> WorkerNode {
        WorkerNode {
            node: NodeId(node),
            worker: EbbId::new(0x8000 + node * 64).unwrap(),
        }
    }

    #[test]
    fn controls_have_the_documented_layout_and_round_trip() {
        let order = WorkOrder { round: 3, slice: 2 };
        let message = order.message(IoChain::new());
        assert_eq!(message.control.to_vec(), [3, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(WorkOrder::decode(&message.control), Ok(order));
        let done = WorkDone {
            round: 3,
            digest: 0x0102_0304_0506_0708,
        };
        assert_eq!(
            done.message().control.to_vec(),
            [3, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1]
        );
        assert_eq!(WorkDone::decode(&done.message().control), Ok(done));
        let token = Token {
            round: 1,
            total: 9,
            hops: vec![worker(2), worker(3)],
            hop_timeout_ms: 1500,
        };
        let bytes = token.message().unwrap().control.to_vec();
        assert_eq!(bytes.len(), 18 + 16);
        assert_eq!(bytes[12..20], [2, 0, 0xdc, 5, 0, 0, 2, 0]);
        assert_eq!(Token::decode(&token.message().unwrap().control), Ok(token));
        let huge = Token {
            round: 1,
            total: 0,
            hops: vec![worker(2); Token::MAX_HOPS + 1],
            hop_timeout_ms: 1,
        };
        assert_eq!(
            huge.message().map(|_| ()),
            Err(TooManyHops { hops: 65_536 })
        );
        assert_eq!(
            TooManyHops { hops: 65_536 }.to_string(),
            "a token cannot list 65536 hops (at most 65535)"
        );
        let most = Token {
            hops: vec![worker(2); Token::MAX_HOPS],
            ..huge
        };
        let control = most.message().unwrap().control;
        assert_eq!(Token::decode(&control), Ok(most));
        for reply in [
            TokenReply::Done { total: 77 },
            TokenReply::Broken {
                at: NodeId(2),
                why: "node 2 was lost".into(),
            },
            TokenReply::NoWork { at: NodeId(3) },
        ] {
            assert_eq!(TokenReply::decode(&reply.message()), Ok(reply));
        }
    }

    #[test]
    fn malformed_controls_are_errors() {
        let chain = |bytes: &[u8]| IoChain::from(IoBuf::copy_from_slice(bytes));
        assert_eq!(
            WorkOrder::decode(&chain(&[0; 7])),
            Err(BadControl {
                what: "work order",
                len: 7
            })
        );
        assert_eq!(
            WorkDone::decode(&chain(&[0; 13])).unwrap_err().what,
            "work reply"
        );
        // Says one hop, carries none.
        let mut token = [0u8; 18];
        token[12] = 1;
        assert_eq!(Token::decode(&chain(&token)).unwrap_err().len, 18);
        // A hop naming Ebb id 0 (no valid id).
        let mut zero_id = vec![0u8; 26];
        zero_id[12] = 1;
        assert_eq!(Token::decode(&chain(&zero_id)).unwrap_err().what, "token");
        let mut unknown = TokenReply::Done { total: 1 }.message();
        unknown.control = chain(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            TokenReply::decode(&unknown).unwrap_err().what,
            "token reply"
        );
    }
}
