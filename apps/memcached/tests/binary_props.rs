//! Property tests of the binary protocol handler: arbitrary bytes never
//! make it panic or consume more than it was given, and valid requests
//! give the same replies however the stream is cut into reads.

mod handler_support;

use handler_support::Harness;
use memcached::protocol::binary::BODY_SLACK;
use proptest::prelude::*;

/// A request with arbitrary header fields and body: mostly nonsense.
fn arbitrary_request() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(0x80u8), any::<u8>()],
        any::<u8>(),
        prop_oneof![0u16..8, 0u16..300, any::<u16>()],
        prop_oneof![0u8..24, any::<u8>()],
        prop_oneof![0u32..64, 0u32..70_000, any::<u32>()],
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..96),
    )
        .prop_map(|(magic, opcode, keylen, extlen, bodylen, cas, body)| {
            let mut out = vec![magic, opcode];
            out.extend_from_slice(&keylen.to_be_bytes());
            out.push(extlen);
            out.extend_from_slice(&[0, 0, 0]);
            out.extend_from_slice(&bodylen.to_be_bytes());
            out.extend_from_slice(&[1, 2, 3, 4]);
            out.extend_from_slice(&cas.to_be_bytes());
            out.extend_from_slice(&body);
            out
        })
}

fn header(opcode: u8, keylen: usize, extlen: usize, bodylen: usize, cas: u64) -> Vec<u8> {
    let mut out = vec![0x80, opcode];
    out.extend_from_slice(&u16::try_from(keylen).unwrap().to_be_bytes());
    out.push(u8::try_from(extlen).unwrap());
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&u32::try_from(bodylen).unwrap().to_be_bytes());
    out.extend_from_slice(&[9, 8, 7, 6]);
    out.extend_from_slice(&cas.to_be_bytes());
    out
}

fn build(opcode: u8, key: &[u8], extras: &[u8], value: &[u8], cas: u64) -> Vec<u8> {
    let mut out = header(
        opcode,
        key.len(),
        extras.len(),
        extras.len() + key.len() + value.len(),
        cas,
    );
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

/// A well-formed request of any command, on a few shared keys.
fn valid_request() -> impl Strategy<Value = Vec<u8>> {
    let key = prop_oneof![
        Just(b"a".to_vec()),
        Just(b"b".to_vec()),
        Just(b"num".to_vec())
    ];
    let value = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40),
        (0u64..1000).prop_map(|n| n.to_string().into_bytes()),
    ];
    let cas = prop_oneof![3 => Just(0u64), 1 => 1u64..6];
    (
        0usize..22,
        key,
        value,
        cas,
        any::<u32>(),
        0u32..3,
        any::<u64>(),
    )
        .prop_map(|(which, key, value, cas, flags, exptime, delta)| {
            let store_extras = [flags.to_be_bytes(), exptime.to_be_bytes()].concat();
            let mut delta_extras = (delta % 100).to_be_bytes().to_vec();
            delta_extras.extend_from_slice(&7u64.to_be_bytes());
            delta_extras
                .extend_from_slice(&(if exptime == 2 { u32::MAX } else { 0 }).to_be_bytes());
            match which {
                0 => build(0x01, &key, &store_extras, &value, cas),
                1 => build(0x11, &key, &store_extras, &value, cas),
                2 => build(0x02, &key, &store_extras, &value, cas),
                3 => build(0x13, &key, &store_extras, &value, cas),
                4 => build(0x0e, &key, &[], &value, cas),
                5 => build(0x1a, &key, &[], &value, cas),
                6 => build(0x00, &key, &[], &[], 0),
                7 => build(0x09, &key, &[], &[], 0),
                8 => build(0x0c, &key, &[], &[], 0),
                9 => build(0x0d, &key, &[], &[], 0),
                10 => build(0x04, &key, &[], &[], cas),
                11 => build(0x14, &key, &[], &[], cas),
                12 => build(0x05, &key, &delta_extras, &[], cas),
                13 => build(0x16, &key, &delta_extras, &[], cas),
                14 => build(0x1c, &key, &exptime.to_be_bytes(), &[], 0),
                15 => build(0x1d, &key, &exptime.to_be_bytes(), &[], 0),
                16 => build(0x24, &key, &exptime.to_be_bytes(), &[], 0),
                17 => build(0x0a, &[], &[], &[], 0),
                18 => build(0x0b, &[], &[], &[], 0),
                19 => build(0x10, b"settings", &[], &[], 0),
                20 => build(0x18, &[], &[], &[], 0),
                _ => build(0x42, &[], &[], &value, 0),
            }
        })
}

/// Cuts `bytes` at the given points (taken modulo its length).
fn cut(bytes: &[u8], points: &[usize]) -> Vec<Vec<u8>> {
    if bytes.is_empty() {
        return vec![];
    }
    let mut at: Vec<usize> = points.iter().map(|p| p % bytes.len()).collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| bytes[w[0]..w[1]].to_vec()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic_or_overconsume(
        requests in proptest::collection::vec(arbitrary_request(), 1..4),
        noise in proptest::collection::vec(any::<u8>(), 0..64),
        points in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut bytes: Vec<u8> = requests.concat();
        bytes.extend_from_slice(&noise);
        let harness = Harness::binary();
        // In one read, and cut into reads: the contract checks are in drive().
        let whole = harness.deliver([bytes.as_slice()]);
        prop_assert!(whole.left <= bytes.len());
        let pieces = cut(&bytes, &points);
        let split = Harness::binary().deliver(pieces.iter().map(Vec::as_slice));
        prop_assert!(split.left <= bytes.len());
    }

    #[test]
    fn valid_requests_parse_the_same_however_split(
        requests in proptest::collection::vec(valid_request(), 1..24),
        points in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let bytes: Vec<u8> = requests.concat();
        let whole = Harness::binary().deliver([bytes.as_slice()]);
        let pieces = cut(&bytes, &points);
        let split = Harness::binary().deliver(pieces.iter().map(Vec::as_slice));
        let bytewise = Harness::binary().deliver(bytes.chunks(1));
        prop_assert_eq!(whole.left, 0);
        prop_assert!(!whole.closed);
        prop_assert_eq!(&whole, &split);
        prop_assert_eq!(&whole, &bytewise);
    }
}

#[test]
fn a_value_split_across_many_segments_is_stored_whole() {
    let value: Vec<u8> = (0..5000u32)
        .map(|i| u8::try_from(i % 251).unwrap())
        .collect();
    let mut bytes = build(0x01, b"big", &[0, 0, 0, 1, 0, 0, 0, 0], &value, 0);
    bytes.extend(build(0x00, b"big", &[], &[], 0));
    let run = Harness::binary().deliver(bytes.chunks(7));
    assert!(!run.closed);
    // set reply (24 bytes), then the get reply: header, flags, value.
    let get = &run.out[24..];
    assert_eq!(get[6..8], [0, 0], "status");
    assert_eq!(&get[24..28], &[0, 0, 0, 1]);
    assert_eq!(&get[28..], &value[..]);
}

#[test]
fn oversized_bodies_are_discarded_as_they_arrive_and_the_connection_goes_on() {
    // A set whose value is far beyond -I + 64 KB: answered at once, its
    // value thrown away as it arrives (nothing held), the connection kept
    // (memcached 1.6.18 swallows it and reads on).
    let harness = Harness::binary();
    let mut bytes = header(0x01, 1, 8, 1 + 8 + (64 << 20), 0);
    bytes.extend_from_slice(&[0; 8]);
    bytes.push(b'k');
    let run = harness.deliver([bytes.as_slice(), &[0; 65536]]);
    assert!(!run.closed);
    assert_eq!(&run.out[24..], b"Too large.");
    assert_eq!(run.left, 0);
    // An unknown command whose body is far beyond -I: the same.
    let run = Harness::binary().deliver([header(0x42, 0, 0, 64 << 20, 0).as_slice(), &[0; 4096]]);
    assert!(!run.closed);
    assert_eq!(&run.out[24..], b"Unknown command");
    assert_eq!(run.left, 0);
    // Once the whole body has been discarded, the next request is served.
    let body = memcached::Settings::default().item_size_max + BODY_SLACK + 1;
    let mut stream = header(0x42, 0, 0, body, 0);
    stream.extend(std::iter::repeat_n(b'z', body));
    stream.extend(header(0x0a, 0, 0, 0, 0));
    let run = Harness::binary().deliver(stream.chunks(65536));
    assert!(!run.closed);
    assert_eq!(run.out.len(), 24 + b"Unknown command".len() + 24);
    assert_eq!(run.out[24 + 15 + 1], 0x0a, "the NOOP's response follows");
    // Within -I, the handler waits for the whole value.
    let mut bytes = header(0x01, 1, 8, 1 + 8 + 1000, 0);
    bytes.extend_from_slice(&[0; 8]);
    bytes.push(b'k');
    let run = Harness::binary().deliver([bytes.as_slice()]);
    assert!(!run.closed);
    assert!(run.out.is_empty());
    assert_eq!(run.left, bytes.len());
}
