//! `IoBuf::from_owner`: foreign memory is viewed without copying and its
//! owner is dropped exactly when the last view goes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ebb_iobuf::{IoBuf, IoChain};
use proptest::prelude::*;

/// Stands in for a device receive buffer: counts how often it is returned.
struct RxBuffer {
    data: Box<[u8]>,
    returned: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for RxBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for RxBuffer {
    fn drop(&mut self) {
        self.returned.fetch_add(1, Ordering::SeqCst);
    }
}

fn rx(len: usize) -> (IoBuf, Arc<AtomicUsize>, usize) {
    let returned = Arc::new(AtomicUsize::new(0));
    let data: Box<[u8]> = (0..len).map(|i| u8::try_from(i % 251).unwrap()).collect();
    let ptr = data.as_ptr() as usize;
    let buf = IoBuf::from_owner(RxBuffer {
        data,
        returned: returned.clone(),
    });
    (buf, returned, ptr)
}

#[test]
fn owner_is_dropped_with_the_last_view() {
    let (buf, returned, ptr) = rx(100);
    assert_eq!(buf.as_ptr() as usize, ptr, "from_owner must not copy");
    let clone = buf.clone();
    let mut chain = IoChain::from(buf.slice(10..90).unwrap());
    let header = chain.split_to(20).unwrap();
    let payload = chain.cursor().read_chain(5).unwrap();
    drop(buf);
    drop(clone);
    drop(chain);
    assert_eq!(returned.load(Ordering::SeqCst), 0);
    assert_eq!(
        header.segments().next().unwrap().as_ptr() as usize,
        ptr + 10
    );
    drop(header);
    assert_eq!(returned.load(Ordering::SeqCst), 0);
    assert_eq!(payload.to_vec(), (30u8..35).collect::<Vec<_>>());
    drop(payload);
    assert_eq!(returned.load(Ordering::SeqCst), 1);
}

proptest! {
    // Miri interprets every step: a few cases still drive each path.
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 8 } else { 256 }, ..ProptestConfig::default() })]

    /// Whatever the order in which views are dropped, the owner goes exactly
    /// once, with the last of them.
    #[test]
    fn owner_dropped_once_in_any_order(
        cuts in prop::collection::vec(0usize..64, 1..8),
        order in Just((0..10usize).collect::<Vec<_>>()).prop_shuffle(),
    ) {
        let (buf, returned, _) = rx(64);
        let mut views: Vec<Option<IoBuf>> = cuts
            .iter()
            .map(|&c| Some(buf.slice(c..).unwrap()))
            .collect();
        let mut rest = buf.clone();
        views.push(Some(rest.split_to(32).unwrap()));
        views.push(Some(rest));
        views.push(Some(buf));
        let live = views.len();
        let mut dropped = 0;
        for i in order.into_iter().chain(0..live) {
            if let Some(v) = views.get_mut(i).and_then(Option::take) {
                prop_assert_eq!(returned.load(Ordering::SeqCst), 0);
                drop(v);
                dropped += 1;
            }
        }
        prop_assert_eq!(dropped, live);
        prop_assert_eq!(returned.load(Ordering::SeqCst), 1);
    }
}
