//! Property tests of the text and meta request parsers: arbitrary input
//! never panics or consumes more than it was given, and well-formed
//! request streams give the same replies however they are split into
//! reads.

mod handler_support;

use handler_support::Harness;
use proptest::prelude::*;

/// Words the generators splice together, so that random input often
/// looks like a request.
const WORDS: &[&str] = &[
    "get",
    "gets",
    "gat",
    "gats",
    "set",
    "add",
    "replace",
    "append",
    "prepend",
    "cas",
    "delete",
    "incr",
    "decr",
    "touch",
    "flush_all",
    "version",
    "verbosity",
    "stats",
    "mg",
    "ms",
    "md",
    "ma",
    "mn",
    "me",
    "noreply",
    "k",
    "v",
    "c",
    "q",
    "T10",
    "N5",
    "MA",
    "MD",
    "C1",
    "D3",
    "J7",
    "O12",
    "b",
    "0",
    "1",
    "3",
    "-1",
    "99999999999",
    "\r\n",
    "\n",
    " ",
    "\0",
];

fn wordy_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        prop::sample::select(WORDS).prop_map(|w| w.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..8),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

fn key() -> impl Strategy<Value = String> {
    "[a-d]{1,3}"
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![Just(b'1'), Just(b'\r'), Just(b'\n'), any::<u8>()],
        0..20,
    )
}

/// One well-formed request (possibly an error case memcached defines).
fn request() -> impl Strategy<Value = Vec<u8>> {
    let storage = (
        prop::sample::select(&["set", "add", "replace", "append", "prepend"][..]),
        key(),
        0u32..4,
        value(),
        any::<bool>(),
    )
        .prop_map(|(cmd, key, flags, value, noreply)| {
            let noreply = if noreply { " noreply" } else { "" };
            let mut r = format!("{cmd} {key} {flags} 0 {}{noreply}\r\n", value.len()).into_bytes();
            r.extend_from_slice(&value);
            r.extend_from_slice(b"\r\n");
            r
        });
    let meta_set = (
        key(),
        value(),
        prop::sample::select(&["", " c", " k q", " MA", " ME T5", " C3 O9"][..]),
    )
        .prop_map(|(key, value, flags)| {
            let mut r = format!("ms {key} {}{flags}\r\n", value.len()).into_bytes();
            r.extend_from_slice(&value);
            r.extend_from_slice(b"\r\n");
            r
        });
    let simple = (
        prop::sample::select(
            &[
                "get {k}",
                "gets {k} {k}",
                "gat 10 {k}",
                "gats 5 {k}",
                "delete {k}",
                "delete {k} noreply",
                "incr {k} 3",
                "decr {k} 1",
                "touch {k} 10",
                "mg {k} v c f t s k",
                "mg {k} q",
                "mg {k} N10 v",
                "md {k} q",
                "md {k} C1",
                "ma {k}",
                "ma {k} N0 J5 v",
                "ma {k} MD D2 q",
                "mn",
                "me {k}",
                "version",
                "flush_all",
                "flush_all 5 noreply",
                "verbosity 1",
                "bogus {k}",
                "",
                "get",
            ][..],
        ),
        key(),
    )
        .prop_map(|(template, key)| format!("{}\r\n", template.replace("{k}", &key)).into_bytes());
    prop_oneof![storage, meta_set, simple]
}

/// Cuts `bytes` at the given fractions into consecutive chunks.
fn split_at(bytes: &[u8], cuts: &[prop::sample::Index]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for point in points.into_iter().chain([bytes.len()]) {
        chunks.push(bytes[start..point].to_vec());
        start = point;
    }
    chunks
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic_or_overconsume(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let run = Harness::text().deliver([&bytes[..]]);
        prop_assert!(run.left <= bytes.len());
    }

    #[test]
    fn wordy_bytes_in_pieces_never_panic(bytes in wordy_bytes(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6)) {
        let chunks = split_at(&bytes, &cuts);
        let run = Harness::text().deliver(chunks.iter().map(Vec::as_slice));
        prop_assert!(run.left <= bytes.len());
    }

    #[test]
    fn split_requests_reply_as_unsplit(
        requests in prop::collection::vec(request(), 1..12),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let stream = requests.concat();
        let whole = Harness::text().deliver([&stream[..]]);
        let chunks = split_at(&stream, &cuts);
        let split = Harness::text().deliver(chunks.iter().map(Vec::as_slice));
        prop_assert_eq!(String::from_utf8_lossy(&split.out), String::from_utf8_lossy(&whole.out));
        prop_assert_eq!(split.closed, whole.closed);
        prop_assert_eq!(split.left, whole.left);
        let bytewise = Harness::text().deliver(stream.chunks(1));
        prop_assert_eq!(bytewise.out, whole.out);
    }
}
