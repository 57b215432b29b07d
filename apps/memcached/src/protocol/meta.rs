//! The meta commands (`mg`, `ms`, `md`, `ma`, `mn`, `me`) of memcached
//! 1.6.18, reached through the text protocol.

mod arith;
mod debug;
mod delete;
mod flags;
mod get;
mod set;

use alloc::vec::Vec;

use super::common::{base64_encode, KEY_MAX_LENGTH};
use super::text::{Reply, Request, Tokens};
use super::{Context, Outcome};

/// memcached's `MFLAG_MAX_OPT_LENGTH`: most tokens in a meta command,
/// counting memcached's terminal token.
pub const MAX_OPT_TOKENS: usize = 20;

/// memcached's `MFLAG_MAX_OPAQUE_LENGTH`.
pub const MAX_OPAQUE_LENGTH: usize = 32;

/// Handles meta command `m<which>`.
pub(crate) fn handle(
    which: u8,
    request: &Request<'_>,
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
) -> Outcome {
    let done = Outcome::Consumed(request.line_end);
    match which {
        b'g' => get::mg(tokens, ctx, reply),
        b's' => return set::ms(request, tokens, ctx, reply),
        b'd' => delete::md(tokens, ctx, reply),
        b'a' => arith::ma(tokens, ctx, reply),
        b'e' => debug::me(tokens, ctx, reply),
        b'n' => reply.string(b"MN"),
        _ => reply.string(b"ERROR"),
    }
    done
}

/// The key meta command `m<which>` (`g`, `s`, `d` or `a`) names in
/// `tokens`, base64-decoded under `b`, if its handler would act on it;
/// `None` for a command whose handler answers an error without touching
/// the store (too few tokens, a key over 250 bytes, too many flags, a bad
/// flag). A node of several forwards the command to this key's owner
/// (`cluster/meta_forward.rs`).
pub fn acted_on_key(which: u8, tokens: &Tokens<'_>) -> Option<Vec<u8>> {
    let flags_from = match which {
        b'g' | b'd' | b'a' => 2,
        b's' => 3,
        _ => return None,
    };
    let n = tokens.count();
    let key = tokens.get(1);
    if n < 3 || (which == b's' && n == 3) || n > MAX_OPT_TOKENS || key.len() > KEY_MAX_LENGTH {
        return None;
    }
    let flags = flags::preparse(tokens, flags_from).ok()?;
    (!flags.key.is_empty() && flags.key.len() <= KEY_MAX_LENGTH).then_some(flags.key)
}

/// Appends ` k<key>`, base64-encoded with ` b` after it for binary keys.
pub(crate) fn push_key(out: &mut Vec<u8>, key: &[u8], binary: bool) {
    out.extend_from_slice(b" k");
    if binary {
        base64_encode(key, out);
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

/// Appends the return flags every meta reply echoes: ` O<opaque>` and
/// the key, in request order. `Err` if an opaque is too long.
pub(crate) fn push_opaque_and_key(
    out: &mut Vec<u8>,
    tokens: &Tokens<'_>,
    key: &[u8],
    binary: bool,
) -> Result<(), ()> {
    for token in tokens.list().iter().skip(2) {
        match token[0] {
            b'O' => push_opaque(out, token)?,
            b'k' => push_key(out, key, binary),
            _ => {}
        }
    }
    Ok(())
}

/// Appends ` O<opaque>`; `Err` if it is too long.
pub(crate) fn push_opaque(out: &mut Vec<u8>, token: &[u8]) -> Result<(), ()> {
    if token.len() > MAX_OPAQUE_LENGTH {
        return Err(());
    }
    out.push(b' ');
    out.extend_from_slice(token);
    Ok(())
}
