//! What `stats` reports, for both protocols (text `STAT name value` lines,
//! binary STAT packets): memcached 1.6.18's keys, in its order, with this
//! server's values.
//!
//! Every counter this server can count is counted (by the protocols, in
//! [`crate::stats`], or by the store, [`crate::store::StoreStats`]), and
//! `tests/differential.rs` checks them against memcached 1.6.18 after a
//! scripted session. `pid` and `rusage_*` come from the platform
//! (`ebb_event::process_id`, `ebb_event::cpu_time`): hosted, the Linux
//! process's pid and `getrusage`; native, 0 and 0.000000, since a guest
//! has no process and the native platform does not account CPU time.
//! `hash_power_level` and `hash_bytes` describe our table (a fixed number
//! of buckets, one pointer each), so `hash_is_expanding` is always 0.
//!
//! What stays fixed, and why:
//! * the connection machinery memcached has and we do not: response
//!   objects and read buffers (`response_obj_*`, `read_buf_*`: memcached's
//!   values on an idle server), `reserved_fds`, `connection_structures`
//!   (our connections plus the listener);
//! * `accepting_conns` 1, `listen_disabled_num` and
//!   `time_in_listen_disabled_us` 0: past `-c` we accept and refuse, as
//!   memcached does with its default `maxconns_fast`, and never stop
//!   listening;
//! * `conn_yields` 0: a connection handles all its complete requests in one
//!   turn, there is no `-R` limit to yield at;
//! * `auth_cmds`, `auth_errors` 0: there is no SASL (memcached without
//!   `-S`);
//! * slab, LRU crawler and maintainer, logger and NAPI counters
//!   (`slab_*`, `slabs_moved`, `lru_*`, `crawler_*`, `moves_*`,
//!   `direct_reclaims`, `log_*`, `unexpected_napi_ids`,
//!   `round_robin_fallback`, `slab_global_page_pool`, `lrutail_reflocked`):
//!   the store has no slabs, segmented LRU, crawler or logger;
//! * `malloc_fails` 0: an allocation failure aborts, it is not counted;
//! * `expired_unfetched`, `evicted_unfetched`, `evicted_active` 0: items
//!   carry a "fetched" bit (meta get's `h`) but no "active" one, and the
//!   store does not count unfetched expiries and evictions.
//!
//! `stats items` and `stats slabs` report the whole store as slab class 1
//! with the fields it has an honest value for (see [`items`] and
//! [`slabs`]); `tests/differential.rs` checks that memcached reports the
//! same values when all items fall in its first class.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::protocol::Context;
use crate::stats::{store_since_reset, total, Counters};

/// A stat: name and value.
pub type Stat = (&'static str, String);

fn counter(ctx: &Context<'_>, field: fn(&Counters) -> &core::sync::atomic::AtomicU64) -> String {
    total(ctx.stats, field).to_string()
}

/// A duration as memcached prints `rusage_*`: seconds with six decimals.
fn seconds(time: core::time::Duration) -> String {
    alloc::format!("{}.{:06}", time.as_secs(), time.subsec_micros())
}

/// The cores the server runs on (`-t`), as memcached reports its worker
/// threads: the same on every platform, whichever cores clients reached.
fn threads(ctx: &Context<'_>) -> usize {
    ctx.settings.threads
}

/// `stats` with no argument.
pub fn general(ctx: &Context<'_>) -> Vec<Stat> {
    let store = store_since_reset(ctx.stats, ctx.store.stats());
    let zero = || "0".to_string();
    let connections = ctx.connections;
    let cpu = ebb_event::cpu_time().unwrap_or_default();
    let mut stats: Vec<Stat> = Vec::with_capacity(96);
    let mut put = |name: &'static str, value: String| stats.push((name, value));
    put("pid", ebb_event::process_id().to_string());
    put("uptime", ctx.now.saturating_sub(ctx.started).to_string());
    put("time", ctx.now.to_string());
    put("version", ctx.settings.version.to_string());
    put("libevent", "ebbflow".to_string());
    put("pointer_size", usize::BITS.to_string());
    put("rusage_user", seconds(cpu.user));
    put("rusage_system", seconds(cpu.system));
    put("max_connections", ctx.settings.max_connections.to_string());
    put("curr_connections", connections.to_string());
    // memcached counts its listening socket among its connections (and
    // subtracts it from `curr_connections` only); we have one.
    let total_connections = total(ctx.stats, |c| &c.total_connections).wrapping_add(1);
    put("total_connections", total_connections.to_string());
    put(
        "rejected_connections",
        counter(ctx, |c| &c.rejected_connections),
    );
    put(
        "connection_structures",
        connections.saturating_add(1).to_string(),
    );
    put("response_obj_oom", zero());
    put("response_obj_count", "1".to_string());
    put("response_obj_bytes", "16384".to_string());
    put("read_buf_count", "8".to_string());
    put("read_buf_bytes", "131072".to_string());
    put("read_buf_bytes_free", zero());
    put("read_buf_oom", zero());
    put("reserved_fds", "20".to_string());
    put("cmd_get", counter(ctx, |c| &c.cmd_get));
    put("cmd_set", counter(ctx, |c| &c.cmd_set));
    put("cmd_flush", counter(ctx, |c| &c.cmd_flush));
    put("cmd_touch", counter(ctx, |c| &c.cmd_touch));
    put("cmd_meta", counter(ctx, |c| &c.cmd_meta));
    put("get_hits", counter(ctx, |c| &c.get_hits));
    put("get_misses", counter(ctx, |c| &c.get_misses));
    put("get_expired", store.get_expired.to_string());
    put("get_flushed", store.get_flushed.to_string());
    put("delete_misses", counter(ctx, |c| &c.delete_misses));
    put("delete_hits", counter(ctx, |c| &c.delete_hits));
    put("incr_misses", counter(ctx, |c| &c.incr_misses));
    put("incr_hits", counter(ctx, |c| &c.incr_hits));
    put("decr_misses", counter(ctx, |c| &c.decr_misses));
    put("decr_hits", counter(ctx, |c| &c.decr_hits));
    put("cas_misses", counter(ctx, |c| &c.cas_misses));
    put("cas_hits", counter(ctx, |c| &c.cas_hits));
    put("cas_badval", counter(ctx, |c| &c.cas_badval));
    put("touch_hits", counter(ctx, |c| &c.touch_hits));
    put("touch_misses", counter(ctx, |c| &c.touch_misses));
    put("store_too_large", counter(ctx, |c| &c.store_too_large));
    put("store_no_memory", counter(ctx, |c| &c.store_no_memory));
    put("auth_cmds", zero());
    put("auth_errors", zero());
    put("bytes_read", counter(ctx, |c| &c.bytes_read));
    put("bytes_written", counter(ctx, |c| &c.bytes_written));
    put("limit_maxbytes", ctx.store.memory_limit().to_string());
    put("accepting_conns", "1".to_string());
    put("listen_disabled_num", zero());
    put("time_in_listen_disabled_us", zero());
    put("threads", threads(ctx).to_string());
    put("conn_yields", zero());
    let buckets = ctx.store.buckets();
    put("hash_power_level", buckets.trailing_zeros().to_string());
    put(
        "hash_bytes",
        (buckets * core::mem::size_of::<usize>()).to_string(),
    );
    for name in [
        "hash_is_expanding",
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
    ] {
        put(name, zero());
    }
    put("bytes", store.bytes.to_string());
    put("curr_items", store.curr_items.to_string());
    put("total_items", store.total_items.to_string());
    for name in [
        "slab_global_page_pool",
        "expired_unfetched",
        "evicted_unfetched",
        "evicted_active",
    ] {
        put(name, zero());
    }
    put("evictions", store.evictions.to_string());
    put("reclaimed", store.reclaimed.to_string());
    for name in [
        "crawler_reclaimed",
        "crawler_items_checked",
        "lrutail_reflocked",
        "moves_to_cold",
        "moves_to_warm",
        "moves_within_lru",
        "direct_reclaims",
        "lru_bumps_dropped",
    ] {
        put(name, zero());
    }
    stats
}

/// `stats settings`.
pub fn settings(ctx: &Context<'_>) -> Vec<Stat> {
    let s = ctx.settings;
    let yes_no = |on: bool| if on { "yes" } else { "no" }.to_string();
    let mut stats: Vec<Stat> = Vec::with_capacity(80);
    let mut put = |name: &'static str, value: String| stats.push((name, value));
    put("maxbytes", ctx.store.memory_limit().to_string());
    put("maxconns", s.max_connections.to_string());
    // The listening port and address are not in the settings we are given.
    put("tcpport", "0".to_string());
    put("udpport", "0".to_string());
    put("inter", "NULL".to_string());
    put("verbosity", s.verbosity.to_string());
    put("oldest", "0".to_string());
    put("evictions", "on".to_string());
    put("domain_socket", "NULL".to_string());
    put("umask", "700".to_string());
    put(
        "shutdown_command",
        if s.shutdown_enabled { "yes" } else { "no" }.to_string(),
    );
    put("growth_factor", "1.25".to_string());
    put("chunk_size", "48".to_string());
    put("num_threads", threads(ctx).to_string());
    put("num_threads_per_udp", threads(ctx).to_string());
    put("stat_key_prefix", ":".to_string());
    put("detail_enabled", "no".to_string());
    put("reqs_per_event", "20".to_string());
    put("cas_enabled", yes_no(!s.cas_disabled));
    put("tcp_backlog", "1024".to_string());
    put("binding_protocol", "auto-negotiate".to_string());
    put("auth_enabled_sasl", "no".to_string());
    put("auth_enabled_ascii", "no".to_string());
    put("item_size_max", s.item_size_max.to_string());
    put("maxconns_fast", "yes".to_string());
    put("hashpower_init", "0".to_string());
    put("slab_reassign", "yes".to_string());
    put("slab_automove", "1".to_string());
    put("slab_automove_ratio", "0.80".to_string());
    put("slab_automove_window", "30".to_string());
    put("slab_chunk_max", (s.item_size_max / 2).to_string());
    put("lru_crawler", "yes".to_string());
    put("lru_crawler_sleep", "100".to_string());
    put("lru_crawler_tocrawl", "0".to_string());
    put("tail_repair_time", "0".to_string());
    put("flush_enabled", "yes".to_string());
    put("dump_enabled", "yes".to_string());
    put("hash_algorithm", "murmur3".to_string());
    put("lru_maintainer_thread", "yes".to_string());
    put("lru_segmented", "yes".to_string());
    put("hot_lru_pct", "20".to_string());
    put("warm_lru_pct", "40".to_string());
    put("hot_max_factor", "0.20".to_string());
    put("warm_max_factor", "2.00".to_string());
    put("temp_lru", "no".to_string());
    put("temporary_ttl", "61".to_string());
    put("idle_timeout", "0".to_string());
    put("watcher_logbuf_size", "262144".to_string());
    put("worker_logbuf_size", "65536".to_string());
    put("read_buf_mem_limit", "0".to_string());
    put("track_sizes", "no".to_string());
    put("inline_ascii_response", "no".to_string());
    put("ext_item_size", "512".to_string());
    put("ext_item_age", "4294967295".to_string());
    put("ext_low_ttl", "0".to_string());
    put("ext_recache_rate", "2000".to_string());
    put("ext_wbuf_size", "4194304".to_string());
    put("ext_compact_under", "0".to_string());
    put("ext_drop_under", "0".to_string());
    put("ext_max_sleep", "1000000".to_string());
    put("ext_max_frag", "0.80".to_string());
    put("slab_automove_freeratio", "0.010".to_string());
    put("ext_drop_unread", "no".to_string());
    put("ssl_enabled", "no".to_string());
    put("ssl_chain_cert", "(null)".to_string());
    put("ssl_key", "(null)".to_string());
    put("ssl_verify_mode", "0".to_string());
    put("ssl_keyformat", "1".to_string());
    put("ssl_ciphers", "NULL".to_string());
    put("ssl_ca_cert", "NULL".to_string());
    put("ssl_wbuf_size", "16384".to_string());
    put("ssl_session_cache", "no".to_string());
    put("ssl_kernel_tls", "no".to_string());
    put("ssl_min_version", "tlsv1.2".to_string());
    put("num_napi_ids", "(null)".to_string());
    put("memory_file", "(null)".to_string());
    stats
}

/// `stats slabs`. The store has no slab classes; clients read the
/// per-class counters to watch fill and hit rates, so the whole store is
/// reported as class 1 with the fields it has an honest value for:
/// `used_chunks` (items), the per-class command counters (the server's
/// totals) and `total_malloced` (the bytes charged against `-m`). Chunk
/// and page geometry (`chunk_size`, `chunks_per_page`, `total_pages`,
/// `total_chunks`, `free_chunks`, `free_chunks_end`) has no equivalent
/// and is left out. An empty store reports no class, as memcached does.
pub fn slabs(ctx: &Context<'_>) -> Vec<Stat> {
    let store = store_since_reset(ctx.stats, ctx.store.stats());
    let mut stats = Vec::new();
    if store.curr_items > 0 {
        stats.extend([
            ("1:used_chunks", store.curr_items.to_string()),
            ("1:get_hits", counter(ctx, |c| &c.get_hits)),
            ("1:cmd_set", counter(ctx, |c| &c.cmd_set)),
            ("1:delete_hits", counter(ctx, |c| &c.delete_hits)),
            ("1:incr_hits", counter(ctx, |c| &c.incr_hits)),
            ("1:decr_hits", counter(ctx, |c| &c.decr_hits)),
            ("1:cas_hits", counter(ctx, |c| &c.cas_hits)),
            ("1:cas_badval", counter(ctx, |c| &c.cas_badval)),
            ("1:touch_hits", counter(ctx, |c| &c.touch_hits)),
        ]);
    }
    let classes = if store.curr_items > 0 { "1" } else { "0" };
    stats.push(("active_slabs", classes.to_string()));
    stats.push(("total_malloced", store.bytes.to_string()));
    stats
}

/// `stats items`: as `stats slabs`, the whole store as class 1, with the
/// fields it has: `number` (items), `mem_requested` (the bytes charged,
/// memcached's `ITEM_ntotal` sum), `evicted`, `reclaimed` and
/// `outofmemory` (stores refused for `-m`). The segmented LRU's fields
/// (`number_hot`, `age_*`, `moves_*`, `hits_to_*`), the crawler's and
/// the `*_unfetched` counters have no equivalent and are left out.
pub fn items(ctx: &Context<'_>) -> Vec<Stat> {
    let store = store_since_reset(ctx.stats, ctx.store.stats());
    if store.curr_items == 0 {
        return Vec::new();
    }
    alloc::vec![
        ("items:1:number", store.curr_items.to_string()),
        ("items:1:mem_requested", store.bytes.to_string()),
        ("items:1:evicted", store.evictions.to_string()),
        ("items:1:outofmemory", counter(ctx, |c| &c.store_no_memory)),
        ("items:1:reclaimed", store.reclaimed.to_string()),
    ]
}

/// `stats sizes` (size tracking is off, as by default in memcached).
pub fn sizes() -> Vec<Stat> {
    alloc::vec![("sizes_status", "disabled".to_string())]
}

/// `stats detail dump` with no prefixes recorded.
pub fn detail_dump() -> Vec<Stat> {
    alloc::vec![("detailed", "END\r\n".to_string())]
}
