//! `mg`: meta get.

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use super::flags::{preparse, Flags, BAD_FORMAT};
use super::{push_key, push_opaque, push_opaque_and_key, MAX_OPT_TOKENS};
use crate::protocol::common::{expires_at, push_u64, KEY_MAX_LENGTH};
use crate::protocol::text::{shown_cas, Reply, Tokens};
use crate::protocol::Context;
use crate::stats::Counters;
use crate::store::{Item, Marks, Update};
use crate::watch::WATCHERS;

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
    let now = ctx.now;
    let mut size = None;
    let looked_up = ctx
        .store
        .fetch(&flags.key, now, !flags.no_update, |item, marks| {
            size = Some(item.value.len());
            hit(tokens, ctx, &flags, item, Some(marks))
        });
    WATCHERS.item_get(ctx.site, &flags.key, size);
    let found = match looked_up {
        Some(built) => Some(built),
        None if flags.vivify.is_some() => vivify(tokens, ctx, &flags),
        None => None,
    };
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
    match found {
        Some(Ok(hit)) => {
            Counters::add(hits, 1);
            if let Some(expires) = hit.new_expiry {
                ctx.store.touch(&flags.key, expires, now);
            }
            reply.push(IoBuf::from_vec(hit.line));
            if let Some(value) = hit.value {
                reply.push(value);
                reply.push(IoBuf::from_static(b"\r\n"));
            }
        }
        Some(Err(message)) => {
            Counters::add(hits, 1);
            reply.error(message);
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

/// A hit's reply, and the expiry its `T`/`N` flags set.
struct Hit {
    line: Vec<u8>,
    value: Option<IoBuf>,
    new_expiry: Option<u32>,
}

/// `N` on a miss: creates an empty item (its creator wins the right to
/// fill it, `W`) and builds the hit reply for it. If another request
/// created it first, the reply is that of a hit on its item.
fn vivify(
    tokens: &Tokens<'_>,
    ctx: &Context<'_>,
    flags: &Flags,
) -> Option<Result<Hit, &'static [u8]>> {
    let empty = Item {
        flags: 0,
        expires: 0,
        cas: 0,
        stored: 0,
        value: IoBuf::new(),
        stale: false,
    };
    let now = ctx.now;
    let (created, cas) = ctx.store.update(&flags.key, now, |current| match current {
        Some(_) => Update::Keep(false),
        None => Update::PutWon(empty.clone(), true),
    });
    match (created, cas) {
        (true, Some(cas)) => {
            let item = Item {
                cas,
                stored: now,
                ..empty
            };
            Some(hit(tokens, ctx, flags, &item, None))
        }
        _ => ctx
            .store
            .fetch(&flags.key, now, !flags.no_update, |item, marks| {
                hit(tokens, ctx, flags, item, Some(marks))
            }),
    }
}

/// Builds a hit's reply (memcached 1.6.18's `process_mget_command`): the
/// return flags in request order, `T`/`N`/`R` applied in that order too,
/// then `Z` (a win token was already handed out), `X` (stale) and `W`
/// (this request wins the right to recache: it created the item with `N`,
/// its `R` is above the TTL left, or the item is stale). `marks` is `None`
/// for an item this request just created.
fn hit(
    tokens: &Tokens<'_>,
    ctx: &Context<'_>,
    flags: &Flags,
    item: &Item,
    marks: Option<&Marks<'_>>,
) -> Result<Hit, &'static [u8]> {
    let now = ctx.now;
    let created = marks.is_none();
    let token_sent = marks.is_some_and(Marks::token_sent);
    let mut line = Vec::with_capacity(96);
    if flags.value {
        line.extend_from_slice(b"VA ");
        push_u64(&mut line, item.value.len() as u64);
    } else {
        line.extend_from_slice(b"HD");
    }
    let mut expires = item.expires;
    let mut wins = created;
    for token in tokens.list().iter().skip(2) {
        match token[0] {
            b'T' => expires = flags.ttl.map_or(expires, |ttl| expires_at(ttl, now)),
            b'N' if created => expires = flags.vivify.map_or(expires, |ttl| expires_at(ttl, now)),
            b'R' => {
                let recache = flags.recache.map(|ttl| expires_at(ttl, now));
                if !token_sent && !created && expires != 0 && recache.is_some_and(|r| expires < r) {
                    wins = true;
                }
            }
            b's' => push_flag(&mut line, b's', item.value.len() as u64),
            b't' => push_ttl(&mut line, expires, now),
            b'c' => push_flag(&mut line, b'c', shown_cas(ctx, item.cas)),
            b'f' => push_flag(&mut line, b'f', u64::from(item.flags)),
            b'l' => {
                let last = marks.map_or(now, Marks::last_access);
                push_flag(&mut line, b'l', u64::from(now.saturating_sub(last)));
            }
            b'h' => {
                let fetched = marks.is_some_and(Marks::fetched);
                line.extend_from_slice(if fetched { b" h1" } else { b" h0" });
            }
            b'O' => push_opaque(&mut line, token).map_err(|()| OPAQUE_TOO_LONG)?,
            b'k' => push_key(&mut line, &flags.key, flags.key_binary),
            _ => {}
        }
    }
    // A stale item's first fetch wins.
    wins |= item.stale && !token_sent;
    // Two cores may race for the token: only one takes it.
    let won = match marks {
        Some(marks) if wins => marks.claim_token(),
        _ => wins,
    };
    if token_sent || (wins && !won) {
        line.extend_from_slice(b" Z");
    }
    if item.stale {
        line.extend_from_slice(b" X");
    }
    if won {
        line.extend_from_slice(b" W");
    }
    line.extend_from_slice(b"\r\n");
    Ok(Hit {
        line,
        value: flags.value.then(|| item.value.clone()),
        new_expiry: (expires != item.expires).then_some(expires),
    })
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
