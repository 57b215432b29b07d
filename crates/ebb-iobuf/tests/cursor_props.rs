//! Property tests for `Cursor`: reads across segment boundaries agree with
//! reads from the flat bytes, failed reads do not move the cursor, and
//! `find`/`take_until` agree with a naive search.

use ebb_iobuf::{Header, IoBuf, IoBufError, IoChain};
use proptest::prelude::*;
use proptest::sample::Index;

/// A chain of arbitrary segments over a small alphabet (so that searches
/// hit often), plus its flat model.
fn chain_and_model(alphabet: u8) -> impl Strategy<Value = (IoChain, Vec<u8>)> {
    prop::collection::vec(prop::collection::vec(0..alphabet, 0..10), 0..10).prop_map(|segs| {
        let model = segs.concat();
        let chain = segs.into_iter().map(IoBuf::from_vec).collect();
        (chain, model)
    })
}

/// An 11-byte header with fields of every width, decoded from flat bytes.
#[derive(Debug, PartialEq)]
struct Hdr {
    kind: u8,
    port: u16,
    seq: u64,
}

impl Header for Hdr {
    const LEN: usize = 11;
    fn from_bytes(b: &[u8]) -> Self {
        Hdr {
            kind: b[0],
            port: u16::from_be_bytes([b[1], b[2]]),
            seq: u64::from_le_bytes(b[3..11].try_into().unwrap()),
        }
    }
}

/// A header too big for the stack path.
#[derive(Debug, PartialEq)]
struct Big(Vec<u8>);

impl Header for Big {
    const LEN: usize = 200;
    fn from_bytes(b: &[u8]) -> Self {
        Big(b.to_vec())
    }
}

#[derive(Debug, Clone, Copy)]
enum Read {
    U8,
    U16Be,
    U32Be,
    U64Be,
    U16Le,
    U32Le,
    U64Le,
    PeekU32Be,
    PeekU64Le,
    Header,
    Skip(usize),
    Chain(usize),
    Into(usize),
}

fn read() -> impl Strategy<Value = Read> {
    prop_oneof![
        Just(Read::U8),
        Just(Read::U16Be),
        Just(Read::U32Be),
        Just(Read::U64Be),
        Just(Read::U16Le),
        Just(Read::U32Le),
        Just(Read::U64Le),
        Just(Read::PeekU32Be),
        Just(Read::PeekU64Le),
        Just(Read::Header),
        (0usize..20).prop_map(Read::Skip),
        (0usize..20).prop_map(Read::Chain),
        (0usize..20).prop_map(Read::Into),
    ]
}

/// The model's answer: the `n` bytes at `pos`, or the cursor's error.
fn flat(model: &[u8], pos: usize, n: usize) -> Result<&[u8], IoBufError> {
    model.get(pos..pos + n).ok_or(IoBufError::Truncated {
        needed: n,
        remaining: model.len() - pos,
    })
}

fn naive_find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Typed reads across boundaries equal reads from the flat bytes; on
    /// error the cursor stays put.
    #[test]
    fn reads_match_flat_bytes(
        (chain, model) in chain_and_model(255),
        reads in prop::collection::vec(read(), 1..30),
    ) {
        let mut cur = chain.cursor();
        let mut pos = 0;
        for r in reads {
            let before = cur.position();
            prop_assert_eq!(before, pos);
            prop_assert_eq!(cur.remaining(), model.len() - pos);
            let advanced = match r {
                Read::U8 => {
                    prop_assert_eq!(cur.read_u8(), flat(&model, pos, 1).map(|b| b[0]));
                    1
                }
                Read::U16Be => {
                    let want = flat(&model, pos, 2).map(|b| u16::from_be_bytes(b.try_into().unwrap()));
                    prop_assert_eq!(cur.read_u16_be(), want);
                    2
                }
                Read::U32Be => {
                    let want = flat(&model, pos, 4).map(|b| u32::from_be_bytes(b.try_into().unwrap()));
                    prop_assert_eq!(cur.read_u32_be(), want);
                    4
                }
                Read::U64Be => {
                    let want = flat(&model, pos, 8).map(|b| u64::from_be_bytes(b.try_into().unwrap()));
                    prop_assert_eq!(cur.read_u64_be(), want);
                    8
                }
                Read::U16Le => {
                    let want = flat(&model, pos, 2).map(|b| u16::from_le_bytes(b.try_into().unwrap()));
                    prop_assert_eq!(cur.read_u16_le(), want);
                    2
                }
                Read::U32Le => {
                    let want = flat(&model, pos, 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
                    prop_assert_eq!(cur.read_u32_le(), want);
                    4
                }
                Read::U64Le => {
                    let want = flat(&model, pos, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
                    prop_assert_eq!(cur.read_u64_le(), want);
                    8
                }
                Read::PeekU32Be => {
                    let want = flat(&model, pos, 4).map(|b| u32::from_be_bytes(b.try_into().unwrap()));
                    prop_assert_eq!(cur.peek_u32_be(), want);
                    0
                }
                Read::PeekU64Le => {
                    let want = flat(&model, pos, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
                    prop_assert_eq!(cur.peek_u64_le(), want);
                    0
                }
                Read::Header => {
                    let want = flat(&model, pos, Hdr::LEN).map(Hdr::from_bytes);
                    prop_assert_eq!(cur.peek_header::<Hdr>(), want);
                    let want = flat(&model, pos, Hdr::LEN).map(Hdr::from_bytes);
                    prop_assert_eq!(cur.read_header::<Hdr>(), want);
                    Hdr::LEN
                }
                Read::Skip(n) => {
                    prop_assert_eq!(cur.skip(n), flat(&model, pos, n).map(|_| ()));
                    n
                }
                Read::Chain(n) => {
                    let got = cur.read_chain(n).map(|c| c.to_vec());
                    prop_assert_eq!(got, flat(&model, pos, n).map(<[u8]>::to_vec));
                    n
                }
                Read::Into(n) => {
                    let mut dst = vec![0xEE; n];
                    let got = cur.read_into(&mut dst);
                    match flat(&model, pos, n) {
                        Ok(want) => {
                            prop_assert_eq!(got, Ok(()));
                            prop_assert_eq!(&dst[..], want);
                        }
                        Err(e) => {
                            prop_assert_eq!(got, Err(e));
                            prop_assert!(dst.iter().all(|&b| b == 0xEE));
                        }
                    }
                    n
                }
            };
            if pos + advanced <= model.len() {
                pos += advanced;
            }
            prop_assert_eq!(cur.position(), pos);
            prop_assert_eq!(cur.rest().to_vec(), &model[pos..]);
            let chunk = cur.chunk();
            prop_assert_eq!(chunk, &model[pos..pos + chunk.len()]);
            prop_assert_eq!(chunk.is_empty(), pos == model.len());
        }
    }

    /// Large headers assembled across segments equal the flat bytes.
    #[test]
    fn big_headers_across_boundaries((chain, model) in chain_and_model(255), skip in any::<Index>()) {
        let mut big = chain.clone();
        for _ in 0..3 {
            big.append(&mut chain.clone());
        }
        let model = model.repeat(4);
        let mut cur = big.cursor();
        let skip = skip.index(model.len() + 1);
        cur.skip(skip).unwrap();
        let want = flat(&model, skip, Big::LEN).map(Big::from_bytes);
        prop_assert_eq!(cur.read_header::<Big>(), want);
    }

    /// `find` agrees with a naive search of the flat bytes, from any start.
    #[test]
    fn find_matches_naive_search(
        (chain, model) in chain_and_model(3),
        needle in prop::collection::vec(0u8..3, 0..4),
        start in any::<Index>(),
    ) {
        let start = start.index(model.len() + 1);
        let mut cur = chain.cursor();
        cur.skip(start).unwrap();
        prop_assert_eq!(cur.find(&needle), naive_find(&model[start..], &needle));
    }

    /// `take_until` returns the bytes before the needle and moves past it,
    /// or returns `None` and does not move.
    #[test]
    fn take_until_matches_naive_search(
        (chain, model) in chain_and_model(3),
        needle in prop::collection::vec(0u8..3, 1..4),
        start in any::<Index>(),
    ) {
        let start = start.index(model.len() + 1);
        let mut cur = chain.cursor();
        cur.skip(start).unwrap();
        match naive_find(&model[start..], &needle) {
            Some(i) => {
                let line = cur.take_until(&needle).unwrap();
                prop_assert_eq!(line.to_vec(), &model[start..start + i]);
                prop_assert_eq!(cur.position(), start + i + needle.len());
            }
            None => {
                prop_assert!(cur.take_until(&needle).is_none());
                prop_assert_eq!(cur.position(), start);
            }
        }
    }

    /// Splitting lines out of a stream cut at arbitrary points gives the
    /// same lines as splitting the flat bytes.
    #[test]
    fn lines_across_segments(
        lines in prop::collection::vec(prop::collection::vec(b'a'..=b'z', 0..8), 0..6),
        cuts in prop::collection::vec(any::<Index>(), 0..8),
    ) {
        let flat: Vec<u8> = lines.iter().flat_map(|l| [&l[..], b"\r\n"].concat()).collect();
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(flat.len() + 1)).collect();
        points.extend([0, flat.len()]);
        points.sort_unstable();
        let base = IoBuf::from_vec(flat);
        let chain: IoChain = points.windows(2).map(|w| base.slice(w[0]..w[1]).unwrap()).collect();
        let mut cur = chain.cursor();
        let mut got = Vec::new();
        while let Some(line) = cur.take_until(b"\r\n") {
            got.push(line.to_vec());
        }
        prop_assert_eq!(got, lines);
        prop_assert_eq!(cur.remaining(), 0);
    }
}
