//! `get`, `gets`, `gat` and `gats`.

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoBufError, IoChain};

use super::tokens::all_tokens;
use super::{Reply, Tokens};
use crate::protocol::common::{expires_at, parse_i32, push_u64, COPIED_VALUE_LIMIT};
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
    let mut out = GetReply::default();
    for key in keys.chain(more) {
        if reply.refuse_long_key(key) {
            return done;
        }
        if let Some(item) = lookup(ctx, key, expires) {
            let cas = with_cas.then(|| shown_cas(ctx, item.cas));
            if out.push_value(key, &item, cas).is_err() {
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
    reply.chain = out.finish();
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

/// The reply's last line.
const END: &[u8] = b"END\r\n";

/// Segments [`GetReply::push_value`] appends at most.
const VALUE_SEGMENTS: usize = 3;

/// A get reply as it is built: `VALUE` lines and small values gather in
/// `pending`, which goes into `chain` before a large value and at the end.
#[derive(Default)]
struct GetReply {
    chain: IoChain,
    pending: Vec<u8>,
}

impl GetReply {
    /// Appends `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`. A
    /// multiget's reply grows with the keys a client lists, so this fails
    /// instead of aborting when there is no memory for it.
    fn push_value(&mut self, key: &[u8], item: &Item, cas: Option<u64>) -> Result<(), IoBufError> {
        let value = item.value.as_slice();
        let length = u64::try_from(value.len()).unwrap_or(u64::MAX);
        let flags = u64::from(item.flags);
        let header = b"VALUE ".len()
            + key.len()
            + 1
            + decimal_digits(flags)
            + 1
            + decimal_digits(length)
            + cas.map_or(0, |cas| 1 + decimal_digits(cas))
            + b"\r\n".len();
        let copied = value.len() <= COPIED_VALUE_LIMIT;
        // Room for END too, after a copied value: a single get's reply is
        // then allocated once at its exact size, and becomes an `IoBuf`
        // without another allocation.
        let wanted = if copied {
            header + value.len() + b"\r\n".len() + END.len()
        } else {
            self.chain.try_reserve(VALUE_SEGMENTS)?;
            header
        };
        // A multiget's buffer grows by doubling: exact steps would copy
        // it over and over.
        let reserved = if self.pending.is_empty() {
            self.pending.try_reserve_exact(wanted)
        } else {
            self.pending.try_reserve(wanted)
        };
        reserved.map_err(|_| IoBufError::OutOfMemory { requested: wanted })?;
        let pending = &mut self.pending;
        pending.extend_from_slice(b"VALUE ");
        pending.extend_from_slice(key);
        pending.push(b' ');
        push_u64(pending, flags);
        pending.push(b' ');
        push_u64(pending, length);
        if let Some(cas) = cas {
            pending.push(b' ');
            push_u64(pending, cas);
        }
        pending.extend_from_slice(b"\r\n");
        if copied {
            pending.extend_from_slice(value);
            pending.extend_from_slice(b"\r\n");
        } else {
            let before = core::mem::take(pending);
            self.chain.push_back(IoBuf::from_vec(before));
            self.chain.push_back(item.value.clone());
            self.chain.push_back(IoBuf::from_static(b"\r\n"));
        }
        Ok(())
    }

    /// The whole reply, END included.
    fn finish(mut self) -> IoChain {
        if self.pending.is_empty() {
            self.chain.push_back(IoBuf::from_static(END));
        } else {
            // Room for END was reserved with the last copied value.
            self.pending.extend_from_slice(END);
            self.chain.push_back(IoBuf::from_vec(self.pending));
        }
        self.chain
    }
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
