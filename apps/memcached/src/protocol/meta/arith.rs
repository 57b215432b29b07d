//! `ma`: meta arithmetic.

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use super::flags::{preparse, Flags, BAD_FORMAT};
use super::get::{push_flag, push_ttl};
use super::{push_key, push_opaque, push_opaque_and_key, MAX_OPT_TOKENS};
use crate::protocol::common::{expires_at, push_u64, KEY_MAX_LENGTH};
use crate::protocol::text::{shown_cas, store, Reply, Tokens};
use crate::protocol::Context;
use crate::stats::Counters;
use crate::store::{ArithError, Delta, NewItem, SetMode, SetResult};

const OPAQUE_TOO_LONG: &[u8] = b"CLIENT_ERROR opaque token too long";

/// Handles `ma <key> <flags>*`.
pub fn ma(tokens: &Tokens<'_>, ctx: &mut Context<'_>, reply: &mut Reply) {
    let n = tokens.count();
    if n < 3 {
        return reply.string(b"ERROR");
    }
    if tokens.get(1).len() > KEY_MAX_LENGTH {
        return reply.string(BAD_FORMAT);
    }
    if n > MAX_OPT_TOKENS {
        return reply.string(b"CLIENT_ERROR options flags too long");
    }
    let Ok(flags) = preparse(tokens, 2) else {
        return reply.error(b"CLIENT_ERROR invalid or duplicate flag");
    };
    reply.noreply = flags.no_reply;
    let incr = match flags.mode {
        None | Some(b'I' | b'+') => true,
        Some(b'D' | b'-') => false,
        Some(_) => return reply.error(b"CLIENT_ERROR invalid mode for ma M token"),
    };
    ctx.log_lookup(&flags.key);
    let counters = ctx.counters;
    let delta = ctx.store.add_delta(
        &flags.key,
        incr,
        flags.delta.unwrap_or(1),
        flags.cas.unwrap_or(0),
        ctx.now,
    );
    let (status, created): (&[u8], bool) = match delta {
        Ok(_) => {
            Counters::add(
                if incr {
                    &counters.incr_hits
                } else {
                    &counters.decr_hits
                },
                1,
            );
            (b"", false)
        }
        Err(ArithError::NonNumeric) => {
            return reply.error(b"CLIENT_ERROR cannot increment or decrement non-numeric value");
        }
        Err(ArithError::Exists) => (b"EX", false),
        Err(ArithError::NotFound) if flags.vivify.is_some() => (b"NS", true),
        Err(ArithError::NotFound) => {
            Counters::add(
                if incr {
                    &counters.incr_misses
                } else {
                    &counters.decr_misses
                },
                1,
            );
            (b"NF", false)
        }
    };
    let item = match delta {
        Ok(delta) => Some(delta),
        Err(_) if created => vivify(ctx, &flags),
        Err(_) => None,
    };
    match item {
        Some(item) => found(tokens, ctx, reply, &flags, item, created),
        None => {
            let mut line = Vec::with_capacity(64);
            line.extend_from_slice(status);
            if push_opaque_and_key(&mut line, tokens, &flags.key, flags.key_binary).is_err() {
                return reply.error(OPAQUE_TOO_LONG);
            }
            line.extend_from_slice(b"\r\n");
            reply.push(IoBuf::from_vec(line));
        }
    }
}

/// `N`: creates the item with the initial value (`J`, default 0).
fn vivify(ctx: &Context<'_>, flags: &Flags) -> Option<Delta> {
    let mut text = Vec::with_capacity(20);
    push_u64(&mut text, flags.initial);
    let new = NewItem {
        flags: 0,
        expires: 0,
        value: IoBuf::from_vec(text),
        cas: 0,
        allow_stale: false,
    };
    match store(ctx, SetMode::Add, &flags.key, new) {
        SetResult::Stored(cas) => Some(Delta {
            value: flags.initial,
            cas,
            expires: 0,
        }),
        _ => None,
    }
}

/// The reply for an item incremented or created; applies `T`/`N`.
fn found(
    tokens: &Tokens<'_>,
    ctx: &Context<'_>,
    reply: &mut Reply,
    flags: &Flags,
    item: Delta,
    created: bool,
) {
    let now = ctx.now;
    let mut number = Vec::with_capacity(20);
    push_u64(&mut number, item.value);
    let mut line = Vec::with_capacity(64);
    if flags.value {
        line.extend_from_slice(b"VA ");
        push_u64(&mut line, number.len() as u64);
    } else {
        line.extend_from_slice(b"HD");
    }
    let mut expires = item.expires;
    for token in tokens.list().iter().skip(2) {
        match token[0] {
            b'c' => push_flag(&mut line, b'c', shown_cas(ctx, item.cas)),
            b't' => push_ttl(&mut line, expires, now),
            b'T' => expires = flags.ttl.map_or(expires, |ttl| expires_at(ttl, now)),
            b'N' if created => expires = flags.vivify.map_or(expires, |ttl| expires_at(ttl, now)),
            b'O' if push_opaque(&mut line, token).is_err() => return reply.error(OPAQUE_TOO_LONG),
            b'k' => push_key(&mut line, &flags.key, flags.key_binary),
            _ => {}
        }
    }
    if expires != item.expires {
        ctx.store.touch(&flags.key, expires, now);
    }
    if flags.value {
        line.extend_from_slice(b"\r\n");
        line.extend_from_slice(&number);
    }
    line.extend_from_slice(b"\r\n");
    if created {
        reply.push(IoBuf::from_vec(line));
    } else {
        reply.line(line);
    }
}
