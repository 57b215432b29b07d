//! `delete`, `incr`, `decr`, `touch`, `flush_all`, `verbosity` and
//! `version`.

use alloc::vec::Vec;

use super::{Reply, Tokens};
use crate::protocol::common::{expires_at, parse_i32, parse_u32, parse_u64, push_u64};
use crate::protocol::{Context, Outcome};
use crate::stats::Counters;
use crate::store::{ArithError, DeleteResult};
use crate::watch::WATCHERS;

/// `delete <key> [0] [noreply]`.
pub fn delete(
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    done: Outcome,
) -> Outcome {
    let n = tokens.count();
    if n > 3 {
        let hold_is_zero = tokens.get(2) == b"0";
        reply.noreply = tokens.noreply();
        let valid = (n == 4 && (hold_is_zero || reply.noreply))
            || (n == 5 && hold_is_zero && reply.noreply);
        if !valid {
            reply.string(b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
            return done;
        }
    }
    let key = tokens.get(1);
    if reply.refuse_long_key(key) {
        return done;
    }
    ctx.log_lookup(key);
    if ctx.store.delete(key, None, ctx.now) == DeleteResult::Deleted {
        Counters::add(&ctx.counters.delete_hits, 1);
        reply.string(b"DELETED");
    } else {
        Counters::add(&ctx.counters.delete_misses, 1);
        reply.string(b"NOT_FOUND");
    }
    done
}

/// `incr`/`decr <key> <delta> [noreply]`.
pub fn arithmetic(
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    incr: bool,
    done: Outcome,
) -> Outcome {
    reply.noreply = tokens.noreply();
    let key = tokens.get(1);
    if reply.refuse_long_key(key) {
        return done;
    }
    let Some(delta) = parse_u64(tokens.get(2)) else {
        reply.string(b"CLIENT_ERROR invalid numeric delta argument");
        return done;
    };
    let counters = ctx.counters;
    ctx.log_lookup(key);
    match ctx.store.add_delta(key, incr, delta, 0, ctx.now) {
        Ok(result) => {
            Counters::add(
                if incr {
                    &counters.incr_hits
                } else {
                    &counters.decr_hits
                },
                1,
            );
            let mut line = Vec::with_capacity(24);
            push_u64(&mut line, result.value);
            line.extend_from_slice(b"\r\n");
            reply.line(line);
        }
        Err(ArithError::NonNumeric) => {
            reply.string(b"CLIENT_ERROR cannot increment or decrement non-numeric value")
        }
        Err(ArithError::NotFound | ArithError::Exists) => {
            Counters::add(
                if incr {
                    &counters.incr_misses
                } else {
                    &counters.decr_misses
                },
                1,
            );
            reply.string(b"NOT_FOUND");
        }
    }
    done
}

/// `touch <key> <exptime> [noreply]`.
pub fn touch(
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    done: Outcome,
) -> Outcome {
    reply.noreply = tokens.noreply();
    let key = tokens.get(1);
    if reply.refuse_long_key(key) {
        return done;
    }
    let Some(exptime) = parse_i32(tokens.get(2)) else {
        reply.string(b"CLIENT_ERROR invalid exptime argument");
        return done;
    };
    let touched = ctx.store.touch(key, expires_at(exptime, ctx.now), ctx.now);
    WATCHERS.item_get(ctx.site, key, touched.as_ref().map(|item| item.value.len()));
    let touched = touched.is_some();
    Counters::add(&ctx.counters.cmd_touch, 1);
    if touched {
        Counters::add(&ctx.counters.touch_hits, 1);
        reply.string(b"TOUCHED");
    } else {
        Counters::add(&ctx.counters.touch_misses, 1);
        reply.string(b"NOT_FOUND");
    }
    done
}

/// `flush_all [delay] [noreply]`.
pub fn flush_all(
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    done: Outcome,
) -> Outcome {
    reply.noreply = tokens.noreply();
    Counters::add(&ctx.counters.cmd_flush, 1);
    let mut delay = 0;
    if tokens.count() != if reply.noreply { 3 } else { 2 } {
        let Some(parsed) = parse_i32(tokens.get(1)) else {
            reply.string(b"CLIENT_ERROR invalid exptime argument");
            return done;
        };
        delay = parsed;
    }
    let at = (delay > 0).then(|| expires_at(delay, ctx.now));
    ctx.store.flush_all(at, ctx.now);
    reply.string(b"OK");
    done
}

/// `verbosity <level> [noreply]`: accepted and ignored (the level is a
/// start-up setting here).
pub fn verbosity(tokens: &Tokens<'_>, reply: &mut Reply, done: Outcome) -> Outcome {
    reply.noreply = tokens.noreply();
    if parse_u32(tokens.get(1)).is_none() {
        reply.string(b"CLIENT_ERROR bad command line format");
    } else {
        reply.string(b"OK");
    }
    done
}

/// `slabs reassign <src> <dst>` and `slabs automove <0|1|2>` or `slabs
/// automove ratio <r>`, validated as memcached 1.6.18's
/// `process_slabs_command` validates them. The store has no slab classes
/// (see `store.rs`): a reassign names classes that do not exist
/// (`BADCLASS`), and an accepted automove setting changes nothing.
pub fn slabs(tokens: &Tokens<'_>, reply: &mut Reply, done: Outcome) -> Outcome {
    let n = tokens.count();
    match tokens.get(1) {
        b"reassign" if n == 5 => match (parse_i32(tokens.get(2)), parse_i32(tokens.get(3))) {
            (Some(src), Some(dst)) if src == dst => {
                reply.string(b"SAME src and dst class are identical")
            }
            (Some(_), Some(_)) => reply.string(b"BADCLASS invalid src or dst class id"),
            _ => reply.string(b"CLIENT_ERROR bad command line format"),
        },
        b"automove" if n >= 4 => {
            reply.noreply = tokens.noreply();
            if tokens.get(2) == b"ratio" {
                let ratio = core::str::from_utf8(tokens.get(3))
                    .ok()
                    .and_then(|text| text.parse::<f64>().ok());
                if n < 5 || ratio.is_none() {
                    reply.string(b"ERROR");
                } else {
                    reply.string(b"OK");
                }
            } else {
                match parse_u32(tokens.get(2)) {
                    None => reply.string(b"CLIENT_ERROR bad command line format"),
                    Some(0..=2) => reply.string(b"OK"),
                    Some(_) => reply.string(b"ERROR"),
                }
            }
        }
        _ => reply.string(b"ERROR"),
    }
    done
}

/// `watch [<stream>…]`: the connection becomes a watcher once this request
/// is answered (the connection answers `OK`, see `watch.rs`); streams this
/// server does not log are refused by name, unknown ones with `ERROR`, as
/// 1.6.18's `process_watch_command` does.
pub fn watch(
    tokens: &Tokens<'_>,
    ctx: &mut Context<'_>,
    reply: &mut Reply,
    done: Outcome,
) -> Outcome {
    let names = tokens.list().iter().skip(1).copied();
    match crate::watch::parse_streams(names) {
        Ok(streams) => ctx.watch = Some(streams),
        Err(crate::watch::WatchError::Unknown) => reply.string(b"ERROR"),
        Err(crate::watch::WatchError::Unsupported) => {
            reply.string(b"SERVER_ERROR watch stream not supported")
        }
    }
    done
}

/// `cache_memlimit <megabytes> [noreply]`: checked as memcached checks
/// it, and an accepted value becomes the store's memory limit (`stats`
/// `limit_maxbytes`, `stats settings` `maxbytes`).
pub fn memlimit(
    tokens: &Tokens<'_>,
    ctx: &Context<'_>,
    reply: &mut Reply,
    done: Outcome,
) -> Outcome {
    reply.noreply = tokens.noreply();
    match parse_u32(tokens.get(1)) {
        None => reply.string(b"ERROR"),
        Some(0..8) => reply.string(b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m"),
        Some(1_000_000_001..) => {
            reply.string(b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes")
        }
        Some(megabytes) => {
            let bytes =
                usize::try_from(megabytes).map_or(usize::MAX, |m| m.saturating_mul(1 << 20));
            ctx.store.set_memory_limit(fit_to_ram(bytes));
            reply.string(b"OK");
        }
    }
    done
}

/// `version`.
pub fn version(ctx: &Context<'_>, reply: &mut Reply, done: Outcome) -> Outcome {
    let mut line = Vec::with_capacity(32);
    line.extend_from_slice(b"VERSION ");
    line.extend_from_slice(ctx.settings.version.as_bytes());
    line.extend_from_slice(b"\r\n");
    reply.line(line);
    done
}

/// `bytes` as a memory limit this node's RAM allows: clamped as `-m` is at
/// start (`crate::memory`), with the same warning, so that `cache_memlimit`
/// cannot run a native guest's allocator dry.
fn fit_to_ram(bytes: usize) -> usize {
    let Some(ram) = ebb_event::memory_bytes() else {
        return bytes;
    };
    let allowed = crate::memory::memory_allowed(ram);
    if bytes > allowed {
        ebb_app::warn!(
            "cache_memlimit {} MiB is more than {} MiB of RAM allows; using {} MiB",
            bytes >> 20,
            ram >> 20,
            allowed >> 20
        );
        allowed
    } else {
        bytes
    }
}
