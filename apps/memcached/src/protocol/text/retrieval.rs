//! `get`, `gets`, `gat` and `gats`.

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoChain};

use super::tokens::all_tokens;
use super::{Reply, Tokens};
use crate::protocol::common::{expires_at, parse_i32, push_u64};
use crate::protocol::{Context, Outcome};
use crate::stats::Counters;
use crate::store::Item;

/// The CAS value a client sees (0 with `-C`).
pub fn shown_cas(ctx: &Context<'_>, cas: u64) -> u64 {
    ctx.store.shown_cas(cas)
}

/// Handles the get family; `touch` for `gat`/`gats`, whose first argument
/// is the new expiry time.
pub fn get(
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    with_cas: bool,
    touch: bool,
    done: Outcome,
) -> Outcome {
    let mut first_key = 1;
    let mut expires = None;
    if touch {
        let Some(exptime) = parse_i32(tokens.get(1)) else {
            reply.string(b"CLIENT_ERROR invalid exptime argument");
            return done;
        };
        expires = Some(expires_at(exptime, ctx.now));
        first_key = 2;
    }
    let keys = tokens.list.iter().skip(first_key).copied();
    let more = tokens.rest.into_iter().flat_map(all_tokens);
    let mut out = IoChain::new();
    for key in keys.chain(more) {
        if reply.refuse_long_key(key) {
            return done;
        }
        if let Some(item) = lookup(ctx, key, expires) {
            value_reply(
                &mut out,
                key,
                &item,
                with_cas.then(|| shown_cas(ctx, item.cas)),
            );
        }
    }
    out.push_back(IoBuf::from_static(b"END\r\n"));
    reply.chain = out;
    done
}

fn lookup(ctx: &Context<'_>, key: &[u8], expires: Option<u32>) -> Option<Item> {
    let counters = ctx.counters;
    match expires {
        Some(expires) => {
            let item = ctx.store.touch(key, expires, ctx.now);
            Counters::add(&counters.cmd_touch, 1);
            let counter = if item.is_some() {
                &counters.touch_hits
            } else {
                &counters.touch_misses
            };
            Counters::add(counter, 1);
            item
        }
        None => {
            let item = ctx.store.get(key, ctx.now);
            Counters::add(&counters.cmd_get, 1);
            let counter = if item.is_some() {
                &counters.get_hits
            } else {
                &counters.get_misses
            };
            Counters::add(counter, 1);
            item
        }
    }
}

/// Appends `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`, the data
/// chained as the stored buffer itself (no copy).
pub fn value_reply(out: &mut IoChain, key: &[u8], item: &Item, cas: Option<u64>) {
    let mut header = Vec::with_capacity(key.len() + 48);
    header.extend_from_slice(b"VALUE ");
    header.extend_from_slice(key);
    header.push(b' ');
    push_u64(&mut header, u64::from(item.flags));
    header.push(b' ');
    push_u64(
        &mut header,
        u64::try_from(item.value.len()).unwrap_or(u64::MAX),
    );
    if let Some(cas) = cas {
        header.push(b' ');
        push_u64(&mut header, cas);
    }
    header.extend_from_slice(b"\r\n");
    out.push_back(IoBuf::from_vec(header));
    if !item.value.is_empty() {
        out.push_back(item.value.clone());
    }
    out.push_back(IoBuf::from_static(b"\r\n"));
}
