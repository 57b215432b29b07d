//! `stats`: memcached 1.6.18's general statistics, in its order, with
//! the counters this server keeps (fields it has no equivalent for are
//! reported as memcached reports them on an idle server).

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use super::{Reply, Tokens};
use crate::protocol::common::{parse_u32, push_u64};
use crate::protocol::{Context, Outcome};
use crate::stats::{total, Counters};

/// A stat's value.
enum V {
    N(u64),
    S(&'static str),
}

fn push_stat(out: &mut Vec<u8>, name: &str, value: V) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    match value {
        V::N(n) => push_u64(out, n),
        V::S(s) => out.extend_from_slice(s.as_bytes()),
    }
    out.extend_from_slice(b"\r\n");
}

fn usize_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Handles `stats [group]`.
pub fn stats(
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    done: Outcome,
) -> Outcome {
    match tokens.count() {
        2 => reply.push(IoBuf::from_vec(general(ctx))),
        _ => match tokens.get(1) {
            b"reset" => reply.string(b"RESET"),
            b"detail" => match tokens.get(2) {
                b"on" | b"off" => reply.string(b"OK"),
                b"dump" => reply.string(b"END"),
                _ => reply.string(b"CLIENT_ERROR usage: stats detail on|off|dump"),
            },
            b"settings" => reply.push(IoBuf::from_vec(settings(ctx))),
            b"cachedump" => cachedump(tokens, reply),
            b"items" | b"slabs" | b"sizes" | b"conns" => reply.string(b"END"),
            _ => reply.string(b"ERROR"),
        },
    }
    done
}

fn general(ctx: &Context<'_>) -> Vec<u8> {
    let sum = |field: fn(&Counters) -> &core::sync::atomic::AtomicU64| total(ctx.stats, field);
    let store = ctx.store.stats();
    let mut out = Vec::with_capacity(3072);
    let uptime = u64::from(ctx.now.saturating_sub(ctx.started));
    let header: [(&str, V); 21] = [
        ("pid", V::N(0)),
        ("uptime", V::N(uptime)),
        ("time", V::N(u64::from(ctx.now))),
        ("version", V::S(ctx.settings.version)),
        ("libevent", V::S("ebbflow")),
        ("pointer_size", V::N(64)),
        ("rusage_user", V::S("0.000000")),
        ("rusage_system", V::S("0.000000")),
        (
            "max_connections",
            V::N(usize_u64(ctx.settings.max_connections)),
        ),
        ("curr_connections", V::N(ctx.connections)),
        ("total_connections", V::N(sum(|c| &c.total_connections))),
        (
            "rejected_connections",
            V::N(sum(|c| &c.rejected_connections)),
        ),
        ("connection_structures", V::N(ctx.connections)),
        ("response_obj_oom", V::N(0)),
        ("response_obj_count", V::N(1)),
        ("response_obj_bytes", V::N(16384)),
        ("read_buf_count", V::N(8)),
        ("read_buf_bytes", V::N(131_072)),
        ("read_buf_bytes_free", V::N(0)),
        ("read_buf_oom", V::N(0)),
        ("reserved_fds", V::N(20)),
    ];
    let commands: [(&str, V); 25] = [
        ("cmd_get", V::N(sum(|c| &c.cmd_get))),
        ("cmd_set", V::N(sum(|c| &c.cmd_set))),
        ("cmd_flush", V::N(sum(|c| &c.cmd_flush))),
        ("cmd_touch", V::N(sum(|c| &c.cmd_touch))),
        ("cmd_meta", V::N(0)),
        ("get_hits", V::N(sum(|c| &c.get_hits))),
        ("get_misses", V::N(sum(|c| &c.get_misses))),
        ("get_expired", V::N(sum(|c| &c.get_expired))),
        ("get_flushed", V::N(0)),
        ("delete_misses", V::N(sum(|c| &c.delete_misses))),
        ("delete_hits", V::N(sum(|c| &c.delete_hits))),
        ("incr_misses", V::N(sum(|c| &c.incr_misses))),
        ("incr_hits", V::N(sum(|c| &c.incr_hits))),
        ("decr_misses", V::N(sum(|c| &c.decr_misses))),
        ("decr_hits", V::N(sum(|c| &c.decr_hits))),
        ("cas_misses", V::N(sum(|c| &c.cas_misses))),
        ("cas_hits", V::N(sum(|c| &c.cas_hits))),
        ("cas_badval", V::N(sum(|c| &c.cas_badval))),
        ("touch_hits", V::N(sum(|c| &c.touch_hits))),
        ("touch_misses", V::N(sum(|c| &c.touch_misses))),
        ("store_too_large", V::N(0)),
        ("store_no_memory", V::N(0)),
        ("auth_cmds", V::N(0)),
        ("auth_errors", V::N(0)),
        ("bytes_read", V::N(sum(|c| &c.bytes_read))),
    ];
    let server: [(&str, V); 10] = [
        ("bytes_written", V::N(sum(|c| &c.bytes_written))),
        ("limit_maxbytes", V::N(usize_u64(ctx.store.memory_limit()))),
        ("accepting_conns", V::N(1)),
        ("listen_disabled_num", V::N(0)),
        ("time_in_listen_disabled_us", V::N(0)),
        ("threads", V::N(threads(ctx))),
        ("conn_yields", V::N(0)),
        ("hash_power_level", V::N(16)),
        ("hash_bytes", V::N(524_288)),
        ("hash_is_expanding", V::N(0)),
    ];
    for (name, value) in header.into_iter().chain(commands).chain(server) {
        push_stat(&mut out, name, value);
    }
    for name in TAIL_ZEROS {
        push_stat(&mut out, name, V::N(0));
    }
    let items: [(&str, V); 6] = [
        ("bytes", V::N(store.bytes)),
        ("curr_items", V::N(store.curr_items)),
        ("total_items", V::N(store.total_items)),
        ("slab_global_page_pool", V::N(0)),
        ("expired_unfetched", V::N(0)),
        ("evicted_unfetched", V::N(0)),
    ];
    for (name, value) in items {
        push_stat(&mut out, name, value);
    }
    push_stat(&mut out, "evicted_active", V::N(0));
    push_stat(&mut out, "evictions", V::N(store.evictions));
    for name in ITEM_ZEROS {
        push_stat(&mut out, name, V::N(0));
    }
    out.extend_from_slice(b"END\r\n");
    out
}

/// Server stats after `hash_is_expanding` that are zero here.
const TAIL_ZEROS: [&str; 19] = [
    "slab_reassign_rescues",
    "slab_reassign_chunk_rescues",
    "slab_reassign_evictions_nomem",
    "slab_reassign_inline_reclaim",
    "slab_reassign_busy_items",
    "slab_reassign_busy_deletes",
    "slab_reassign_running",
    "slabs_moved",
    "lru_crawler_running",
    "lru_crawler_starts",
    "lru_maintainer_juggles",
    "malloc_fails",
    "log_worker_dropped",
    "log_worker_written",
    "log_watcher_skipped",
    "log_watcher_sent",
    "log_watchers",
    "unexpected_napi_ids",
    "round_robin_fallback",
];

/// Item stats after `evictions` that are zero here.
const ITEM_ZEROS: [&str; 9] = [
    "reclaimed",
    "crawler_reclaimed",
    "crawler_items_checked",
    "lrutail_reflocked",
    "moves_to_cold",
    "moves_to_warm",
    "moves_within_lru",
    "direct_reclaims",
    "lru_bumps_dropped",
];

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

/// Cores serving clients: those with counters (at least 1).
fn threads(ctx: &Context<'_>) -> u64 {
    let cores =
        ebb_core::Multicore::root(ctx.stats).map_or(0, |root| root.cores_with_reps().count());
    usize_u64(cores.max(1))
}

fn settings(ctx: &Context<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    push_stat(
        &mut out,
        "maxbytes",
        V::N(usize_u64(ctx.store.memory_limit())),
    );
    push_stat(
        &mut out,
        "maxconns",
        V::N(usize_u64(ctx.settings.max_connections)),
    );
    push_stat(
        &mut out,
        "item_size_max",
        V::N(usize_u64(ctx.store.item_size_max())),
    );
    push_stat(
        &mut out,
        "cas_enabled",
        V::S(if ctx.settings.cas_disabled {
            "no"
        } else {
            "yes"
        }),
    );
    push_stat(
        &mut out,
        "verbosity",
        V::N(u64::from(ctx.settings.verbosity)),
    );
    out.extend_from_slice(b"END\r\n");
    out
}
