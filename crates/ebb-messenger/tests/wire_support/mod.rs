//! What the `wire` fuzz target checks on one input, shared with the stable
//! test that replays its corpus (`tests/wire_fuzz_corpus.rs`).
//!
//! The input's first byte chooses the piece size of the second framing
//! (1 to 64 bytes); the rest is the stream. Checks:
//! - `Header::decode` never panics, and a header it accepts re-encodes to
//!   the same 40 bytes;
//! - the control decoders (hello, error reply, announcement and its
//!   reply, loss notice) never panic, and what they accept re-encodes to
//!   the same bytes;
//! - framing the stream whole and in pieces gives the same frames and the
//!   same error, each frame's parts as long as its header says, and never
//!   more buffered than one header and one message within the limits.

use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{
    Announce, AnnounceReply, Deframer, ErrorReply, Frame, Header, Hello, Limits, LostNotice,
    WireError, HEADER_LEN,
};

/// Small limits, so that short inputs reach the length checks.
pub const LIMITS: Limits = Limits {
    max_control_len: 64,
    max_payload_len: 4096,
};

/// What one input did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the input's start decoded as a header.
    pub header: Option<Result<Header, WireError>>,
    /// Frames the stream held before its end or its first error.
    pub frames: usize,
    /// The framing error, if any.
    pub error: Option<WireError>,
}

/// Runs the checks on one input.
pub fn run(data: &[u8]) -> Outcome {
    let Some((&piece, stream)) = data.split_first() else {
        return Outcome::default();
    };
    let header = Header::decode(stream, &LIMITS);
    if let Ok(decoded) = header {
        assert_eq!(decoded.encode()[..], stream[..HEADER_LEN]);
    }
    let control = IoChain::from(IoBuf::copy_from_slice(stream));
    if let Ok(hello) = Hello::decode(&control) {
        assert_eq!(hello.encode()[..], *stream);
    }
    if let Ok(reply) = ErrorReply::decode(&control) {
        assert_eq!(reply.encode()[..], *stream);
    }
    if let Ok(announce) = Announce::decode(&control) {
        assert_eq!(announce.encode()[..], *stream);
    }
    if let Ok(reply) = AnnounceReply::decode(&control) {
        assert_eq!(reply.encode()[..], *stream);
    }
    if let Ok(notice) = LostNotice::decode(&control) {
        assert_eq!(notice.encode()[..], *stream);
    }
    let whole = frame(stream, stream.len().max(1));
    let pieces = frame(stream, usize::from(piece % 64) + 1);
    assert_eq!(
        whole.1, pieces.1,
        "the same error however the stream is cut"
    );
    assert_eq!(whole.0.len(), pieces.0.len());
    for (a, b) in whole.0.iter().zip(&pieces.0) {
        assert_eq!(a.header, b.header);
        assert_eq!(a.control, b.control);
        assert_eq!(a.payload, b.payload);
    }
    Outcome {
        header: Some(header),
        frames: whole.0.len(),
        error: whole.1,
    }
}

/// Frames `stream` pushed in pieces of `piece` bytes.
fn frame(stream: &[u8], piece: usize) -> (Vec<Frame>, Option<WireError>) {
    let most_buffered = HEADER_LEN
        + usize::try_from(LIMITS.max_control_len).unwrap()
        + usize::try_from(LIMITS.max_payload_len).unwrap()
        + piece;
    let mut deframer = Deframer::new(LIMITS);
    let mut frames = Vec::new();
    for chunk in stream.chunks(piece) {
        deframer.push(IoChain::from(IoBuf::copy_from_slice(chunk)));
        loop {
            match deframer.next_frame() {
                Ok(Some(frame)) => {
                    assert_eq!(
                        frame.control.len(),
                        usize::try_from(frame.header.control_len).unwrap()
                    );
                    assert_eq!(
                        frame.payload.len(),
                        usize::try_from(frame.header.payload_len).unwrap()
                    );
                    frames.push(frame);
                }
                Ok(None) => break,
                Err(error) => return (frames, Some(error)),
            }
        }
        assert!(deframer.buffered() <= most_buffered);
    }
    (frames, None)
}
