//! The application's arguments as kernel command-line words.
//!
//! The command line is split on whitespace, so an argument that is empty
//! or holds a space could not pass (Redis's `--save ""` turns snapshots
//! off). The launcher writes each argument as one word: every whitespace
//! character and every `%` as `%XX` per UTF-8 byte (percent-encoding,
//! RFC 3986 §2.1), and the empty argument as the lone word `%`, which no
//! encoded argument can be (a `%` is always followed by two hex digits).
//! The guest decodes the words back. Words without `%` are their own
//! encoding, so hand-written command lines keep working unless a word
//! holds a `%`: it is decoded too (`%41` becomes `A`, a lone `%` the empty
//! argument), and one whose `%` is not followed by two hex digits is kept
//! as written, with a warning.

use alloc::string::String;
use alloc::vec::Vec;

/// The word the empty argument becomes.
const EMPTY: &str = "%";

/// `arg` as one command-line word: no whitespace, never empty.
pub fn encode_arg(arg: &str) -> String {
    if arg.is_empty() {
        return EMPTY.into();
    }
    let mut word = String::with_capacity(arg.len());
    for c in arg.chars() {
        if c == '%' || c.is_whitespace() {
            let mut utf8 = [0u8; 4];
            for byte in c.encode_utf8(&mut utf8).bytes() {
                word.push('%');
                word.push(hex_digit(byte >> 4));
                word.push(hex_digit(byte & 0xf));
            }
        } else {
            word.push(c);
        }
    }
    word
}

/// Why a word is not an encoded argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// A `%` not followed by two hex digits, at this byte offset.
    BadEscape(usize),
    /// The decoded bytes are not UTF-8.
    NotUtf8,
}

impl core::fmt::Display for ArgError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ArgError::BadEscape(at) => {
                write!(f, "'%' at byte {at} is not followed by two hex digits")
            }
            ArgError::NotUtf8 => f.write_str("the decoded argument is not UTF-8"),
        }
    }
}

/// The argument `word` encodes (see the [module docs](self)).
pub fn decode_arg(word: &str) -> Result<String, ArgError> {
    if word == EMPTY {
        return Ok(String::new());
    }
    if !word.contains('%') {
        return Ok(word.into());
    }
    let bytes = word.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let high = bytes.get(at + 1).and_then(|&b| hex_value(b));
            let low = bytes.get(at + 2).and_then(|&b| hex_value(b));
            let (Some(high), Some(low)) = (high, low) else {
                return Err(ArgError::BadEscape(at));
            };
            out.push(high << 4 | low);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ArgError::NotUtf8)
}

/// Every word of `words` decoded; a word that is not an encoding is
/// kept as it is and reported to `on_bad` (a hand-written `50%` stays
/// `50%` rather than stopping the boot).
pub fn decode_args<'a>(
    words: impl IntoIterator<Item = &'a str>,
    mut on_bad: impl FnMut(&'a str, ArgError),
) -> Vec<String> {
    words
        .into_iter()
        .map(|word| {
            decode_arg(word).unwrap_or_else(|error| {
                on_bad(word, error);
                word.into()
            })
        })
        .collect()
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789ABCDEF"[usize::from(nibble & 0xf)])
}

fn hex_value(byte: u8) -> Option<u8> {
    char::from(byte)
        .to_digit(16)
        .and_then(|v| u8::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    #[test]
    fn empty_spaces_and_percent_become_one_word() {
        assert_eq!(encode_arg(""), "%");
        assert_eq!(encode_arg("a b"), "a%20b");
        assert_eq!(encode_arg("50%"), "50%25");
        assert_eq!(encode_arg("tab\there"), "tab%09here");
        assert_eq!(encode_arg("nbsp\u{a0}"), "nbsp%C2%A0");
        assert_eq!(encode_arg("--save"), "--save");
    }

    #[test]
    fn words_decode_back_and_plain_words_are_themselves() {
        assert_eq!(decode_arg("%"), Ok(String::new()));
        assert_eq!(decode_arg("a%20b"), Ok("a b".into()));
        assert_eq!(decode_arg("x%c2%a0"), Ok("x\u{a0}".into()));
        assert_eq!(decode_arg("--port"), Ok("--port".into()));
    }

    #[test]
    fn malformed_words_say_why_and_are_kept() {
        assert_eq!(decode_arg("50%"), Err(ArgError::BadEscape(2)));
        assert_eq!(decode_arg("%zz"), Err(ArgError::BadEscape(0)));
        assert_eq!(decode_arg("%FF"), Err(ArgError::NotUtf8));
        let mut bad = vec![];
        let args = decode_args(["%", "50%", "a%20b"], |word, error| bad.push((word, error)));
        assert_eq!(args, ["", "50%", "a b"]);
        assert_eq!(bad, [("50%", ArgError::BadEscape(2))]);
    }

    proptest! {
        #[test]
        fn every_argument_survives_the_command_line(arg in any::<std::string::String>()) {
            let word = encode_arg(&arg);
            prop_assert!(!word.is_empty());
            prop_assert!(!word.contains(char::is_whitespace));
            prop_assert_eq!(word.split_whitespace().count(), 1);
            prop_assert_eq!(decode_arg(&word), Ok(arg));
        }

        #[test]
        fn decoding_any_word_never_panics(word in "[%0-9a-fA-Fz ]{0,12}") {
            let _ = decode_arg(&word);
        }
    }
}
