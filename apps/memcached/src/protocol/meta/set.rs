//! `ms`: meta set.

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use super::flags::{preparse, Flags, BAD_FORMAT};
use super::get::push_flag;
use super::{push_key, push_opaque, MAX_OPT_TOKENS};
use crate::protocol::common::{expires_at, parse_i32, KEY_MAX_LENGTH};
use crate::protocol::text::{
    data_block, refusal, shown_cas, store, swallow, Block, Reply, Request, Tokens,
};
use crate::protocol::{Context, Outcome};
use crate::stats::Counters;
use crate::store::{NewItem, Refused, SetMode, SetResult};

/// Handles `ms <key> <datalen> <flags>*` and its data block.
pub fn ms(
    request: &Request<'_>,
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
) -> Outcome {
    let done = Outcome::Consumed(request.line_end);
    let n = tokens.count();
    if n < 3 {
        reply.string(b"ERROR");
        return done;
    }
    if tokens.get(1).len() > KEY_MAX_LENGTH || n == 3 {
        reply.error(BAD_FORMAT);
        return done;
    }
    if n > MAX_OPT_TOKENS {
        reply.error(b"CLIENT_ERROR options flags too long");
        return done;
    }
    let vlen = parse_i32(tokens.get(2)).and_then(|vlen| usize::try_from(vlen).ok());
    let Some(vlen) = vlen.filter(|&vlen| vlen <= usize::try_from(i32::MAX - 2).unwrap_or(0)) else {
        reply.error(BAD_FORMAT);
        return done;
    };
    let block_len = vlen + 2;
    let refuse = |reply: &mut Reply, message: &'static [u8]| {
        reply.error(message);
        swallow(request.line_end, block_len)
    };
    let flags = match preparse(tokens, 3) {
        Ok(flags) => flags,
        Err(message) => return refuse(reply, message),
    };
    reply.noreply = flags.no_reply;
    let opaque_ok = tokens
        .list()
        .iter()
        .skip(2)
        .all(|token| token[0] != b'O' || token.len() <= super::MAX_OPAQUE_LENGTH);
    let Some(mode) = mode(&flags) else {
        return refuse(reply, b"CLIENT_ERROR invalid mode for ms M token");
    };
    if !opaque_ok {
        return refuse(reply, b"CLIENT_ERROR opaque token too long");
    }
    let refuse_item = |ctx: &Context<'_>, reply: &mut Reply, refused: Refused| {
        // memcached's mset drops the old item whatever the mode.
        ctx.counters.count_refused(refused);
        ctx.store.delete(&flags.key, None, ctx.now);
        refuse(reply, refusal(refused))
    };
    if let Err(refused) = ctx.store.admit(flags.key.len(), flags.client_flags, vlen) {
        return refuse_item(ctx, reply, refused);
    }
    let data = match data_block(request.input, request.line_end, block_len) {
        Block::Incomplete => {
            if !ctx.reserve_value(block_len) {
                return refuse_item(ctx, reply, Refused::NoMemory);
            }
            ctx.expected = request.line_end + block_len;
            return Outcome::Incomplete;
        }
        Block::Bad => None,
        Block::Good(data) => Some(data),
    };
    ctx.release_value();
    Counters::add(&ctx.counters.cmd_set, 1);
    let consumed = Outcome::Consumed(request.line_end + block_len);
    let Some(data) = data else {
        reply.error(b"CLIENT_ERROR bad data chunk");
        return consumed;
    };
    let Some(data) = ctx.copy_value(&data) else {
        // memcached's `item_alloc` failed.
        return refuse_item(ctx, reply, Refused::NoMemory);
    };
    let new = NewItem {
        flags: flags.client_flags,
        expires: flags.ttl.map_or(0, |ttl| expires_at(ttl, ctx.now)),
        value: data,
        cas: flags.cas.unwrap_or(0),
        allow_stale: flags.invalidate,
    };
    let stored = store(ctx, mode, &flags.key, new);
    finish(tokens, ctx, reply, &flags, stored);
    consumed
}

/// The store mode of `M` (with `C`, set and replace become cas).
fn mode(flags: &Flags) -> Option<SetMode> {
    let mode = match flags.mode {
        None | Some(b'S') => SetMode::Set,
        Some(b'E') => SetMode::Add,
        Some(b'A') => SetMode::Append,
        Some(b'P') => SetMode::Prepend,
        Some(b'R') => SetMode::Replace,
        Some(_) => return None,
    };
    let cas = flags.cas.is_some() && matches!(mode, SetMode::Set | SetMode::Replace);
    Some(if cas { SetMode::Cas } else { mode })
}

/// memcached's `_finalize_mset`: the status and the `O`, `k`, `c`
/// return flags in request order; HD is dropped under `q`.
fn finish(
    tokens: &Tokens<'_>,
    ctx: &Context<'_>,
    reply: &mut Reply,
    flags: &Flags,
    stored: SetResult,
) {
    let (status, cas): (&[u8], u64) = match stored {
        SetResult::Stored(cas) => (b"HD", cas),
        SetResult::Exists => (b"EX", 0),
        SetResult::NotFound => (b"NF", 0),
        SetResult::NotStored => (b"NS", 0),
        SetResult::TooLarge => return reply.error(refusal(Refused::TooLarge)),
        SetResult::OutOfMemory => return reply.error(refusal(Refused::NoMemory)),
    };
    let mut line = Vec::with_capacity(64);
    line.extend_from_slice(status);
    for token in tokens.list().iter().skip(3) {
        match token[0] {
            b'O' => {
                let _ = push_opaque(&mut line, token);
            }
            b'k' => push_key(&mut line, &flags.key, flags.key_binary),
            b'c' => push_flag(&mut line, b'c', shown_cas(ctx, cas)),
            _ => {}
        }
    }
    line.extend_from_slice(b"\r\n");
    if matches!(stored, SetResult::Stored(_)) {
        reply.line(line);
    } else {
        reply.push(IoBuf::from_vec(line));
    }
}
