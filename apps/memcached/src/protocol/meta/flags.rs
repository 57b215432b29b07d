//! memcached's `_meta_flag_preparse`: the flags of a meta command.

use alloc::vec::Vec;

use crate::protocol::common::{base64_decode, parse_i32, parse_u32, parse_u64};
use crate::protocol::text::Tokens;

/// The parsed flags of a meta command.
#[derive(Debug, Default)]
pub struct Flags {
    /// The key (base64-decoded with `b`).
    pub key: Vec<u8>,
    /// `b`: the key was given in base64.
    pub key_binary: bool,
    /// `N<ttl>`: create on miss, with this exptime.
    pub vivify: Option<i32>,
    /// `T<ttl>`: new exptime.
    pub ttl: Option<i32>,
    /// `R<ttl>`: win the right to recache a hit whose TTL is below this.
    pub recache: Option<i32>,
    /// `u`: do not bump the item in the LRU (nor mark it fetched).
    pub no_update: bool,
    /// `v`: return the value.
    pub value: bool,
    /// `q`: noreply semantics.
    pub no_reply: bool,
    /// `C<cas>`: compare CAS.
    pub cas: Option<u64>,
    /// `F<flags>`: client flags (ms).
    pub client_flags: u32,
    /// `M<mode>`: mode switch (ms, ma).
    pub mode: Option<u8>,
    /// `D<delta>` (ma).
    pub delta: Option<u64>,
    /// `J<initial>` (ma).
    pub initial: u64,
    /// `I`: invalidate (md) or allow stale sets (ms).
    pub invalidate: bool,
}

/// The default error of meta commands.
pub const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format";

fn number<T>(
    parsed: Option<T>,
    error: &mut Option<&'static [u8]>,
    message: &'static [u8],
) -> Option<T> {
    if parsed.is_none() {
        *error = Some(message);
    }
    parsed
}

/// Parses the flags in `tokens` from index `start`; the key is token 1.
/// On error, returns the message memcached would print (some commands
/// print their own instead).
pub fn preparse(tokens: &Tokens<'_>, start: usize) -> Result<Flags, &'static [u8]> {
    let mut flags = Flags {
        key: tokens.get(1).to_vec(),
        ..Flags::default()
    };
    let mut seen = [false; 127];
    let mut failed = false;
    let mut message: Option<&'static [u8]> = None;
    let bad_token: &[u8] = b"CLIENT_ERROR bad token in command line format";
    for token in tokens.list().iter().skip(start) {
        let o = token[0];
        let arg = &token[1..];
        let Some(slot) = seen.get_mut(usize::from(o)).filter(|seen| !**seen) else {
            return Err(b"CLIENT_ERROR duplicate flag");
        };
        *slot = true;
        let mut error = None;
        match o {
            b'b' => {
                flags.key_binary = true;
                match base64_decode(tokens.get(1)) {
                    Some(key) => flags.key = key,
                    None => {
                        flags.key.clear();
                        error = Some(&b"CLIENT_ERROR error decoding key"[..]);
                    }
                }
            }
            b'N' => flags.vivify = Some(number(parse_i32(arg), &mut error, bad_token).unwrap_or(0)),
            b'T' => flags.ttl = number(parse_i32(arg), &mut error, bad_token),
            b'R' => flags.recache = number(parse_i32(arg), &mut error, bad_token),
            b'v' => flags.value = true,
            b'q' => flags.no_reply = true,
            b'u' => flags.no_update = true,
            b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'l' | b'h' => {}
            b'F' => match parse_u32(arg) {
                Some(value) => flags.client_flags = value,
                None => failed = true,
            },
            b'C' => flags.cas = number(parse_u64(arg), &mut error, bad_token),
            b'M' => {
                if token.len() == 2 {
                    flags.mode = Some(token[1]);
                } else {
                    error = Some(b"CLIENT_ERROR incorrect length for M token");
                }
            }
            b'J' => {
                flags.initial = number(
                    parse_u64(arg),
                    &mut error,
                    b"CLIENT_ERROR invalid numeric initial value",
                )
                .unwrap_or(0)
            }
            b'D' => {
                flags.delta = number(
                    parse_u64(arg),
                    &mut error,
                    b"CLIENT_ERROR invalid numeric delta value",
                )
            }
            b'I' => flags.invalidate = true,
            _ => return Err(b"CLIENT_ERROR invalid flag"),
        }
        if error.is_some() {
            failed = true;
            message = error;
        }
    }
    if failed {
        Err(message.unwrap_or(BAD_FORMAT))
    } else {
        Ok(flags)
    }
}
