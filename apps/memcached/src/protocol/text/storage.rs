//! `set`, `add`, `replace`, `append`, `prepend` and `cas`.

use super::{data_block, swallow, Block, Reply, Request, Tokens};
use crate::protocol::common::{expires_at, parse_i32, parse_u32, parse_u64};
use crate::protocol::{Context, Outcome};
use crate::stats::Counters;
use crate::store::{NewItem, Refused, SetMode, SetResult};
use crate::watch::WATCHERS;

/// The store mode of a text command name.
pub fn mode_of(command: &[u8]) -> SetMode {
    match command {
        b"add" => SetMode::Add,
        b"replace" => SetMode::Replace,
        b"append" => SetMode::Append,
        b"prepend" => SetMode::Prepend,
        b"cas" => SetMode::Cas,
        _ => SetMode::Set,
    }
}

/// Stores `new` under `key` as `mode` asks (the store decides the
/// outcome) and counts it.
pub fn store(ctx: &Context<'_>, mode: SetMode, key: &[u8], new: NewItem) -> SetResult {
    let (ttl, size) = (new.expires.saturating_sub(ctx.now), new.value.len());
    let result = ctx.store.set(mode, key, new, ctx.now);
    ctx.counters.count_store(mode, result);
    WATCHERS.item_store(ctx.site, key, (mode, result), ttl, size);
    result
}

/// A refused store's reply in the text and meta protocols.
pub fn refusal(refused: Refused) -> &'static [u8] {
    match refused {
        Refused::TooLarge => b"SERVER_ERROR object too large for cache",
        Refused::NoMemory => b"SERVER_ERROR out of memory storing object",
    }
}

/// Handles a text store command (`ntokens` already checked).
pub fn update(
    request: &Request<'_>,
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    mode: SetMode,
) -> Outcome {
    reply.noreply = tokens.noreply();
    let done = Outcome::Consumed(request.line_end);
    let key = tokens.get(1);
    if reply.refuse_long_key(key) {
        return done;
    }
    let numbers = (
        parse_u32(tokens.get(2)),
        parse_i32(tokens.get(3)),
        parse_i32(tokens.get(4)),
    );
    let (Some(flags), Some(exptime), Some(vlen)) = numbers else {
        reply.string(b"CLIENT_ERROR bad command line format");
        return done;
    };
    let cas = if mode == SetMode::Cas {
        parse_u64(tokens.get(5))
    } else {
        Some(0)
    };
    let (Some(cas), Ok(vlen)) = (cas, usize::try_from(vlen)) else {
        reply.string(b"CLIENT_ERROR bad command line format");
        return done;
    };
    if vlen > usize::try_from(i32::MAX - 2).unwrap_or(0) {
        reply.string(b"CLIENT_ERROR bad command line format");
        return done;
    }
    if let Err(refused) = ctx.store.admit(key.len(), flags, vlen) {
        return refuse(request, ctx, reply, (mode, key), vlen + 2, refused);
    }
    // memcached's `item_alloc` failed: refused and swallowed as for -m.
    let out_of_memory = |ctx: &Context<'_>, reply: &mut Reply| {
        refuse(
            request,
            ctx,
            reply,
            (mode, key),
            vlen + 2,
            Refused::NoMemory,
        )
    };
    let block = data_block(request.input, request.line_end, vlen + 2);
    let value = match block {
        Block::Incomplete => {
            if !ctx.reserve_value(vlen + 2) {
                return out_of_memory(ctx, reply);
            }
            ctx.expected = request.line_end + vlen + 2;
            return Outcome::Incomplete;
        }
        Block::Bad => None,
        Block::Good(data) => Some(data),
    };
    ctx.release_value();
    Counters::add(&ctx.counters.cmd_set, 1);
    let consumed = Outcome::Consumed(request.line_end + vlen + 2);
    let Some(data) = value else {
        reply.string(b"CLIENT_ERROR bad data chunk");
        return consumed;
    };
    let Some(data) = ctx.copy_value(&data) else {
        // The data has arrived already; the reply and swallowing are the same.
        return out_of_memory(ctx, reply);
    };
    let new = NewItem {
        flags,
        expires: expires_at(exptime, ctx.now),
        value: data,
        cas,
        allow_stale: false,
    };
    reply.string(match store(ctx, mode, key, new) {
        SetResult::Stored(_) => b"STORED",
        SetResult::NotStored => b"NOT_STORED",
        SetResult::Exists => b"EXISTS",
        SetResult::NotFound => b"NOT_FOUND",
        SetResult::TooLarge => refusal(Refused::TooLarge),
        SetResult::OutOfMemory => refusal(Refused::NoMemory),
    });
    consumed
}

/// memcached refuses the item before reading it (its `item_alloc`
/// failed), counts it, swallows its data, and (for `set`) drops the old
/// item so that stale data does not linger.
fn refuse(
    request: &Request<'_>,
    ctx: &Context<'_>,
    reply: &mut Reply,
    (mode, key): (SetMode, &[u8]),
    len: usize,
    refused: Refused,
) -> Outcome {
    ctx.counters.count_refused(refused);
    if mode == SetMode::Set {
        ctx.store.delete(key, None, ctx.now);
    }
    reply.string(refusal(refused));
    swallow(request.line_end, len)
}
