//! Properties of the wire format: every header and control structure
//! round-trips; decoding arbitrary bytes never panics and names the first
//! check that fails; a stream split anywhere frames into the same messages,
//! whose payloads are views of the received buffers (no copy).

// Test data takes the low bits of counters on purpose.
#![allow(clippy::cast_possible_truncation)]

use ebb_core::NodeId;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{
    encode_message, Deframer, ErrorReply, Header, Hello, Kind, Limits, MessageNumber, WireError,
    HEADER_LEN, MAGIC, MAX_NAMED_CORE, VERSION,
};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Hello),
        Just(Kind::OneWay),
        Just(Kind::Call),
        Just(Kind::Reply),
        Just(Kind::ErrorReply),
    ]
}

prop_compose! {
    fn any_header()(
        kind in kind(),
        destination: u32,
        message: u32,
        source: u32,
        correlation: u64,
        control_len: u32,
        payload_len: u32,
        core in proptest::option::of(0..=MAX_NAMED_CORE),
    ) -> Header {
        Header {
            kind,
            destination,
            message: MessageNumber(message),
            source: NodeId(source),
            correlation,
            control_len,
            payload_len,
            core,
        }
    }
}

const UNLIMITED: Limits = Limits {
    max_control_len: u32::MAX,
    max_payload_len: u32::MAX,
};

/// The first check `Header::decode` must fail, written out independently
/// from the documented layout.
fn expected_error(bytes: &[u8], limits: &Limits) -> Option<WireError> {
    let le16 = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let le32 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    if bytes.len() < HEADER_LEN {
        return Some(WireError::Truncated {
            needed: HEADER_LEN,
            available: bytes.len(),
        });
    }
    if bytes[0..4] != MAGIC {
        return Some(WireError::BadMagic {
            found: bytes[0..4].try_into().unwrap(),
        });
    }
    if le16(4) != VERSION {
        return Some(WireError::Version {
            theirs: le16(4),
            ours: VERSION,
        });
    }
    if ![0, 1, 2, 4, 12].contains(&le16(6)) {
        return Some(WireError::BadFlags { flags: le16(6) });
    }
    // Bytes 36..38 name a core (any value is valid); 38..40 are reserved.
    if le16(38) != 0 {
        return Some(WireError::Reserved {
            value: u32::from(le16(38)),
        });
    }
    if le32(20) > limits.max_control_len {
        return Some(WireError::ControlTooLong {
            len: le32(20),
            limit: limits.max_control_len,
        });
    }
    if le32(32) > limits.max_payload_len {
        return Some(WireError::PayloadTooLong {
            len: le32(32),
            limit: limits.max_payload_len,
        });
    }
    None
}

/// Bytes that are often almost a header: a valid one with a few bytes
/// changed, or cut short, or pure noise.
fn near_header() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        (
            any_header(),
            proptest::collection::vec((0..HEADER_LEN, any::<u8>()), 0..3),
            0..=HEADER_LEN,
        )
            .prop_map(|(header, edits, keep)| {
                let mut bytes = header.encode().to_vec();
                for (at, value) in edits {
                    bytes[at] = value;
                }
                bytes.truncate(keep.max(HEADER_LEN - 2));
                bytes
            }),
    ]
}

/// Cuts `bytes` at the given points (sorted, deduplicated) into separate
/// buffers, as TCP may deliver them.
fn split_at(bytes: &[u8], mut cuts: Vec<usize>) -> Vec<IoBuf> {
    cuts.retain(|&c| c > 0 && c < bytes.len());
    cuts.sort_unstable();
    cuts.dedup();
    let mut parts = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        if cut > start {
            parts.push(IoBuf::copy_from_slice(&bytes[start..cut]));
        }
        start = cut;
    }
    parts
}

proptest! {
    #[test]
    fn every_header_round_trips(header in any_header()) {
        prop_assert_eq!(Header::decode(&header.encode(), &UNLIMITED), Ok(header));
    }

    #[test]
    fn decoding_any_bytes_names_the_first_failed_check(
        bytes in near_header(),
        max_control_len: u32,
        max_payload_len: u32,
    ) {
        let limits = Limits { max_control_len, max_payload_len };
        let decoded = Header::decode(&bytes, &limits);
        match expected_error(&bytes, &limits) {
            Some(error) => prop_assert_eq!(decoded, Err(error)),
            None => prop_assert_eq!(decoded.map(|h| h.encode().to_vec()), Ok(bytes[..HEADER_LEN].to_vec())),
        }
    }

    #[test]
    fn control_structures_round_trip(max_control_len: u32, max_payload_len: u32, code in 1u16..=6, detail: u32) {
        let hello = Hello { limits: Limits { max_control_len, max_payload_len } };
        let chain = IoChain::from(IoBuf::copy_from_slice(&hello.encode()));
        prop_assert_eq!(Hello::decode(&chain), Ok(hello));
        let reply = match code {
            1 => ErrorReply::UnknownEbb(detail),
            2 => ErrorReply::UnknownMessage(detail),
            3 => ErrorReply::Refused(detail),
            4 => ErrorReply::ReplyTooLarge(detail),
            5 => ErrorReply::NoRepresentative(detail),
            _ => ErrorReply::NoSuchCore(detail),
        };
        let chain = IoChain::from(IoBuf::copy_from_slice(&reply.encode()));
        prop_assert_eq!(ErrorReply::decode(&chain), Ok(reply));
    }

    #[test]
    fn control_decoders_take_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
        let chain = IoChain::from(IoBuf::copy_from_slice(&bytes));
        let wrong_length = WireError::ControlLength { expected: 8, found: bytes.len() };
        match Hello::decode(&chain) {
            Ok(_) => prop_assert_eq!(bytes.len(), 8),
            Err(error) => prop_assert_eq!(error, wrong_length),
        }
        if bytes.len() != 8 {
            prop_assert_eq!(ErrorReply::decode(&chain), Err(wrong_length));
        } else if bytes[2..4] != [0, 0] {
            let value = u32::from(u16::from_le_bytes([bytes[2], bytes[3]]));
            prop_assert_eq!(ErrorReply::decode(&chain), Err(WireError::Reserved { value }));
        } else if !(1..=5).contains(&u16::from_le_bytes([bytes[0], bytes[1]])) {
            let code = u16::from_le_bytes([bytes[0], bytes[1]]);
            prop_assert_eq!(ErrorReply::decode(&chain), Err(WireError::UnknownErrorCode { code }));
        } else {
            let reply = ErrorReply::decode(&chain).unwrap();
            prop_assert_eq!(reply.encode().to_vec(), bytes);
        }
    }

    #[test]
    fn a_stream_split_anywhere_frames_into_the_same_messages_without_copies(
        messages in proptest::collection::vec(
            (kind(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..16), 0usize..3000),
            1..6,
        ),
        cuts in proptest::collection::vec(any::<usize>(), 0..24),
    ) {
        let mut stream = IoChain::new();
        for (i, (kind, correlation, control, payload_len)) in messages.iter().enumerate() {
            let payload: Vec<u8> = (0..*payload_len).map(|b| (b + i) as u8).collect();
            let header = Header {
                kind: *kind,
                destination: 256 + i as u32,
                message: MessageNumber(i as u32),
                source: NodeId(7),
                correlation: *correlation,
                control_len: 0,
                payload_len: 0,
                core: None,
            };
            let mut message = encode_message(
                header,
                control,
                IoChain::from(IoBuf::from_vec(payload)),
                &Limits::DEFAULT,
            ).unwrap();
            stream.append(&mut message);
        }
        let bytes = stream.to_vec();
        let cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        let parts = split_at(&bytes, cuts);
        let received: Vec<(usize, usize)> =
            parts.iter().map(|p| (p.as_ptr() as usize, p.len())).collect();

        let mut deframer = Deframer::new(Limits::DEFAULT);
        let mut frames = Vec::new();
        for part in parts {
            deframer.push(IoChain::from(part));
            while let Some(frame) = deframer.next_frame().unwrap() {
                frames.push(frame);
            }
        }
        prop_assert_eq!(frames.len(), messages.len());
        prop_assert_eq!(deframer.buffered(), 0);
        for (i, (frame, (kind, correlation, control, payload_len))) in
            frames.iter().zip(&messages).enumerate()
        {
            prop_assert_eq!(frame.header.kind, *kind);
            prop_assert_eq!(frame.header.correlation, *correlation);
            prop_assert_eq!(frame.header.destination, 256 + i as u32);
            prop_assert_eq!(frame.control.to_vec(), control.clone());
            let payload: Vec<u8> = (0..*payload_len).map(|b| (b + i) as u8).collect();
            prop_assert_eq!(frame.payload.to_vec(), payload);
            for view in frame.payload.segments().chain(frame.control.segments()) {
                let (ptr, len) = (view.as_ptr() as usize, view.len());
                prop_assert!(
                    received.iter().any(|&(start, plen)| ptr >= start && ptr + len <= start + plen),
                    "every view lies in a received buffer"
                );
            }
        }
    }
}
