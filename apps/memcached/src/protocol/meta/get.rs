//! `mg`: meta get.

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use super::flags::{preparse, Flags, BAD_FORMAT};
use super::{push_key, push_opaque, push_opaque_and_key, MAX_OPT_TOKENS};
use crate::protocol::common::{expires_at, push_u64, KEY_MAX_LENGTH};
use crate::protocol::text::{shown_cas, Reply, Tokens};
use crate::protocol::Context;
use crate::stats::Counters;
use crate::store::{Item, Update};

const OPAQUE_TOO_LONG: &[u8] = b"CLIENT_ERROR opaque token too long";

/// Handles `mg <key> <flags>*`.
pub fn mg(tokens: &Tokens<'_>, ctx: &mut Context<'_>, reply: &mut Reply) {
    let n = tokens.count();
    if n < 3 {
        reply.string(b"ERROR");
        return;
    }
    if tokens.get(1).len() > KEY_MAX_LENGTH {
        reply.error(BAD_FORMAT);
        return;
    }
    if n > MAX_OPT_TOKENS {
        reply.error(b"CLIENT_ERROR options flags are too long");
        return;
    }
    let flags = match preparse(tokens, 2) {
        Ok(flags) => flags,
        Err(message) => return reply.error(message),
    };
    reply.noreply = flags.no_reply;
    let (item, created) = fetch(ctx, &flags);
    let counters = ctx.counters;
    let (cmd, hits, misses) = if flags.ttl.is_some() {
        (
            &counters.cmd_touch,
            &counters.touch_hits,
            &counters.touch_misses,
        )
    } else {
        (&counters.cmd_get, &counters.get_hits, &counters.get_misses)
    };
    Counters::add(cmd, 1);
    match item {
        Some(item) => {
            Counters::add(hits, 1);
            hit(tokens, ctx, reply, &flags, &item, created);
        }
        None => {
            Counters::add(misses, 1);
            let mut line = Vec::with_capacity(64);
            line.extend_from_slice(b"EN");
            if push_opaque_and_key(&mut line, tokens, &flags.key, flags.key_binary).is_err() {
                return reply.error(OPAQUE_TOO_LONG);
            }
            line.extend_from_slice(b"\r\n");
            reply.line(line);
        }
    }
}

/// The live item, or with `N` a new empty one (`true`: created).
fn fetch(ctx: &Context<'_>, flags: &Flags) -> (Option<Item>, bool) {
    let item = ctx.store.get(&flags.key, ctx.now);
    if item.is_some() || flags.vivify.is_none() {
        return (item, false);
    }
    let empty = Item {
        flags: 0,
        expires: 0,
        cas: 0,
        stored: 0,
        value: IoBuf::new(),
    };
    let (existing, cas) = ctx
        .store
        .update(&flags.key, ctx.now, |current| match current {
            Some(item) => Update::Keep(Some(item.clone())),
            None => Update::Put(empty.clone(), None),
        });
    match (existing, cas) {
        (Some(item), _) => (Some(item), false),
        (None, Some(cas)) => (
            Some(Item {
                cas,
                stored: ctx.now,
                ..empty
            }),
            true,
        ),
        (None, None) => (None, false),
    }
}

/// Builds a hit's reply; applies `T`/`N` expiry changes in flag order.
fn hit(
    tokens: &Tokens<'_>,
    ctx: &Context<'_>,
    reply: &mut Reply,
    flags: &Flags,
    item: &Item,
    created: bool,
) {
    let now = ctx.now;
    let mut line = Vec::with_capacity(96);
    if flags.value {
        line.extend_from_slice(b"VA ");
        push_u64(&mut line, item.value.len() as u64);
    } else {
        line.extend_from_slice(b"HD");
    }
    let mut expires = item.expires;
    let mut won = false;
    for token in tokens.list.iter().skip(2) {
        match token[0] {
            b'T' => expires = flags.ttl.map_or(expires, |ttl| expires_at(ttl, now)),
            b'N' if created => {
                expires = flags.vivify.map_or(expires, |ttl| expires_at(ttl, now));
                won = true;
            }
            b'R' => {}
            b's' => push_flag(&mut line, b's', item.value.len() as u64),
            b't' => push_ttl(&mut line, expires, now),
            b'c' => push_flag(&mut line, b'c', shown_cas(ctx, item.cas)),
            b'f' => push_flag(&mut line, b'f', u64::from(item.flags)),
            b'l' => push_flag(&mut line, b'l', u64::from(now.saturating_sub(item.stored))),
            b'h' => line.extend_from_slice(b" h0"),
            b'O' if push_opaque(&mut line, token).is_err() => return reply.error(OPAQUE_TOO_LONG),
            b'k' => push_key(&mut line, &flags.key, flags.key_binary),
            _ => {}
        }
    }
    if expires != item.expires {
        ctx.store.touch(&flags.key, expires, now);
    }
    if won {
        line.extend_from_slice(b" W");
    }
    line.extend_from_slice(b"\r\n");
    reply.push(IoBuf::from_vec(line));
    if flags.value {
        reply.push(item.value.clone());
        reply.push(IoBuf::from_static(b"\r\n"));
    }
}

/// Appends ` <flag><value>`.
pub fn push_flag(line: &mut Vec<u8>, flag: u8, value: u64) {
    line.push(b' ');
    line.push(flag);
    push_u64(line, value);
}

/// Appends ` t<seconds left>` (` t-1`: never expires).
pub fn push_ttl(line: &mut Vec<u8>, expires: u32, now: u32) {
    if expires == 0 {
        line.extend_from_slice(b" t-1");
    } else {
        push_flag(line, b't', u64::from(expires.wrapping_sub(now)));
    }
}
