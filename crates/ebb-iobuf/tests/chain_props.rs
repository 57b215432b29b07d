//! Property tests for `IoBuf` and `IoChain`: every operation is checked
//! against a plain `Vec<u8>` model, and views are checked to point into the
//! memory they were made from (no copy).

use ebb_iobuf::{IoBuf, IoBufError, IoChain};
use proptest::prelude::*;
use proptest::sample::Index;

/// A chain built from arbitrary segments (some empty), plus its flat model.
fn chain_and_model() -> impl Strategy<Value = (IoChain, Vec<u8>)> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 0..8).prop_map(|segs| {
        let model: Vec<u8> = segs.concat();
        let chain: IoChain = segs.into_iter().map(IoBuf::from_vec).collect();
        (chain, model)
    })
}

/// One allocation cut into views at random points, as a chain.
fn views_of_one_buffer() -> impl Strategy<Value = (IoBuf, IoChain)> {
    (
        prop::collection::vec(any::<u8>(), 0..64),
        prop::collection::vec(any::<Index>(), 0..6),
    )
        .prop_map(|(data, cuts)| {
            let base = IoBuf::from_vec(data);
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(base.len() + 1)).collect();
            points.push(0);
            points.push(base.len());
            points.sort_unstable();
            let chain = points
                .windows(2)
                .map(|w| base.slice(w[0]..w[1]).unwrap())
                .collect();
            (base, chain)
        })
}

fn inside(base: &IoBuf, chain: &IoChain) -> bool {
    let lo = base.as_ptr() as usize;
    let hi = lo + base.len();
    chain.segments().all(|s| {
        let p = s.as_ptr() as usize;
        p >= lo && p + s.len() <= hi
    })
}

/// Structural invariants plus equality with the model.
fn check(chain: &IoChain, model: &[u8]) -> Result<(), TestCaseError> {
    prop_assert_eq!(chain.to_vec(), model);
    prop_assert_eq!(chain.len(), model.len());
    prop_assert_eq!(chain.is_empty(), model.is_empty());
    prop_assert!(chain.segments().all(|s| !s.is_empty()));
    prop_assert_eq!(chain.segments().map(IoBuf::len).sum::<usize>(), model.len());
    prop_assert_eq!(chain.io_slices().concat(), model);
    prop_assert_eq!(chain.iter_bytes().collect::<Vec<u8>>(), model);
    prop_assert!(chain == model);
    prop_assert_eq!(chain, &IoChain::from(IoBuf::copy_from_slice(model)));
    if let Some(flat) = chain.contiguous() {
        prop_assert_eq!(flat, model);
    }
    prop_assert_eq!(chain.is_contiguous(), chain.segment_count() <= 1);
    Ok(())
}

#[derive(Debug, Clone)]
enum Op {
    PushBack(Vec<u8>),
    PushFront(Vec<u8>),
    Append(Vec<Vec<u8>>),
    /// Keep the head returned by `split_to`, drop the rest.
    KeepHead(usize),
    /// Keep the rest after `split_to`, drop the head.
    KeepTail(usize),
    SplitOff(usize),
    TrimFront(usize),
    TrimBack(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let bytes = || prop::collection::vec(any::<u8>(), 0..10);
    prop_oneof![
        bytes().prop_map(Op::PushBack),
        bytes().prop_map(Op::PushFront),
        prop::collection::vec(bytes(), 0..4).prop_map(Op::Append),
        (0usize..80).prop_map(Op::KeepHead),
        (0usize..80).prop_map(Op::KeepTail),
        (0usize..80).prop_map(Op::SplitOff),
        (0usize..80).prop_map(Op::TrimFront),
        (0usize..80).prop_map(Op::TrimBack),
    ]
}

fn out_of_range(requested: usize, available: usize) -> IoBufError {
    IoBufError::OutOfRange {
        requested,
        available,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn building_preserves_content((chain, model) in chain_and_model()) {
        check(&chain, &model)?;
    }

    /// Random sequences of append/prepend/split/trim agree with the model;
    /// out-of-range arguments are errors that change nothing.
    #[test]
    fn operations_match_vec_model(
        (mut chain, mut model) in chain_and_model(),
        ops in prop::collection::vec(op(), 1..24),
    ) {
        for op in ops {
            let len = model.len();
            match op {
                Op::PushBack(v) => {
                    model.extend_from_slice(&v);
                    chain.push_back(IoBuf::from_vec(v));
                }
                Op::PushFront(v) => {
                    model.splice(0..0, v.iter().copied());
                    chain.push_front(IoBuf::from_vec(v));
                }
                Op::Append(segs) => {
                    model.extend_from_slice(&segs.concat());
                    let mut other: IoChain = segs.into_iter().map(IoBuf::from_vec).collect();
                    chain.append(&mut other);
                    prop_assert!(other.is_empty());
                    prop_assert_eq!(other.segment_count(), 0);
                }
                Op::KeepHead(at) | Op::KeepTail(at) if at > len => {
                    prop_assert_eq!(chain.split_to(at), Err(out_of_range(at, len)));
                }
                Op::KeepHead(at) => {
                    let head = chain.split_to(at).unwrap();
                    check(&chain, &model[at..])?;
                    model.truncate(at);
                    chain = head;
                }
                Op::KeepTail(at) => {
                    let head = chain.split_to(at).unwrap();
                    check(&head, &model[..at])?;
                    model.drain(..at);
                }
                Op::SplitOff(at) => match chain.split_off(at) {
                    Ok(tail) => {
                        check(&tail, &model[at..])?;
                        model.truncate(at);
                    }
                    Err(e) => prop_assert_eq!(e, out_of_range(at, len)),
                },
                Op::TrimFront(n) => match chain.trim_front(n) {
                    Ok(()) => {
                        model.drain(..n);
                    }
                    Err(e) => prop_assert_eq!(e, out_of_range(n, len)),
                },
                Op::TrimBack(n) => match chain.trim_back(n) {
                    Ok(()) => model.truncate(len - n),
                    Err(e) => prop_assert_eq!(e, out_of_range(n, len)),
                },
            }
            check(&chain, &model)?;
        }
    }

    /// Splitting anywhere and appending the halves gives back the content.
    #[test]
    fn split_then_append_round_trips((chain, model) in chain_and_model(), at in any::<Index>()) {
        let at = at.index(model.len() + 1);
        let mut front = chain.clone();
        let mut back = front.split_off(at).unwrap();
        check(&front, &model[..at])?;
        check(&back, &model[at..])?;
        front.append(&mut back);
        check(&front, &model)?;
        prop_assert!(front.segment_count() <= chain.segment_count() + 1);
    }

    #[test]
    fn copy_to_slice_copies_a_prefix((chain, model) in chain_and_model(), n in 0usize..80) {
        let mut dst = vec![0xEE; n];
        match chain.copy_to_slice(&mut dst) {
            Ok(()) => prop_assert_eq!(&dst[..], &model[..n]),
            Err(e) => {
                prop_assert_eq!(e, out_of_range(n, model.len()));
                prop_assert!(dst.iter().all(|&b| b == 0xEE));
            }
        }
    }

    /// Equality ignores segmentation and sees any difference in content.
    #[test]
    fn equality_is_by_content(
        (a, model) in chain_and_model(),
        (b, other) in chain_and_model(),
    ) {
        prop_assert_eq!(a == b, model == other);
        let resegmented: IoChain = model.iter().map(|&x| IoBuf::from_vec(vec![x])).collect();
        prop_assert_eq!(&a, &resegmented);
    }

    /// `slice`, `split_to` and `split_off` of an `IoBuf` are views into the
    /// same allocation, at the expected offsets.
    #[test]
    fn iobuf_views_share_memory(
        data in prop::collection::vec(any::<u8>(), 1..64),
        a in any::<Index>(),
        b in any::<Index>(),
    ) {
        let base = IoBuf::from_vec(data.clone());
        let p = base.as_ptr() as usize;
        let (a, b) = (a.index(data.len() + 1), b.index(data.len() + 1));
        let (lo, hi) = (a.min(b), a.max(b));
        let s = base.slice(lo..hi).unwrap();
        prop_assert_eq!(&*s, &data[lo..hi]);
        if !s.is_empty() {
            prop_assert_eq!(s.as_ptr() as usize, p + lo);
        }
        let mut rest = base.clone();
        let head = rest.split_to(lo).unwrap();
        let tail = rest.split_off(hi - lo).unwrap();
        prop_assert_eq!(&*head, &data[..lo]);
        prop_assert_eq!(&*rest, &data[lo..hi]);
        prop_assert_eq!(&*tail, &data[hi..]);
        for (view, start) in [(&head, 0), (&rest, lo), (&tail, hi)] {
            if !view.is_empty() {
                prop_assert_eq!(view.as_ptr() as usize, p + start);
            }
        }
        let mut trimmed = base.clone();
        trimmed.trim_front(lo).unwrap();
        trimmed.trim_back(data.len() - hi).unwrap();
        prop_assert_eq!(&*trimmed, &data[lo..hi]);
        prop_assert_eq!(
            base.slice(lo..=data.len()),
            Err(out_of_range(data.len() + 1, data.len()))
        );
    }

    /// Chain splits and trims keep pointing into the original allocation.
    #[test]
    fn chain_splits_do_not_copy((base, chain) in views_of_one_buffer(), at in any::<Index>()) {
        prop_assert_eq!(chain.to_vec(), base.to_vec());
        let at = at.index(base.len() + 1);
        let mut front = chain.clone();
        let back = front.split_off(at).unwrap();
        prop_assert!(inside(&base, &front) && inside(&base, &back));
        // The first byte after the split is the base's byte `at`.
        if let Some(first) = back.segments().next() {
            prop_assert_eq!(first.as_ptr() as usize, base.as_ptr() as usize + at);
        }
        let mut trimmed = chain.clone();
        trimmed.trim_front(at).unwrap();
        prop_assert!(inside(&base, &trimmed));
        let mut cursor = chain.cursor();
        cursor.skip(at / 2).unwrap();
        let views = cursor.read_chain(at - at / 2).unwrap();
        prop_assert!(inside(&base, &views));
        prop_assert_eq!(views.to_vec(), &base[at / 2..at]);
        let single = IoChain::from(base.clone());
        prop_assert!(single.into_iobuf().as_ptr() == base.as_ptr() || base.is_empty());
    }
}
