//! `me`: meta debug.

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use super::flags::BAD_FORMAT;
use crate::protocol::common::{
    base64_decode, base64_encode, push_i64, push_u64, slab_class, KEY_MAX_LENGTH,
};
use crate::protocol::text::{shown_cas, Reply, Tokens};
use crate::protocol::Context;
use crate::stats::Counters;

/// Handles `me <key> [b]`: what memcached knows about an item. Of the
/// meta commands, memcached 1.6.18 counts only this one in `cmd_meta`,
/// once its key is valid (checked against the real server).
pub fn me(tokens: &Tokens<'_>, ctx: &mut Context<'_>, reply: &mut Reply) {
    if tokens.count() < 3 || tokens.get(1).len() > KEY_MAX_LENGTH {
        return reply.string(BAD_FORMAT);
    }
    let binary = tokens.count() >= 4 && tokens.get(2) == b"b";
    let key = if binary {
        match base64_decode(tokens.get(1)) {
            Some(key) => key,
            None => return reply.string(BAD_FORMAT),
        }
    } else {
        tokens.get(1).to_vec()
    };
    Counters::add(&ctx.counters.cmd_meta, 1);
    let Some(item) = ctx.store.get(&key, ctx.now) else {
        return reply.string(b"EN");
    };
    let mut line = Vec::with_capacity(key.len() * 2 + 80);
    line.extend_from_slice(b"ME ");
    if binary {
        base64_encode(&key, &mut line);
    } else {
        line.extend_from_slice(&key);
    }
    line.extend_from_slice(b" exp=");
    if item.expires == 0 {
        line.extend_from_slice(b"-1");
    } else {
        // memcached prints `current_time - exptime` as a C int.
        let bits = ctx.now.wrapping_sub(item.expires);
        push_i64(&mut line, i64::from(i32::from_ne_bytes(bits.to_ne_bytes())));
    }
    line.extend_from_slice(b" la=");
    push_u64(&mut line, u64::from(ctx.now.saturating_sub(item.stored)));
    line.extend_from_slice(b" cas=");
    push_u64(&mut line, shown_cas(ctx, item.cas));
    let total = ctx.store.item_size(key.len(), item.flags, item.value.len());
    line.extend_from_slice(b" fetch=no cls=");
    push_u64(
        &mut line,
        u64::from(slab_class(total, ctx.store.item_size_max())),
    );
    line.extend_from_slice(b" size=");
    push_u64(&mut line, total as u64);
    line.extend_from_slice(b"\r\n");
    reply.push(IoBuf::from_vec(line));
}
