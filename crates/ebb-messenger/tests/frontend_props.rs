//! Property test of the frontend's id ranges: whatever nodes ask for, in
//! whatever order, the global Ebb id ranges it hands out never overlap,
//! stay inside its space, are exactly as long as asked, and each refusal
//! is the right one.

use std::collections::BTreeMap;
use std::ops::Range;

use ebb_core::{NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};
use ebb_messenger::{Frontend, FrontendError};
use proptest::prelude::*;

proptest! {
    #[test]
    fn id_ranges_never_overlap(
        requests in proptest::collection::vec((0u32..24, 0u32..6000), 0..64),
    ) {
        let space = FIRST_GLOBAL_ID..MAX_EBB_IDS;
        let frontend = Frontend::new(space.clone());
        let mut given: BTreeMap<NodeId, Range<u32>> = BTreeMap::new();
        for (node, len) in requests {
            let node = NodeId(node);
            let handed: u32 = given.values().map(|r| r.end - r.start).sum();
            let left = space.end - space.start - handed;
            match frontend.expect(node, len) {
                Ok(range) => {
                    prop_assert!(!given.contains_key(&node));
                    prop_assert_eq!(range.end - range.start, len);
                    prop_assert!(space.start <= range.start && range.end <= space.end);
                    for other in given.values() {
                        prop_assert!(range.end <= other.start || other.end <= range.start,
                            "{:?} overlaps {:?}", range, other);
                    }
                    given.insert(node, range);
                }
                Err(FrontendError::AlreadyExpected(refused)) => {
                    prop_assert_eq!(refused, node);
                    prop_assert!(given.contains_key(&node));
                }
                Err(FrontendError::IdsExhausted { wanted, left: said }) => {
                    prop_assert!(!given.contains_key(&node));
                    prop_assert_eq!((wanted, said), (len, left));
                    prop_assert!(len == 0 || len > left);
                }
            }
        }
    }
}
