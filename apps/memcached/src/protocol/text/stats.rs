//! `stats [group]` in the text protocol: the lists of
//! [`stat_lists`](crate::protocol::stat_lists) as `STAT name value` lines.

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use super::{Reply, Tokens};
use crate::protocol::common::parse_u32;
use crate::protocol::stat_lists::{self, Stat};
use crate::protocol::{Context, Outcome};

/// `list` as `STAT name value` lines and the closing `END`.
fn stat_lines(list: &[Stat]) -> IoBuf {
    let size: usize = list.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    let mut out = Vec::with_capacity(size + 5);
    for (name, value) in list {
        out.extend_from_slice(b"STAT ");
        out.extend_from_slice(name.as_bytes());
        out.push(b' ');
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"END\r\n");
    IoBuf::from_vec(out)
}

/// Handles `stats [group]`.
pub fn stats(
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    done: Outcome,
) -> Outcome {
    match tokens.count() {
        2 => reply.push(stat_lines(&stat_lists::general(ctx))),
        _ => match tokens.get(1) {
            b"reset" => {
                crate::stats::reset(ctx.stats, ctx.store.stats());
                reply.string(b"RESET");
            }
            // Per-prefix stats (memcached's `stats detail`) are not
            // collected: turning them on is refused rather than answered
            // `OK` for nothing; off is what they are, and a dump is empty.
            b"detail" => match tokens.get(2) {
                b"on" => reply.string(b"SERVER_ERROR stats detail not supported"),
                b"off" => reply.string(b"OK"),
                b"dump" => reply.string(b"END"),
                _ => reply.string(b"CLIENT_ERROR usage: stats detail on|off|dump"),
            },
            b"settings" => reply.push(stat_lines(&stat_lists::settings(ctx))),
            b"cachedump" => cachedump(tokens, reply),
            b"slabs" => reply.push(stat_lines(&stat_lists::slabs(ctx))),
            b"sizes" => reply.push(stat_lines(&stat_lists::sizes())),
            b"items" => reply.push(stat_lines(&stat_lists::items(ctx))),
            b"conns" => reply.string(b"END"),
            _ => reply.string(b"ERROR"),
        },
    }
    done
}

/// `stats cachedump <class> <limit>`: memcached lists the items of a
/// slab class; there are no slab classes here, so the list is empty.
fn cachedump(tokens: &Tokens<'_>, reply: &mut Reply) {
    if tokens.count() < 5 {
        return reply.string(b"CLIENT_ERROR bad command line");
    }
    match (parse_u32(tokens.get(2)), parse_u32(tokens.get(3))) {
        (Some(class), Some(_)) if class >= 64 => reply.string(b"CLIENT_ERROR Illegal slab id"),
        (Some(_), Some(_)) => reply.string(b"END"),
        _ => reply.string(b"CLIENT_ERROR bad command line format"),
    }
}
