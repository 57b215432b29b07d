//! `lru_crawler …` and `lru …`, with memcached 1.6.18's argument checks
//! and replies (`proto_text.c`'s `process_lru_crawler_command` and
//! `process_lru_command`), each subcommand honoured as far as this store
//! can honour it.
//!
//! The store is one pool, reported as slab class 1 (see `stat_lists.rs`),
//! evicting by sampled LRU (see `store.rs`), so:
//! - `lru_crawler metadump <all|hash|classes>` lists the live items (class
//!   1 is all of them, classes 2 to 63 are empty);
//! - `lru_crawler crawl <all|classes>` removes the dead (expired or
//!   flushed) items now, within the request: `OK` comes when the crawl is
//!   done, and `lru_crawler tocrawl <n>` bounds the items one crawl looks
//!   at (0: all). A lookup or an eviction that finds a dead item removes
//!   it too; the crawl frees them sooner;
//! - `lru_crawler enable`/`disable` switch both on and off as 1.6.18 does
//!   (on at start);
//! - `lru_crawler sleep <µs>` paces a background crawler, which this
//!   server does not have: checked, then refused by name;
//! - `lru mode flat` is what the store does (one LRU, sampled): `OK`;
//!   `lru mode segmented`, `lru temp_ttl <n≥0>` and `lru tune …` ask for
//!   the hot/warm/cold/temp segments it does not have: checked, then
//!   refused by name (`lru temp_ttl` below 0 turns the temporary LRU off:
//!   `OK`).

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::{Reply, Tokens};
use crate::protocol::common::{parse_i32, parse_u32, push_u64};
use crate::protocol::{Context, Outcome};
use crate::store::ItemMeta;
use crate::watch::push_uri_encoded;

/// `lru_crawler enable`/`disable` (memcached starts with it on).
static CRAWLER_ENABLED: AtomicBool = AtomicBool::new(true);
/// `lru_crawler tocrawl`: items one crawl looks at, 0: all.
static TO_CRAWL: AtomicU32 = AtomicU32::new(0);

/// memcached's slab class ids are 1 to 63 (`MAX_NUMBER_OF_SLAB_CLASSES`).
const LARGEST_CLASS: u32 = 63;
/// The class this store reports its items as.
const STORE_CLASS: u32 = 1;
/// Buckets walked per read section.
const WALK_STEP: usize = 1024;

/// `lru_crawler <subcommand> …`.
pub fn lru_crawler(
    tokens: &Tokens<'_>,
    ctx: &Context<'_>,
    reply: &mut Reply,
    done: Outcome,
) -> Outcome {
    let n = tokens.count();
    let argument = tokens.get(2);
    match (n, tokens.get(1)) {
        (4, b"crawl") => crawl(argument, ctx, reply),
        (4, b"metadump") => metadump(argument, ctx, reply),
        (4, b"tocrawl") => match parse_u32(argument) {
            Some(items) => {
                TO_CRAWL.store(items, Ordering::Relaxed);
                reply.string(b"OK");
            }
            None => reply.string(b"CLIENT_ERROR bad command line format"),
        },
        (4, b"sleep") => match parse_u32(argument) {
            None => reply.string(b"CLIENT_ERROR bad command line format"),
            Some(1_000_001..) => reply.string(b"CLIENT_ERROR sleep must be one second or less"),
            Some(_) => reply.string(b"SERVER_ERROR lru_crawler sleep not supported"),
        },
        (3, b"enable") => {
            if CRAWLER_ENABLED.swap(true, Ordering::Relaxed) {
                reply.string(b"ERROR failed to start lru crawler thread");
            } else {
                reply.string(b"OK");
            }
        }
        (3, b"disable") => {
            CRAWLER_ENABLED.store(false, Ordering::Relaxed);
            reply.string(b"OK");
        }
        _ => reply.string(b"ERROR"),
    }
    done
}

/// Whether a class list (`all`, or ids joined by commas) names the store's
/// class; `Err` for a bad id.
fn names_store_class(list: &[u8], all_words: &[&[u8]]) -> Result<bool, ()> {
    if all_words.contains(&list) {
        return Ok(true);
    }
    let mut named = false;
    for id in list.split(|&byte| byte == b',') {
        match parse_u32(id) {
            Some(id @ 1..=LARGEST_CLASS) => named |= id == STORE_CLASS,
            _ => return Err(()),
        }
    }
    Ok(named)
}

/// `lru_crawler crawl <all|classes>`.
fn crawl(list: &[u8], ctx: &Context<'_>, reply: &mut Reply) {
    if !CRAWLER_ENABLED.load(Ordering::Relaxed) {
        return reply.string(b"CLIENT_ERROR lru crawler disabled");
    }
    match names_store_class(list, &[b"all"]) {
        Err(()) => reply.string(b"BADCLASS invalid class id"),
        Ok(named) => {
            if named {
                let limit = match TO_CRAWL.load(Ordering::Relaxed) {
                    0 => usize::MAX,
                    items => items as usize,
                };
                let mut looked_at = 0;
                let mut from = 0;
                while from < ctx.store.walk_len() && looked_at < limit {
                    looked_at += ctx.store.reclaim_dead(from, WALK_STEP, ctx.now);
                    from += WALK_STEP;
                }
            }
            reply.string(b"OK");
        }
    }
}

/// `lru_crawler metadump <all|hash|classes>`: one line per live item,
/// then `END`.
fn metadump(list: &[u8], ctx: &Context<'_>, reply: &mut Reply) {
    if !CRAWLER_ENABLED.load(Ordering::Relaxed) {
        return reply.string(b"CLIENT_ERROR lru crawler disabled");
    }
    let named = match names_store_class(list, &[b"all", b"hash"]) {
        Ok(named) => named,
        Err(()) => return reply.string(b"BADCLASS invalid class id"),
    };
    let mut dump = Vec::new();
    if named {
        let mut from = 0;
        while from < ctx.store.walk_len() {
            ctx.store
                .live_items(from, WALK_STEP, ctx.now, |item| push_meta(&mut dump, &item));
            from += WALK_STEP;
        }
    }
    dump.extend_from_slice(b"END\r\n");
    reply.line(dump);
}

/// `key=<key> exp=<time|-1> la=<time> cas=<n> fetch=<yes|no> cls=1 size=<n>`,
/// as 1.6.18's crawler writes it.
fn push_meta(out: &mut Vec<u8>, item: &ItemMeta) {
    out.extend_from_slice(b"key=");
    push_uri_encoded(out, &item.key);
    out.extend_from_slice(b" exp=");
    if item.expires == 0 {
        out.extend_from_slice(b"-1");
    } else {
        push_u64(out, u64::from(item.expires));
    }
    out.extend_from_slice(b" la=");
    push_u64(out, u64::from(item.last_access));
    out.extend_from_slice(b" cas=");
    push_u64(out, item.cas);
    out.extend_from_slice(if item.fetched {
        b" fetch=yes"
    } else {
        b" fetch=no"
    });
    out.extend_from_slice(b" cls=");
    push_u64(out, u64::from(STORE_CLASS));
    out.extend_from_slice(b" size=");
    push_u64(out, item.size as u64);
    out.push(b'\n');
}

/// `lru <mode|temp_ttl|tune> …`.
pub fn lru(tokens: &Tokens<'_>, reply: &mut Reply, done: Outcome) -> Outcome {
    let n = tokens.count();
    reply.noreply = tokens.noreply();
    match tokens.get(1) {
        b"tune" if n >= 7 => {
            let numbers = [2, 3, 4, 5].map(|at| parse_u32(tokens.get(at)));
            match numbers {
                [Some(hot), Some(warm), Some(_), Some(_)] if hot.saturating_add(warm) > 80 => {
                    reply.string(b"ERROR hot and warm pcts must not exceed 80")
                }
                [Some(_), Some(_), Some(_), Some(_)] => {
                    reply.string(b"SERVER_ERROR lru tune not supported")
                }
                _ => reply.string(b"ERROR"),
            }
        }
        b"mode" if n >= 4 => match tokens.get(2) {
            b"flat" => reply.string(b"OK"),
            b"segmented" => reply.string(b"SERVER_ERROR lru mode segmented not supported"),
            _ => reply.string(b"ERROR"),
        },
        b"temp_ttl" if n >= 4 => match parse_i32(tokens.get(2)) {
            Some(..0) => reply.string(b"OK"),
            Some(_) => reply.string(b"SERVER_ERROR lru temp_ttl not supported"),
            None => reply.string(b"ERROR"),
        },
        _ => reply.string(b"ERROR"),
    }
    done
}
