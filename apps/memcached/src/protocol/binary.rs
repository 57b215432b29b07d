//! The binary protocol (memcached's `protocol_binary.h`), answering byte
//! for byte as memcached 1.6.18's `proto_bin.c` does.
//!
//! A request is a 24-byte header, then extras, key and value. Like
//! memcached, we act once the header, extras and key are here; set, add,
//! replace, append and prepend then also need their value, and the errors
//! after which memcached "swallows" part of the body wait for those bytes
//! too. Whatever a request's `bodylen` says beyond what its command reads is
//! parsed as the next request, exactly as memcached does (so garbage there
//! usually ends the connection).
//!
//! Handled like memcached:
//! * a header whose magic is not 0x80: the connection closes, no reply;
//! * `keylen + extlen > bodylen`: "Unknown command", then close;
//! * keys over 250 bytes, or extras/key/body lengths a command does not
//!   take: "Invalid arguments", then close;
//! * header + extras + key over memcached's 16 KiB read buffer: close
//!   once that buffer's worth of bytes has arrived (before that, memcached
//!   waits for more, and so do we);
//! * an unknown opcode: "Unknown command", and `bodylen` bytes *after* the
//!   extras and key are discarded (memcached's own off-by-extras-and-key);
//! * values the store's size rule refuses ([`crate::store`]): "Too
//!   large." (or "Out of memory allocating item"), the value is discarded,
//!   and a `set` drops the old item. Unlike the text protocol, memcached
//!   1.6.18 counts none of these in `store_too_large`/`store_no_memory`.
//!
//! Where memcached would discard more than `-I` + [`BODY_SLACK`] bytes,
//! we answer at once and discard the rest as it arrives
//! ([`Outcome::Discard`]) instead of buffering it, then read on as
//! memcached does: buffering that much would let one client hold
//! unbounded memory.

pub mod header;
pub mod opcodes;

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoBufMut, IoChain};

use self::header::{RequestHeader, ResponseHeader, HEADER_LEN};
use self::opcodes::*;
use super::common::COPIED_VALUE_LIMIT;
use super::{common, Context, Outcome};
use crate::protocol::stat_lists;
use crate::stats::Counters;
use crate::store::{expiry, ArithError, Item, NewItem, Refused, SetMode, SetResult, Update};
use crate::watch::WATCHERS;

/// First byte of every binary request.
pub const REQUEST_MAGIC: u8 = 0x80;

/// Longest key (memcached's `KEY_MAX_LENGTH`).
pub const KEY_MAX_LENGTH: usize = 250;

/// memcached's per-connection read buffer: a header, extras and key that do
/// not fit in it are never parsed, and memcached closes the connection.
pub const READ_BUFFER_SIZE: usize = 16384;

/// Bytes beyond `-I` that we buffer to discard a body exactly as memcached
/// does; past that we reply at once and discard the body as it arrives
/// (see the module documentation).
pub const BODY_SLACK: usize = 64 << 10;

/// Expiry value of incr/decr meaning "do not create a missing item".
pub const NO_CREATE: u32 = 0xffff_ffff;

/// Writes responses to one request (also a forwarded one's, on a node of
/// several: `cluster/binary_forward.rs`).
pub struct Responder {
    /// The request's opcode, echoed.
    pub opcode: u8,
    /// The request's opaque, echoed.
    pub opaque: [u8; 4],
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl Responder {
    fn header(&self, status: u16, cas: u64, extras: usize, key: usize, value: usize) -> IoBufMut {
        // Room for a value that will be copied in after the header.
        let copied = if value <= COPIED_VALUE_LIMIT {
            value
        } else {
            0
        };
        let mut buf = IoBufMut::with_capacity(HEADER_LEN + extras + key + copied);
        ResponseHeader {
            opcode: self.opcode,
            status,
            extlen: u8::try_from(extras).unwrap_or(u8::MAX),
            keylen: u16::try_from(key).unwrap_or(u16::MAX),
            bodylen: len_u32(extras + key + value),
            opaque: self.opaque,
            cas,
        }
        .write(&mut buf);
        buf
    }

    /// A response whose body is copied (small bodies only).
    pub fn send(
        &self,
        out: &mut IoChain,
        status: u16,
        cas: u64,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
    ) {
        let mut buf = self.header(status, cas, extras.len(), key.len(), value.len());
        buf.extend_from_slice(extras);
        buf.extend_from_slice(key);
        buf.extend_from_slice(value);
        out.push_back(buf.freeze());
    }

    /// An error with memcached's message for `status`.
    pub fn error(&self, out: &mut IoChain, status: u16) {
        self.send(out, status, 0, &[], &[], message(status));
    }

    /// A hit: flags, maybe the key, maybe the value (copied if small, see
    /// [`COPIED_VALUE_LIMIT`]).
    fn item(&self, out: &mut IoChain, cas: u64, item: &Item, key: &[u8], value: bool) {
        if value && item.value.len() <= COPIED_VALUE_LIMIT {
            let mut buf = self.header(STATUS_SUCCESS, cas, 4, key.len(), item.value.len());
            buf.put_u32_be(item.flags);
            buf.extend_from_slice(key);
            buf.extend_from_slice(&item.value);
            out.push_back(buf.freeze());
            return;
        }
        let value = value.then(|| IoChain::from(item.value.clone()));
        self.hit(out, cas, item.flags, key, value);
    }

    /// A hit of an item with `flags`: maybe the key, maybe the value
    /// (not copied).
    pub fn hit(&self, out: &mut IoChain, cas: u64, flags: u32, key: &[u8], value: Option<IoChain>) {
        let value_len = value.as_ref().map_or(0, IoChain::len);
        let mut buf = self.header(STATUS_SUCCESS, cas, 4, key.len(), value_len);
        buf.put_u32_be(flags);
        buf.extend_from_slice(key);
        out.push_back(buf.freeze());
        if let Some(mut value) = value {
            out.append(&mut value);
        }
    }

    /// A miss of GETK/GATK: the key, no message.
    pub fn key_miss(&self, out: &mut IoChain, key: &[u8]) {
        self.send(out, STATUS_KEY_ENOENT, 0, &[], key, &[]);
    }
}

/// Stats as STAT responses, then the empty terminator.
fn send_stats(out: &mut IoChain, opaque: [u8; 4], list: &[stat_lists::Stat], terminate: bool) {
    let size: usize = list
        .iter()
        .map(|(k, v)| HEADER_LEN + k.len() + v.len())
        .sum::<usize>()
        + HEADER_LEN;
    let mut buf = IoBufMut::with_capacity(size);
    let mut put = |key: &[u8], value: &[u8]| {
        ResponseHeader {
            opcode: STAT,
            status: STATUS_SUCCESS,
            extlen: 0,
            keylen: u16::try_from(key.len()).unwrap_or(u16::MAX),
            bodylen: len_u32(key.len() + value.len()),
            opaque,
            cas: 0,
        }
        .write(&mut buf);
        buf.extend_from_slice(key);
        buf.extend_from_slice(value);
    };
    for (key, value) in list {
        put(key.as_bytes(), value.as_bytes());
    }
    if terminate {
        put(&[], &[]);
    }
    out.push_back(buf.freeze());
}

/// One parsed request: header, extras and key (copied; both are small).
struct Request {
    header: RequestHeader,
    /// The opcode with quiet variants mapped to their plain one.
    cmd: u8,
    quiet: bool,
    extras: [u8; 255],
    key: [u8; KEY_MAX_LENGTH],
    /// Header + extras + key.
    head: usize,
    body: usize,
}

impl Request {
    fn extlen(&self) -> usize {
        usize::from(self.header.extlen)
    }

    fn keylen(&self) -> usize {
        usize::from(self.header.keylen)
    }

    fn key(&self) -> &[u8] {
        &self.key[..self.keylen()]
    }

    fn ext_u32(&self, at: usize) -> u32 {
        let b = &self.extras[at..at + 4];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    fn ext_u64(&self, at: usize) -> u64 {
        (u64::from(self.ext_u32(at)) << 32) | u64::from(self.ext_u32(at + 4))
    }

    fn responder(&self) -> Responder {
        Responder {
            opcode: self.header.opcode,
            opaque: self.header.opaque,
        }
    }
}

/// Whether `n` bytes after a request's head are here.
enum Tail {
    Here,
    Wait,
    /// More than we buffer: answer now, discard the bytes as they come.
    Never,
}

fn tail(input: &IoChain, req: &Request, n: usize, ctx: &Context<'_>) -> Tail {
    if input.len() - req.head >= n {
        Tail::Here
    } else if n <= ctx.settings.item_size_max.saturating_add(BODY_SLACK) {
        Tail::Wait
    } else {
        Tail::Never
    }
}

/// memcached keeps a discard count in an `int`: a count above `i32::MAX`
/// is negative there and discards nothing.
fn swallow_amount(n: usize) -> usize {
    if i32::try_from(n).is_ok() {
        n
    } else {
        0
    }
}

/// Handles the first binary request in `input`.
pub fn handle(input: &IoChain, ctx: &mut Context<'_>, out: &mut IoChain) -> Outcome {
    let mut cursor = input.cursor();
    let Ok(header) = cursor.read_header::<RequestHeader>() else {
        return Outcome::Incomplete;
    };
    if header.magic != REQUEST_MAGIC {
        return Outcome::Close;
    }
    let extlen = usize::from(header.extlen);
    let keylen = usize::from(header.keylen);
    let head = HEADER_LEN + extlen + keylen;
    if input.len() < head {
        // memcached's read buffer full without a whole head: it closes.
        if head > READ_BUFFER_SIZE && input.len() >= READ_BUFFER_SIZE {
            return Outcome::Close;
        }
        return Outcome::Incomplete;
    }
    let body = usize::try_from(header.bodylen).unwrap_or(usize::MAX);
    let responder = Responder {
        opcode: header.opcode,
        opaque: header.opaque,
    };
    if keylen + extlen > body {
        responder.error(out, STATUS_UNKNOWN_COMMAND);
        return Outcome::Close;
    }
    let (cmd, quiet) = unquiet(header.opcode);
    if keylen > KEY_MAX_LENGTH {
        responder.error(out, STATUS_EINVAL);
        return Outcome::Close;
    }
    let mut req = Request {
        header,
        cmd,
        quiet,
        extras: [0; 255],
        key: [0; KEY_MAX_LENGTH],
        head,
        body,
    };
    if cursor.read_into(&mut req.extras[..extlen]).is_err()
        || cursor.read_into(&mut req.key[..keylen]).is_err()
    {
        return Outcome::Incomplete;
    }
    dispatch(&req, input, ctx, out)
}

fn protocol_error(req: &Request, out: &mut IoChain) -> Outcome {
    req.responder().error(out, STATUS_EINVAL);
    Outcome::Close
}

fn dispatch(req: &Request, input: &IoChain, ctx: &mut Context<'_>, out: &mut IoChain) -> Outcome {
    let (extlen, keylen, body) = (req.extlen(), req.keylen(), req.body);
    let empty = extlen == 0 && keylen == 0 && body == 0;
    match req.cmd {
        VERSION if empty => {
            req.responder().send(
                out,
                STATUS_SUCCESS,
                0,
                &[],
                &[],
                ctx.settings.version.as_bytes(),
            );
            Outcome::Consumed(req.head)
        }
        NOOP if empty => {
            req.responder().send(out, STATUS_SUCCESS, 0, &[], &[], &[]);
            Outcome::Consumed(req.head)
        }
        QUIT if empty => {
            if !req.quiet {
                req.responder().send(out, STATUS_SUCCESS, 0, &[], &[], &[]);
            }
            Outcome::Close
        }
        FLUSH if keylen == 0 && body == extlen && (extlen == 0 || extlen == 4) => {
            flush(req, ctx, out)
        }
        SET | ADD | REPLACE if extlen == 8 && keylen != 0 && body >= keylen + 8 => {
            let vlen = body - keylen - 8;
            store(req, input, vlen, ctx, out)
        }
        APPEND | PREPEND if keylen > 0 && extlen == 0 => store(req, input, body - keylen, ctx, out),
        GET | GETK if extlen == 0 && body == keylen && keylen > 0 => get_or_touch(req, ctx, out),
        TOUCH | GAT | GATK if extlen == 4 && keylen != 0 => get_or_touch(req, ctx, out),
        DELETE if keylen > 0 && extlen == 0 && body == keylen => delete(req, ctx, out),
        INCREMENT | DECREMENT if keylen > 0 && extlen == 20 && body == keylen + extlen => {
            arithmetic(req, ctx, out)
        }
        STAT if extlen == 0 => stat(req, ctx, out),
        SASL_LIST_MECHS if empty => unknown(req, input, 0, ctx, out),
        SASL_AUTH | SASL_STEP if extlen == 0 && keylen != 0 => {
            unknown(req, input, body - keylen, ctx, out)
        }
        VERSION | NOOP | QUIT | FLUSH | SET | ADD | REPLACE | APPEND | PREPEND | GET | GETK
        | TOUCH | GAT | GATK | DELETE | INCREMENT | DECREMENT | STAT | SASL_LIST_MECHS
        | SASL_AUTH | SASL_STEP => protocol_error(req, out),
        // memcached discards `bodylen` bytes after the extras and key here.
        _ => unknown(req, input, body, ctx, out),
    }
}

/// "Unknown command", discarding `discard` bytes after the head.
fn unknown(
    req: &Request,
    input: &IoChain,
    discard: usize,
    ctx: &Context<'_>,
    out: &mut IoChain,
) -> Outcome {
    let discard = swallow_amount(discard);
    match tail(input, req, discard, ctx) {
        Tail::Wait => Outcome::Incomplete,
        Tail::Here => {
            req.responder().error(out, STATUS_UNKNOWN_COMMAND);
            Outcome::Consumed(req.head + discard)
        }
        Tail::Never => {
            req.responder().error(out, STATUS_UNKNOWN_COMMAND);
            Outcome::Discard {
                consumed: req.head,
                discard,
            }
        }
    }
}

fn flush(req: &Request, ctx: &mut Context<'_>, out: &mut IoChain) -> Outcome {
    let exptime = if req.extlen() == 4 { req.ext_u32(0) } else { 0 };
    let now = ctx.now;
    // memcached: items stored up to `realtime(exptime) - 1` become invalid;
    // if that moment has already come, it flushes by CAS value instead, so
    // that what is stored later in the same second survives.
    let at = if exptime > 0 {
        expiry(i64::from(exptime), now)
    } else {
        now
    };
    if at.saturating_sub(1) <= now {
        ctx.store.flush_all(None, now);
    } else {
        ctx.store.flush_all(Some(at), now);
    }
    Counters::add(&ctx.counters.cmd_flush, 1);
    if !req.quiet {
        req.responder().send(out, STATUS_SUCCESS, 0, &[], &[], &[]);
    }
    Outcome::Consumed(req.head)
}

/// The CAS value memcached reports for an item (0 with `-C`).
fn cas_of(ctx: &Context<'_>, cas: u64) -> u64 {
    ctx.store.shown_cas(cas)
}

/// The store mode of a binary store command: a CAS value turns set, add
/// and replace into "cas" (memcached's `process_bin_update`; with CAS
/// disabled the request's CAS value is 0 there, so it does not).
fn set_mode(cmd: u8, cas: u64) -> SetMode {
    match cmd {
        APPEND => SetMode::Append,
        PREPEND => SetMode::Prepend,
        _ if cas != 0 => SetMode::Cas,
        ADD => SetMode::Add,
        REPLACE => SetMode::Replace,
        _ => SetMode::Set,
    }
}

/// memcached's reply to an item the store's size rule refuses.
pub(crate) fn refusal(responder: &Responder, out: &mut IoChain, refused: Refused) {
    match refused {
        Refused::TooLarge => responder.send(out, STATUS_E2BIG, 0, &[], &[], b"Too large."),
        Refused::NoMemory => responder.send(
            out,
            STATUS_ENOMEM,
            0,
            &[],
            &[],
            b"Out of memory allocating item",
        ),
    }
}

/// A store whose item cannot be allocated (memcached's `item_alloc`
/// failed, for -m or for lack of memory): refused (not counted, see the
/// module's notes), and, for a set, the old value dropped so that it does
/// not linger.
fn refuse_store(req: &Request, ctx: &Context<'_>, out: &mut IoChain, refused: Refused) {
    refusal(&req.responder(), out, refused);
    if req.cmd == SET {
        ctx.store.delete(req.key(), None, ctx.now);
    }
}

/// set, add, replace (with CAS if the header has one), append, prepend.
fn store(
    req: &Request,
    input: &IoChain,
    vlen: usize,
    ctx: &mut Context<'_>,
    out: &mut IoChain,
) -> Outcome {
    let responder = req.responder();
    let key = req.key();
    let now = ctx.now;
    let (flags, exptime) = if req.cmd == APPEND || req.cmd == PREPEND {
        (0, 0)
    } else {
        (req.ext_u32(0), req.ext_u32(4))
    };
    if i32::try_from(vlen).is_err() {
        // memcached's value length is an `int`: it is negative here, the
        // item cannot be allocated, and nothing is discarded.
        responder.error(out, STATUS_E2BIG);
        if req.cmd == SET {
            ctx.store.delete(key, None, now);
        }
        return Outcome::Consumed(req.head);
    }
    let tail = tail(input, req, vlen, ctx);
    // The size rule first, as memcached's `item_alloc` applies it when the
    // header arrives: an item over `-I` neither waits nor reserves memory
    // (evicting for it) before it is refused.
    if let Err(refused) = ctx.store.admit(key.len(), flags, vlen) {
        ctx.release_value();
        refuse_store(req, ctx, out, refused);
        return if matches!(tail, Tail::Here) {
            Outcome::Consumed(req.head + vlen)
        } else {
            Outcome::Discard {
                consumed: req.head,
                discard: vlen,
            }
        };
    }
    let here = match tail {
        Tail::Wait if ctx.reserve_value(vlen) => return Outcome::Incomplete,
        Tail::Wait => {
            // No room for it while the values still arriving hold the
            // memory limit: memcached's `item_alloc` failed.
            refuse_store(req, ctx, out, Refused::NoMemory);
            return Outcome::Discard {
                consumed: req.head,
                discard: vlen,
            };
        }
        Tail::Here => true,
        Tail::Never => false,
    };
    ctx.release_value();
    if !here {
        // Unreachable: a value that fits in -I is within what we buffer.
        return Outcome::Incomplete;
    }
    let mut cursor = input.cursor();
    let Ok(value) = cursor.skip(req.head).and_then(|()| cursor.read_chain(vlen)) else {
        return Outcome::Incomplete;
    };
    // Copy the value out of the receive buffers into its own allocation.
    let Some(value) = ctx.copy_value(&value) else {
        // memcached's `item_alloc` failed in `process_bin_update`.
        refuse_store(req, ctx, out, Refused::NoMemory);
        return Outcome::Consumed(req.head + vlen);
    };
    Counters::add(&ctx.counters.cmd_set, 1);
    let cas = ctx.store.shown_cas(req.header.cas);
    let mode = set_mode(req.cmd, cas);
    let new = NewItem {
        flags,
        expires: expiry(i64::from(exptime), now),
        value,
        cas,
        allow_stale: false,
    };
    let (ttl, size) = (new.expires.saturating_sub(now), new.value.len());
    let result = ctx.store.set(mode, key, new, now);
    ctx.counters.count_store(mode, result);
    WATCHERS.item_store(ctx.site, key, (mode, result), ttl, size);
    match result {
        SetResult::Stored(new_cas) => {
            if !req.quiet {
                responder.send(out, STATUS_SUCCESS, cas_of(ctx, new_cas), &[], &[], &[]);
            }
        }
        SetResult::Exists => responder.error(out, STATUS_KEY_EEXISTS),
        SetResult::NotFound => responder.error(out, STATUS_KEY_ENOENT),
        SetResult::TooLarge => refusal(&responder, out, Refused::TooLarge),
        SetResult::OutOfMemory => refusal(&responder, out, Refused::NoMemory),
        SetResult::NotStored => responder.error(
            out,
            match req.cmd {
                ADD => STATUS_KEY_EEXISTS,
                REPLACE => STATUS_KEY_ENOENT,
                _ => STATUS_NOT_STORED,
            },
        ),
    }
    Outcome::Consumed(req.head + vlen)
}

/// get, getk, touch, gat, gatk and their quiet variants.
fn get_or_touch(req: &Request, ctx: &mut Context<'_>, out: &mut IoChain) -> Outcome {
    let responder = req.responder();
    let key = req.key();
    let touch = matches!(req.cmd, TOUCH | GAT | GATK);
    let return_key = matches!(req.cmd, GETK | GATK);
    let item = if touch {
        let expires = expiry(i64::from(req.ext_u32(0)), ctx.now);
        ctx.store.touch(key, expires, ctx.now)
    } else {
        ctx.store.get(key, ctx.now)
    };
    WATCHERS.item_get(ctx.site, key, item.as_ref().map(|item| item.value.len()));
    let counters = ctx.counters;
    let (cmds, hits, misses) = if touch {
        (
            &counters.cmd_touch,
            &counters.touch_hits,
            &counters.touch_misses,
        )
    } else {
        (&counters.cmd_get, &counters.get_hits, &counters.get_misses)
    };
    Counters::add(cmds, 1);
    match item {
        Some(item) => {
            Counters::add(hits, 1);
            let shown_key = if return_key { key } else { &[] };
            responder.item(
                out,
                cas_of(ctx, item.cas),
                &item,
                shown_key,
                req.cmd != TOUCH,
            );
        }
        None => {
            Counters::add(misses, 1);
            if req.quiet {
                // Quiet misses say nothing.
            } else if return_key {
                responder.key_miss(out, key);
            } else {
                responder.error(out, STATUS_KEY_ENOENT);
            }
        }
    }
    Outcome::Consumed(req.head)
}

#[derive(Clone, Copy)]
enum DeleteOutcome {
    Deleted,
    NotFound,
    Exists,
}

fn delete(req: &Request, ctx: &mut Context<'_>, out: &mut IoChain) -> Outcome {
    let cas = req.header.cas;
    let cas_disabled = ctx.settings.cas_disabled;
    ctx.log_lookup(req.key());
    let (result, _) = ctx
        .store
        .update(req.key(), ctx.now, |current| match current {
            None => Update::Keep(DeleteOutcome::NotFound),
            Some(item) if cas == 0 || cas == if cas_disabled { 0 } else { item.cas } => {
                Update::Remove(DeleteOutcome::Deleted)
            }
            Some(_) => Update::Keep(DeleteOutcome::Exists),
        });
    let responder = req.responder();
    match result {
        DeleteOutcome::Deleted => {
            Counters::add(&ctx.counters.delete_hits, 1);
            if !req.quiet {
                responder.send(out, STATUS_SUCCESS, 0, &[], &[], &[]);
            }
        }
        DeleteOutcome::Exists => responder.error(out, STATUS_KEY_EEXISTS),
        DeleteOutcome::NotFound => {
            Counters::add(&ctx.counters.delete_misses, 1);
            responder.error(out, STATUS_KEY_ENOENT);
        }
    }
    Outcome::Consumed(req.head)
}

fn arithmetic(req: &Request, ctx: &mut Context<'_>, out: &mut IoChain) -> Outcome {
    let incr = req.cmd == INCREMENT;
    let delta = req.ext_u64(0);
    let initial = req.ext_u64(8);
    let exptime = req.ext_u32(16);
    let now = ctx.now;
    let responder = req.responder();
    let counters = ctx.counters;
    let (hits, misses) = if incr {
        (&counters.incr_hits, &counters.incr_misses)
    } else {
        (&counters.decr_hits, &counters.decr_misses)
    };
    let success = |out: &mut IoChain, value: u64, cas: u64| {
        if !req.quiet {
            let cas = cas_of(ctx, cas);
            responder.send(out, STATUS_SUCCESS, cas, &[], &[], &value.to_be_bytes());
        }
    };
    ctx.log_lookup(req.key());
    match ctx
        .store
        .add_delta(req.key(), incr, delta, req.header.cas, now)
    {
        Ok(result) => {
            Counters::add(hits, 1);
            success(out, result.value, result.cas);
        }
        Err(ArithError::NotFound) if exptime != NO_CREATE => {
            // memcached creates the item with the initial value by an add.
            let mut digits = Vec::with_capacity(20);
            common::push_u64(&mut digits, initial);
            let new = NewItem {
                flags: 0,
                expires: expiry(i64::from(exptime), now),
                value: IoBuf::from_vec(digits),
                cas: 0,
                allow_stale: false,
            };
            match ctx.store.set(SetMode::Add, req.key(), new, now) {
                SetResult::Stored(cas) => success(out, initial, cas),
                SetResult::TooLarge | SetResult::OutOfMemory => responder.send(
                    out,
                    STATUS_ENOMEM,
                    0,
                    &[],
                    &[],
                    b"Out of memory allocating new item",
                ),
                _ => responder.error(out, STATUS_NOT_STORED),
            }
        }
        Err(ArithError::NotFound) => {
            Counters::add(misses, 1);
            responder.error(out, STATUS_KEY_ENOENT);
        }
        Err(ArithError::NonNumeric) => responder.error(out, STATUS_DELTA_BADVAL),
        Err(ArithError::Exists) => responder.error(out, STATUS_KEY_EEXISTS),
    }
    Outcome::Consumed(req.head)
}

fn stat(req: &Request, ctx: &mut Context<'_>, out: &mut IoChain) -> Outcome {
    let sub = req.key();
    let opaque = req.header.opaque;
    // memcached compares prefixes (strncmp) for these four.
    if sub.is_empty() {
        send_stats(out, opaque, &stat_lists::general(ctx), true);
    } else if sub.starts_with(b"reset") {
        crate::stats::reset(ctx.stats, ctx.store.stats());
        send_stats(out, opaque, &[], true);
    } else if sub.starts_with(b"settings") {
        send_stats(out, opaque, &stat_lists::settings(ctx), true);
    } else if let Some(detail) = sub.strip_prefix(b"detail") {
        if detail.starts_with(b" dump") {
            send_stats(out, opaque, &stat_lists::detail_dump(), true);
        } else if detail.starts_with(b" on") {
            // Per-prefix stats are not collected: refused, not pretended
            // (see the text protocol's `stats detail`).
            req.responder().error(out, STATUS_UNKNOWN_COMMAND);
        } else if detail.starts_with(b" off") {
            send_stats(out, opaque, &[], true);
        } else {
            req.responder().error(out, STATUS_KEY_ENOENT);
        }
    } else {
        match sub {
            b"items" => send_stats(out, opaque, &stat_lists::items(ctx), true),
            b"sizes_enable" | b"sizes_disable" => send_stats(out, opaque, &[], true),
            b"slabs" => send_stats(out, opaque, &stat_lists::slabs(ctx), true),
            b"sizes" => send_stats(out, opaque, &stat_lists::sizes(), true),
            _ => req.responder().error(out, STATUS_KEY_ENOENT),
        }
    }
    Outcome::Consumed(req.head)
}
