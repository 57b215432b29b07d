//! What the `map` fuzz target checks on one input, shared with the stable
//! test that replays its corpus (`tests/map_fuzz_corpus.rs`).
//!
//! The input's first byte chooses the operation (its message number, 0
//! to 13: 0 and 13 name none), the second whether the rest is read as
//! the request (even) or as the reply (odd). Checks: decoding never
//! panics, and whatever decodes re-encodes to the same bytes (the layout
//! has one encoding per value, so a decoder that accepts more than it
//! should shows up as a difference).

use ebb_messenger::map::{decode_reply, encode_reply, LayoutError, MapReply, MapRequest};
use ebb_messenger::MessageNumber;

/// What one input decoded to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Under two bytes: nothing was decoded.
    TooShort,
    /// Read as a request.
    Request(Result<MapRequest, LayoutError>),
    /// Read as a reply.
    Reply(Result<Result<MapReply, ebb_core::MapError>, LayoutError>),
}

/// Runs the checks on one input.
pub fn run(data: &[u8]) -> Outcome {
    let [operation, side, body @ ..] = data else {
        return Outcome::TooShort;
    };
    let number = MessageNumber(u32::from(*operation % 14));
    if side % 2 == 0 {
        let decoded = MapRequest::decode(number, body);
        if let Ok(request) = &decoded {
            assert_eq!(request.number(), number);
            assert_eq!(request.encode(), body, "{request:?} re-encodes differently");
        }
        Outcome::Request(decoded)
    } else {
        let decoded = decode_reply(number, body);
        if let Ok(reply) = &decoded {
            assert_eq!(
                encode_reply(reply),
                body,
                "{reply:?} re-encodes differently"
            );
        }
        Outcome::Reply(decoded)
    }
}
