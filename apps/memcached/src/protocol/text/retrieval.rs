//! `get`, `gets`, `gat` and `gats`.

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoBufError, IoChain};

use super::tokens::all_tokens;
use super::{Reply, Tokens};
use crate::protocol::common::{expires_at, parse_i32, push_u64, KEY_MAX_LENGTH};
use crate::protocol::{Context, Outcome};
use crate::stats::Counters;
use crate::store::Item;
use crate::watch::WATCHERS;

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
    let mut header = Vec::with_capacity(KEY_MAX_LENGTH + 48);
    for key in keys.chain(more) {
        if reply.refuse_long_key(key) {
            return done;
        }
        if let Some(item) = lookup(ctx, key, expires) {
            let cas = with_cas.then(|| shown_cas(ctx, item.cas));
            if value_reply(&mut out, &mut header, key, &item, cas).is_err() {
                // memcached's process_get_command, when its reply cannot
                // grow: this instead of the values and END. The values
                // gathered so far go first: the error needs a little
                // memory too.
                drop(out);
                reply.string(b"SERVER_ERROR out of memory writing get response");
                return done;
            }
        }
    }
    out.push_back(IoBuf::from_static(b"END\r\n"));
    reply.chain = out;
    done
}

fn lookup(ctx: &Context<'_>, key: &[u8], expires: Option<u32>) -> Option<Item> {
    let counters = ctx.counters;
    let item = match expires {
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
    };
    let size = item.as_ref().map(|item| item.value.len());
    WATCHERS.item_get(ctx.site, key, size);
    item
}

/// Segments [`value_reply`] appends at most.
const VALUE_SEGMENTS: usize = 3;

/// Appends `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`, the data
/// chained as the stored buffer itself (no copy), the header written in
/// `header` (scratch space) and copied into a buffer of its exact size. A
/// multiget's reply grows with the keys a client lists, so this fails
/// instead of aborting when there is no memory for it (`out` is then
/// unchanged).
fn value_reply(
    out: &mut IoChain,
    header: &mut Vec<u8>,
    key: &[u8],
    item: &Item,
    cas: Option<u64>,
) -> Result<(), IoBufError> {
    header.clear();
    header.extend_from_slice(b"VALUE ");
    header.extend_from_slice(key);
    header.push(b' ');
    push_u64(header, u64::from(item.flags));
    header.push(b' ');
    push_u64(header, u64::try_from(item.value.len()).unwrap_or(u64::MAX));
    if let Some(cas) = cas {
        header.push(b' ');
        push_u64(header, cas);
    }
    header.extend_from_slice(b"\r\n");
    // Exactly as long as it holds, so that it becomes an `IoBuf` without
    // another allocation.
    let mut exact = Vec::new();
    exact
        .try_reserve_exact(header.len())
        .map_err(|_| IoBufError::OutOfMemory {
            requested: header.len(),
        })?;
    exact.extend_from_slice(header);
    out.try_reserve(VALUE_SEGMENTS)?;
    out.push_back(IoBuf::from_vec(exact));
    if !item.value.is_empty() {
        out.push_back(item.value.clone());
    }
    out.push_back(IoBuf::from_static(b"\r\n"));
    Ok(())
}
