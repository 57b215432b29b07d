//! The global id counter: the next free global Ebb id, stored as decimal
//! ASCII under [`NEXT_GLOBAL_ID`], advanced by compare-and-swap.
//!
//! [`NEXT_GLOBAL_ID`]: ebb_core::NEXT_GLOBAL_ID

use std::ops::Range;

use ebb_core::{MapError, NEXT_GLOBAL_ID};
use ebb_core::{FIRST_GLOBAL_ID, MAX_EBB_IDS};

/// The next free id that the counter's stored value says (`None`: never
/// written, so the first global id).
///
/// # Errors
///
/// [`MapError::Corrupt`] when the value is not a decimal id within the
/// global range (somebody else wrote it; nothing is changed).
pub fn decode_next(value: Option<&[u8]>) -> Result<u32, MapError> {
    let Some(value) = value else {
        return Ok(FIRST_GLOBAL_ID);
    };
    let corrupt = |why: String| MapError::Corrupt {
        key: NEXT_GLOBAL_ID.to_owned(),
        why,
    };
    let text = std::str::from_utf8(value).map_err(|_| corrupt("not UTF-8".to_owned()))?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(corrupt(format!(
            "{:?} is not a decimal number",
            text.chars().take(32).collect::<String>()
        )));
    }
    let next: u32 = text
        .parse()
        .map_err(|_| corrupt(format!("{text} is out of range")))?;
    if !(FIRST_GLOBAL_ID..=MAX_EBB_IDS).contains(&next) {
        return Err(corrupt(format!(
            "{next} is outside the global ids {FIRST_GLOBAL_ID}..{MAX_EBB_IDS}"
        )));
    }
    Ok(next)
}

/// The range of `len` ids starting at `next`.
///
/// # Errors
///
/// [`MapError::IdsExhausted`] when fewer than `len` are left (or `len` is
/// 0), as the in-process map says it.
pub fn range_from(next: u32, len: u32) -> Result<Range<u32>, MapError> {
    let left = MAX_EBB_IDS.saturating_sub(next);
    if len == 0 || len > left {
        return Err(MapError::IdsExhausted { wanted: len, left });
    }
    Ok(next..next + len)
}

/// The stored form of the counter's value.
pub fn encode_next(next: u32) -> Vec<u8> {
    next.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_counter_starts_at_the_first_global_id() {
        assert_eq!(decode_next(None), Ok(FIRST_GLOBAL_ID));
    }

    #[test]
    fn stored_values_round_trip() {
        for next in [FIRST_GLOBAL_ID, FIRST_GLOBAL_ID + 1, MAX_EBB_IDS] {
            assert_eq!(decode_next(Some(&encode_next(next))), Ok(next));
        }
    }

    #[test]
    fn foreign_values_are_corrupt_not_misread() {
        let below = encode_next(FIRST_GLOBAL_ID - 1);
        let above = encode_next(MAX_EBB_IDS + 1);
        for (value, why) in [
            (&b""[..], "not a decimal"),
            (b"12a", "not a decimal"),
            (b"-5", "not a decimal"),
            (b" 7", "not a decimal"),
            (b"\xff", "UTF-8"),
            (b"99999999999999", "out of range"),
            (&below, "outside"),
            (&above, "outside"),
        ] {
            match decode_next(Some(value)) {
                Err(MapError::Corrupt { key, why: said }) => {
                    assert_eq!(key, NEXT_GLOBAL_ID);
                    assert!(said.contains(why), "{value:?}: {said}");
                }
                other => panic!("{value:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn ranges_stop_at_the_end_of_the_id_space() {
        assert_eq!(
            range_from(FIRST_GLOBAL_ID, 4),
            Ok(FIRST_GLOBAL_ID..FIRST_GLOBAL_ID + 4)
        );
        assert_eq!(
            range_from(MAX_EBB_IDS - 2, 2),
            Ok(MAX_EBB_IDS - 2..MAX_EBB_IDS)
        );
        assert_eq!(
            range_from(MAX_EBB_IDS - 2, 3),
            Err(MapError::IdsExhausted { wanted: 3, left: 2 })
        );
        assert_eq!(
            range_from(FIRST_GLOBAL_ID, 0),
            Err(MapError::IdsExhausted {
                wanted: 0,
                left: MAX_EBB_IDS - FIRST_GLOBAL_ID
            })
        );
    }
}
