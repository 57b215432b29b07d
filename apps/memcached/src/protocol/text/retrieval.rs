//! `get`, `gets`, `gat` and `gats`.

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoBufError, IoChain};

use super::tokens::all_tokens;
use super::{Reply, Tokens};
use crate::protocol::common::{expires_at, parse_i32, push_u64};
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
    let keys = tokens.list().iter().skip(first_key).copied();
    let more = tokens.rest.into_iter().flat_map(all_tokens);
    let mut out = IoChain::new();
    for key in keys.chain(more) {
        if reply.refuse_long_key(key) {
            return done;
        }
        if let Some(item) = lookup(ctx, key, expires) {
            let cas = with_cas.then(|| shown_cas(ctx, item.cas));
            if value_reply(&mut out, key, &item, cas).is_err() {
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
    key: &[u8],
    item: &Item,
    cas: Option<u64>,
) -> Result<(), IoBufError> {
    let length = u64::try_from(item.value.len()).unwrap_or(u64::MAX);
    let flags = u64::from(item.flags);
    // Allocated once at its exact size, so that it becomes an `IoBuf`
    // without another allocation or copy.
    let size = b"VALUE ".len()
        + key.len()
        + 1
        + decimal_digits(flags)
        + 1
        + decimal_digits(length)
        + cas.map_or(0, |cas| 1 + decimal_digits(cas))
        + b"\r\n".len();
    let mut header = Vec::new();
    header
        .try_reserve_exact(size)
        .map_err(|_| IoBufError::OutOfMemory { requested: size })?;
    header.extend_from_slice(b"VALUE ");
    header.extend_from_slice(key);
    header.push(b' ');
    push_u64(&mut header, flags);
    header.push(b' ');
    push_u64(&mut header, length);
    if let Some(cas) = cas {
        header.push(b' ');
        push_u64(&mut header, cas);
    }
    header.extend_from_slice(b"\r\n");
    debug_assert_eq!(header.len(), size);
    out.try_reserve(VALUE_SEGMENTS)?;
    out.push_back(IoBuf::from_vec(header));
    if !item.value.is_empty() {
        out.push_back(item.value.clone());
    }
    out.push_back(IoBuf::from_static(b"\r\n"));
    Ok(())
}

/// How many decimal digits `n` is written with.
fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::decimal_digits;
    use crate::protocol::common::push_u64;
    use alloc::vec::Vec;

    #[test]
    fn decimal_digits_counts_what_push_u64_writes() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            let mut written = Vec::new();
            push_u64(&mut written, n);
            assert_eq!(decimal_digits(n), written.len(), "{n}");
        }
    }
}
