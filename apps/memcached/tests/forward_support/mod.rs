//! The checks the `forward` fuzz target and the tests share: an input is
//! decoded as a forwarded request, as a reply and as a shard map; nothing
//! may panic, and whatever decodes must encode back to the very bytes it
//! came from (the layouts have one encoding for each value, so a decoder
//! that accepts anything else is lax).

use memcached::cluster::{ForwardError, ForwardReply, ForwardRequest, ShardMap, ShardMapError};

/// What an input decoded to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// As a request.
    pub request: Option<Result<(), ForwardError>>,
    /// As a reply.
    pub reply: Option<Result<(), ForwardError>>,
    /// As a shard map.
    pub shard_map: Option<Result<(), ShardMapError>>,
}

/// A fuzz input: the first byte is the payload's length, the rest the
/// control (and, whole, a shard map).
pub fn run(data: &[u8]) -> Outcome {
    let Some((&payload, control)) = data.split_first() else {
        return Outcome::default();
    };
    let (request, reply) = check_controls(control, usize::from(payload));
    Outcome {
        request: Some(request),
        reply: Some(reply),
        shard_map: Some(check_shard_map(data).map(drop)),
    }
}

/// Decodes `control` both ways with a payload of `payload` bytes.
pub fn check_controls(
    control: &[u8],
    payload: usize,
) -> (Result<(), ForwardError>, Result<(), ForwardError>) {
    let request = ForwardRequest::decode(control, payload).map(|request| {
        let again = request.encode().expect("a decoded request encodes");
        assert_eq!(again, control, "request {request:?} re-encodes differently");
    });
    let reply = ForwardReply::decode(control, payload).map(|reply| {
        let again = reply.encode().expect("a decoded reply encodes");
        assert_eq!(again, control, "reply {reply:?} re-encodes differently");
    });
    (request, reply)
}

/// Decodes `bytes` as a shard map.
pub fn check_shard_map(bytes: &[u8]) -> Result<ShardMap, ShardMapError> {
    ShardMap::decode(bytes).inspect(|map| {
        assert_eq!(map.encode(), bytes, "{map:?} re-encodes differently");
    })
}
