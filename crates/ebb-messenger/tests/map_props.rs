//! Properties of the global id map's protocol over the Messenger: every
//! request and every reply (every `MapError` variant included)
//! round-trips; arbitrary bytes, read as any operation's request or
//! reply, never panic the decoders, and what decodes re-encodes to the
//! same bytes (see `map_wire_support`); a value cut short or lengthened
//! never decodes.

mod map_wire_support;

use ebb_core::{Change, Lease, MapError, NodeId, Swap};
use ebb_messenger::map::{decode_reply, encode_reply, LayoutError, MapReply, MapRequest};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..24)
}

fn request() -> impl Strategy<Value = MapRequest> {
    prop_oneof![
        text().prop_map(|key| MapRequest::Get { key }),
        (text(), bytes(), proptest::option::of(any::<i64>())).prop_map(|(key, value, lease)| {
            MapRequest::Set {
                key,
                value,
                lease: lease.map(Lease),
            }
        }),
        text().prop_map(|key| MapRequest::Delete { key }),
        (text(), proptest::option::of(bytes()), bytes())
            .prop_map(|(key, expected, new)| MapRequest::CompareAndSwap { key, expected, new }),
        text().prop_map(|prefix| MapRequest::List { prefix }),
        (any::<u32>(), any::<u32>()).prop_map(|(node, len)| MapRequest::ReserveRange {
            node: NodeId(node),
            len
        }),
        any::<u64>().prop_map(|ttl_ms| MapRequest::GrantLease { ttl_ms }),
        any::<i64>().prop_map(|lease| MapRequest::KeepAlive(Lease(lease))),
        any::<i64>().prop_map(|lease| MapRequest::Revoke(Lease(lease))),
        text().prop_map(|prefix| MapRequest::Watch { prefix }),
        (any::<u64>(), any::<u32>())
            .prop_map(|(watch, wait_ms)| MapRequest::NextChanges { watch, wait_ms }),
        any::<u64>().prop_map(|watch| MapRequest::Unwatch { watch }),
    ]
}

fn error() -> impl Strategy<Value = MapError> {
    prop_oneof![
        (text(), text()).prop_map(|(endpoint, reason)| MapError::Unreachable { endpoint, reason }),
        (text(), text()).prop_map(|(key, why)| MapError::InvalidKey { key, why }),
        (any::<u32>(), any::<u32>())
            .prop_map(|(wanted, left)| MapError::IdsExhausted { wanted, left }),
        any::<i64>().prop_map(|lease| MapError::LeaseExpired(Lease(lease))),
        (text(), text()).prop_map(|(key, why)| MapError::Corrupt { key, why }),
        text().prop_map(MapError::Refused),
        text().prop_map(MapError::WatchEnded),
        (text(), text())
            .prop_map(|(endpoint, reason)| MapError::OutcomeUnknown { endpoint, reason }),
    ]
}

/// A successful reply to `request`'s operation.
fn value_for(request: &MapRequest) -> BoxedStrategy<MapReply> {
    match request {
        MapRequest::Set { .. }
        | MapRequest::KeepAlive(_)
        | MapRequest::Revoke(_)
        | MapRequest::Unwatch { .. } => Just(MapReply::Done).boxed(),
        MapRequest::Get { .. } => proptest::option::of(bytes())
            .prop_map(MapReply::Value)
            .boxed(),
        MapRequest::Delete { .. } => any::<bool>().prop_map(MapReply::Deleted).boxed(),
        MapRequest::CompareAndSwap { .. } => prop_oneof![
            Just(MapReply::Swap(Swap::Done)),
            proptest::option::of(bytes()).prop_map(|found| MapReply::Swap(Swap::Conflict(found))),
        ]
        .boxed(),
        MapRequest::List { .. } => proptest::collection::vec((text(), bytes()), 0..5)
            .prop_map(MapReply::Entries)
            .boxed(),
        MapRequest::ReserveRange { .. } => (0u32..u32::MAX, 1u32..1000)
            .prop_map(|(start, len)| {
                MapReply::Range(start..start.saturating_add(len).max(start + 1))
            })
            .boxed(),
        MapRequest::GrantLease { .. } => any::<i64>()
            .prop_map(|lease| MapReply::Lease(Lease(lease)))
            .boxed(),
        MapRequest::Watch { .. } => any::<u64>().prop_map(MapReply::Watching).boxed(),
        MapRequest::NextChanges { .. } => proptest::collection::vec(
            (text(), proptest::option::of(bytes())).prop_map(|(key, value)| Change { key, value }),
            0..5,
        )
        .prop_map(MapReply::Changes)
        .boxed(),
    }
}

fn request_and_reply() -> impl Strategy<Value = (MapRequest, Result<MapReply, MapError>)> {
    request().prop_flat_map(|request| {
        let reply = prop_oneof![value_for(&request).prop_map(Ok), error().prop_map(Err)];
        (Just(request), reply)
    })
}

proptest! {
    #[test]
    fn requests_round_trip(request in request()) {
        let bytes = request.encode();
        prop_assert_eq!(MapRequest::decode(request.number(), &bytes), Ok(request.clone()));
        // Cut short or lengthened, it does not decode.
        if !bytes.is_empty() {
            let cut = MapRequest::decode(request.number(), &bytes[..bytes.len() - 1]);
            prop_assert!(
                matches!(cut, Err(LayoutError::Truncated { .. })),
                "{:?}", cut
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert_eq!(
            MapRequest::decode(request.number(), &longer),
            Err(LayoutError::Trailing { extra: 1 })
        );
    }

    #[test]
    fn replies_round_trip((request, reply) in request_and_reply()) {
        let bytes = encode_reply(&reply);
        prop_assert_eq!(decode_reply(request.number(), &bytes), Ok(reply));
        let cut = decode_reply(request.number(), &bytes[..bytes.len() - 1]);
        prop_assert!(matches!(cut, Err(LayoutError::Truncated { .. })), "{:?}", cut);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_what_decodes_is_canonical(
        data in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        map_wire_support::run(&data);
    }
}
