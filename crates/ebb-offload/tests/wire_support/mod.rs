//! What the `request` fuzz target and its corpus replay check: the input
//! is read as a request, a reply and a directory listing, for the message
//! number its first byte chooses. Nothing may panic, and whatever decodes
//! encodes back to exactly the bytes it came from (the layouts are
//! canonical: one encoding per value, so a decoder that accepted two
//! spellings of one request would fail here).

use ebb_messenger::MessageNumber;
use ebb_offload::{decode_listing, encode_listing, DecodeError, Reply, Request};

/// What one input gave.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The request's decoding.
    pub request: Option<Result<Request, DecodeError>>,
    /// The reply's.
    pub reply: Option<Result<Reply, DecodeError>>,
    /// How many listing entries decoded (the count is the next 2 bytes).
    pub listing: Option<Result<usize, DecodeError>>,
}

/// Runs the decoders on `data`: byte 0 is the message number (0 to 12:
/// the eleven operations and two that are none), the rest the control
/// (and, after a 2-byte count, the listing).
pub fn run(data: &[u8]) -> Outcome {
    let Some((&number, control)) = data.split_first() else {
        return Outcome::default();
    };
    let number = MessageNumber(u32::from(number % 13));
    let request = Request::decode(number, control);
    if let Ok(request) = &request {
        assert_eq!(
            request.encode().as_deref(),
            Ok(control),
            "a decoded request encodes back to its bytes"
        );
        assert_eq!(request.number(), number);
    }
    let reply = Reply::decode(number, control);
    if let Ok(reply) = &reply {
        assert_eq!(reply.encode(), control, "a decoded reply encodes back");
    }
    let listing = (control.len() >= 2).then(|| {
        let count = u16::from_le_bytes([control[0], control[1]]);
        let entries = decode_listing(&control[2..], u32::from(count))?;
        assert_eq!(
            encode_listing(&entries),
            &control[2..],
            "a listing encodes back"
        );
        Ok(entries.len())
    });
    Outcome {
        request: Some(request),
        reply: Some(reply),
        listing,
    }
}
