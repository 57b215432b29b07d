//! `md`: meta delete.

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use super::flags::{preparse, BAD_FORMAT};
use super::{push_opaque_and_key, MAX_OPT_TOKENS};
use crate::protocol::common::{expires_at, KEY_MAX_LENGTH};
use crate::protocol::text::{Reply, Tokens};
use crate::protocol::Context;
use crate::stats::Counters;
use crate::store::Update;

/// What `md` found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Deleted {
    Hit,
    NotFound,
    Exists,
}

/// Handles `md <key> <flags>*`.
pub fn md(tokens: &Tokens<'_>, ctx: &mut Context<'_>, reply: &mut Reply) {
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
    let mut returned = Vec::with_capacity(64);
    if push_opaque_and_key(&mut returned, tokens, &flags.key, flags.key_binary).is_err() {
        return reply.error(b"CLIENT_ERROR opaque token too long");
    }
    let now = ctx.now;
    let ttl = flags.ttl.map(|ttl| expires_at(ttl, now));
    ctx.log_lookup(&flags.key);
    let (result, _) = ctx.store.update(&flags.key, now, |current| match current {
        None => Update::Keep(Deleted::NotFound),
        Some(item) if flags.cas.is_some_and(|cas| cas != item.cas) => Update::Keep(Deleted::Exists),
        Some(item) if flags.invalidate => {
            // memcached marks the item stale in place and gives it a new
            // CAS value; the next meta get wins the right to recache it.
            let mut item = item.clone();
            item.expires = ttl.unwrap_or(item.expires);
            item.stale = true;
            Update::Modify(item, Deleted::Hit)
        }
        Some(_) => Update::Remove(Deleted::Hit),
    });
    // memcached counts an invalidation as neither a delete hit nor a miss.
    let invalidated = result == Deleted::Hit && flags.invalidate;
    let counter = if result == Deleted::Hit {
        &ctx.counters.delete_hits
    } else {
        &ctx.counters.delete_misses
    };
    if !invalidated {
        Counters::add(counter, 1);
    }
    let status: &[u8] = match result {
        Deleted::Hit => b"HD",
        Deleted::NotFound => b"NF",
        Deleted::Exists => b"EX",
    };
    let mut line = Vec::with_capacity(returned.len() + 4);
    line.extend_from_slice(status);
    line.extend_from_slice(&returned);
    line.extend_from_slice(b"\r\n");
    if result == Deleted::Hit {
        reply.line(line);
    } else {
        reply.push(IoBuf::from_vec(line));
    }
}
