//! `set`, `add`, `replace`, `append`, `prepend` and `cas`.

use ebb_iobuf::IoBuf;

use super::{data_block, swallow, Block, Reply, Request, Tokens};
use crate::protocol::common::{
    self, concat, expires_at, parse_i32, parse_u32, parse_u64, ConcatResult,
};
use crate::protocol::{Context, Outcome};
use crate::stats::Counters;
use crate::store::{SetMode, SetResult};

/// How a store command treats an existing item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `set`.
    Set,
    /// `add`.
    Add,
    /// `replace`.
    Replace,
    /// `append`.
    Append,
    /// `prepend`.
    Prepend,
    /// `cas`.
    Cas,
}

impl Mode {
    /// The mode of a text command name.
    pub fn from_command(command: &[u8]) -> Mode {
        match command {
            b"add" => Mode::Add,
            b"replace" => Mode::Replace,
            b"append" => Mode::Append,
            b"prepend" => Mode::Prepend,
            b"cas" => Mode::Cas,
            _ => Mode::Set,
        }
    }
}

/// What storing did, as memcached's `store_item` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreReply {
    /// STORED, with the new CAS value.
    Stored(u64),
    /// NOT_STORED.
    NotStored,
    /// EXISTS.
    Exists,
    /// NOT_FOUND.
    NotFound,
    /// Out of memory.
    NoMemory,
}

/// One item to store.
pub struct Value<'k> {
    /// The key.
    pub key: &'k [u8],
    /// Client flags.
    pub flags: u32,
    /// Unix expiry time (0: never).
    pub expires: u32,
    /// The data.
    pub data: IoBuf,
}

/// Stores `value` as memcached's `do_store_item` does for `mode`; `cas`
/// is the client's CAS value (0: none).
pub fn store(ctx: &Context<'_>, mode: Mode, value: Value<'_>, cas: u64) -> StoreReply {
    let cas_enabled = !ctx.settings.cas_disabled;
    let set_mode = match mode {
        Mode::Append | Mode::Prepend => {
            return match concat(
                ctx.store,
                value.key,
                &value.data,
                mode == Mode::Prepend,
                cas,
                ctx.now,
                cas_enabled,
            ) {
                ConcatResult::Stored(cas) => StoreReply::Stored(cas),
                ConcatResult::NotStored => StoreReply::NotStored,
                ConcatResult::Exists => StoreReply::Exists,
            };
        }
        Mode::Set => SetMode::Set,
        Mode::Add => SetMode::Add,
        Mode::Replace => SetMode::Replace,
        Mode::Cas => SetMode::Cas(cas),
    };
    let result = ctx.store.set(
        set_mode,
        value.key,
        value.flags,
        value.expires,
        value.data,
        ctx.now,
    );
    let stored = match result {
        SetResult::Stored(cas) => StoreReply::Stored(cas),
        SetResult::NotStored | SetResult::TooLarge => StoreReply::NotStored,
        SetResult::Exists => StoreReply::Exists,
        SetResult::NotFound => StoreReply::NotFound,
        SetResult::OutOfMemory => StoreReply::NoMemory,
    };
    if mode == Mode::Cas {
        let counter = match stored {
            StoreReply::Stored(_) => &ctx.counters.cas_hits,
            StoreReply::Exists => &ctx.counters.cas_badval,
            _ => &ctx.counters.cas_misses,
        };
        Counters::add(counter, 1);
    }
    stored
}

/// Handles a text store command (`ntokens` already checked).
pub fn update(
    request: &Request<'_>,
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    mode: Mode,
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
    let cas = if mode == Mode::Cas {
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
    if common::too_large(
        key.len(),
        flags,
        vlen,
        ctx.store.item_size_max(),
        !ctx.settings.cas_disabled,
    ) {
        return too_large(request, ctx, reply, mode == Mode::Set, key, vlen + 2);
    }
    let block = data_block(request.input, request.line_end, vlen + 2);
    let value = match block {
        Block::Incomplete => return Outcome::Incomplete,
        Block::Bad => None,
        Block::Good(data) => Some(data),
    };
    Counters::add(&ctx.counters.cmd_set, 1);
    let consumed = Outcome::Consumed(request.line_end + vlen + 2);
    let Some(data) = value else {
        reply.string(b"CLIENT_ERROR bad data chunk");
        return consumed;
    };
    let expires = expires_at(exptime, ctx.now);
    let value = Value {
        key,
        flags,
        expires,
        data,
    };
    reply.string(match store(ctx, mode, value, cas) {
        StoreReply::Stored(_) => b"STORED",
        StoreReply::NotStored => b"NOT_STORED",
        StoreReply::Exists => b"EXISTS",
        StoreReply::NotFound => b"NOT_FOUND",
        StoreReply::NoMemory => b"SERVER_ERROR out of memory storing object",
    });
    consumed
}

/// memcached refuses the item before reading it, swallows its data, and
/// (for `set`) drops the old item so that stale data does not linger.
fn too_large(
    request: &Request<'_>,
    ctx: &Context<'_>,
    reply: &mut Reply,
    is_set: bool,
    key: &[u8],
    len: usize,
) -> Outcome {
    if is_set {
        ctx.store.delete(key, None, ctx.now);
    }
    reply.string(b"SERVER_ERROR object too large for cache");
    swallow(request.line_end, len)
}
