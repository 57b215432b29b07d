//! Properties of what the etcd map reads back from etcd, which anyone
//! with access to the etcd may have written: the id counter's value and
//! the keys under the application's prefix. Decoding arbitrary bytes
//! never panics and never misreads; what the map writes round-trips.

use ebb_core::{check_key, MapError, FIRST_GLOBAL_ID, MAX_EBB_IDS};
use ebb_etcd::counter::{decode_next, encode_next, range_from};
use ebb_etcd::AppPrefix;
use proptest::prelude::*;

/// Keys the map accepts: 1 to 4 segments of printable ASCII without `/`
/// and spaces, none `.` or `..`.
fn valid_key() -> impl Strategy<Value = String> {
    proptest::collection::vec("[!-.0-~][!-.0-~]{0,7}", 1..4)
        .prop_map(|segments| segments.join("/"))
        .prop_filter("no . or .. segments", |key| {
            key.split('/')
                .all(|segment| segment != "." && segment != "..")
        })
}

proptest! {
    #[test]
    fn any_counter_value_decodes_to_an_id_in_range_or_is_corrupt(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
        match decode_next(Some(&bytes)) {
            Ok(next) => {
                prop_assert!((FIRST_GLOBAL_ID..=MAX_EBB_IDS).contains(&next));
                // Only the canonical decimal form of that id, or the same
                // digits with leading zeros, decodes.
                let text = std::str::from_utf8(&bytes).unwrap();
                prop_assert_eq!(text.trim_start_matches('0'), next.to_string());
            }
            Err(MapError::Corrupt { .. }) => {}
            Err(other) => prop_assert!(false, "{:?} gave {:?}", bytes, other),
        }
    }

    #[test]
    fn the_counter_round_trips_and_ranges_stay_in_the_space(next in FIRST_GLOBAL_ID..=MAX_EBB_IDS, len: u32) {
        prop_assert_eq!(decode_next(Some(&encode_next(next))), Ok(next));
        match range_from(next, len) {
            Ok(range) => {
                prop_assert_eq!(range.start, next);
                prop_assert!(range.end <= MAX_EBB_IDS && range.len() == len as usize);
            }
            Err(MapError::IdsExhausted { wanted, left }) => {
                prop_assert_eq!(wanted, len);
                prop_assert_eq!(left, MAX_EBB_IDS - next);
                prop_assert!(len == 0 || len > left);
            }
            Err(other) => prop_assert!(false, "{:?}", other),
        }
    }

    #[test]
    fn keys_under_the_prefix_round_trip(key in valid_key()) {
        let prefix = AppPrefix::new("app").unwrap();
        prop_assert_eq!(check_key(&key, false), Ok(()));
        let etcd_key = prefix.etcd_key(&key, false).unwrap();
        prop_assert_eq!(prefix.map_key(&etcd_key), Some(key));
    }

    #[test]
    fn any_etcd_key_is_read_as_a_valid_key_of_ours_or_skipped(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        let prefix = AppPrefix::new("app").unwrap();
        let mut etcd_key = b"/ebbflow/app/".to_vec();
        etcd_key.extend_from_slice(&bytes);
        for candidate in [&bytes, &etcd_key] {
            if let Some(key) = prefix.map_key(candidate) {
                prop_assert_eq!(check_key(&key, false), Ok(()));
                prop_assert_eq!(prefix.etcd_key(&key, false).unwrap(), candidate.clone());
            }
        }
    }
}
