//! The forwarding protocol: a memcached command for a key another node
//! owns, sent in one Messenger call to the owner's shard Ebb, and its
//! answer (`docs/distributed-memcached.md`, "The forwarding protocol",
//! which has the layouts as tables).
//!
//! Only the control structure is encoded here: a fixed little-endian
//! layout, like the Messenger's own. A stored or fetched value is the
//! message's payload, an IoBuf chain nobody re-encodes; the decoders are
//! told its length and check it against the control.
//!
//! Decoding is strict (an unknown version, op or status, a flag byte that
//! is not 0 or 1, a bad key length, bytes missing or left over, a payload
//! where none belongs), and every deviation is a [`ForwardError`] naming
//! it: input from another node is outside input.

use alloc::vec::Vec;
use core::fmt;

use crate::protocol::common::KEY_MAX_LENGTH;

/// The protocol's version, first byte of every control.
pub const VERSION: u8 = 2;

/// The largest control either side sends: the Messenger's default limit
/// (`ebb_messenger::Limits::DEFAULT`), which every node accepts.
pub const MAX_CONTROL_LEN: usize = 4096;

/// The most keys one `Get` asks for, so that its reply's control (4 bytes
/// and at most 17 per key) stays within [`MAX_CONTROL_LEN`].
pub const MAX_GET_KEYS: usize = (MAX_CONTROL_LEN - REPLY_VALUES_HEADER) / FOUND_ENTRY_LEN;

const REQUEST_HEADER: usize = 1 + 1 + 8;
const GET_FIELDS: usize = 1 + 1 + 8 + 2;
const REPLY_VALUES_HEADER: usize = 1 + 1 + 2;
const FOUND_ENTRY_LEN: usize = 1 + 4 + 8 + 4;

const OP_GET: u8 = 1;
const OP_STORE: u8 = 2;
const OP_DELETE: u8 = 3;
const OP_ARITH: u8 = 4;
const OP_TOUCH: u8 = 5;
const OP_FLUSH: u8 = 6;
const OP_META: u8 = 7;

/// How a forwarded store treats an existing item (memcached's commands;
/// the owner's `Store::set` decides, as for its own clients).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    /// `set`.
    Set = 1,
    /// `add`.
    Add = 2,
    /// `replace`.
    Replace = 3,
    /// `append`.
    Append = 4,
    /// `prepend`.
    Prepend = 5,
    /// `cas`.
    Cas = 6,
}

impl StoreMode {
    fn from_byte(byte: u8) -> Option<StoreMode> {
        Some(match byte {
            1 => StoreMode::Set,
            2 => StoreMode::Add,
            3 => StoreMode::Replace,
            4 => StoreMode::Append,
            5 => StoreMode::Prepend,
            6 => StoreMode::Cas,
            _ => return None,
        })
    }
}

/// What is asked of the owner. Keys borrow the control's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command<'a> {
    /// Look keys up (get, gets, gat, gats, mg, the binary gets).
    Get {
        /// Whether the reply carries CAS values.
        cas: bool,
        /// Touch each found item with this expiry time, as the client
        /// gave it (gat, gats).
        touch: Option<i64>,
        /// 1 to [`MAX_GET_KEYS`] keys.
        keys: Vec<&'a [u8]>,
    },
    /// Store the payload under `key`.
    Store {
        /// The command.
        mode: StoreMode,
        /// The client's flags.
        flags: u32,
        /// The expiry time as the client gave it (relative or absolute:
        /// the owner reads it as memcached does).
        exptime: i64,
        /// The client's CAS value (`cas`); 0 otherwise.
        cas: u64,
        /// The key.
        key: &'a [u8],
    },
    /// Delete `key`.
    Delete {
        /// Delete only an item of this CAS value (the binary protocol's
        /// delete with a CAS); 0: whatever the item's.
        cas: u64,
        /// The key.
        key: &'a [u8],
    },
    /// incr or decr.
    Arith {
        /// true: incr; false: decr.
        incr: bool,
        /// By how much.
        delta: u64,
        /// Change only an item of this CAS value (binary); 0: any.
        cas: u64,
        /// Create a missing item (the binary protocol's incr/decr whose
        /// expiry is not 0xffffffff); `None`: a miss stays a miss.
        create: Option<Create>,
        /// The key.
        key: &'a [u8],
    },
    /// touch.
    Touch {
        /// The new expiry time, as the client gave it.
        exptime: i64,
        /// The key.
        key: &'a [u8],
    },
    /// flush_all: invalidate every item of the owner's store. It names no
    /// key and is served at any epoch (it only removes values, which is
    /// never a wrong answer), so that a flush reaches every member even
    /// while maps change.
    Flush {
        /// The delay as the client gave it (0: now; memcached's
        /// `flush_all [delay]`).
        delay: i64,
    },
    /// A meta command (mg, ms, md, ma, me) for the owner to run as if
    /// its client had sent it; its reply is the owner's reply bytes
    /// ([`ForwardReply::Meta`]). The owner finds the key in the line
    /// itself, and checks it owns it (`meta_forward.rs`).
    Meta {
        /// The command line, `m` first, a newline last, at most
        /// [`META_LINE_MAX`] bytes. The payload is `ms`'s data block.
        line: &'a [u8],
    },
}

/// The longest meta command line forwarded (memcached's request line
/// limit: `protocol/text/line.rs`'s `LINE_MAX`).
pub const META_LINE_MAX: usize = 2048;

/// What a forwarded incr/decr creates a missing item with (memcached's
/// binary incr/decr: an `add` of `initial`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Create {
    /// The new item's value.
    pub initial: u64,
    /// Its expiry time, as the client gave it.
    pub exptime: i64,
}

/// A forwarded request: the forwarder's shard map epoch and the command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardRequest<'a> {
    /// The epoch of the forwarder's shard map: the owner serves the
    /// request only at that same epoch.
    pub epoch: u64,
    /// What is asked.
    pub command: Command<'a>,
}

/// One key's answer in a [`ForwardReply::Values`]: its value is the next
/// `len` bytes of the reply's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The item's flags.
    pub flags: u32,
    /// Its CAS value (0 unless asked for).
    pub cas: u64,
    /// Its value's length.
    pub len: u32,
}

/// The owner's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForwardReply {
    /// Stored, with the new item's CAS value as the owner shows it (0
    /// with CAS disabled).
    Stored(u64),
    /// The store's condition failed.
    NotStored,
    /// A CAS value did not match.
    Exists,
    /// No such item.
    NotFound,
    /// Deleted.
    Deleted,
    /// Touched.
    Touched,
    /// incr/decr's new value and the item's CAS value as shown.
    Number {
        /// The new value.
        value: u64,
        /// The item's CAS value (0 with CAS disabled).
        cas: u64,
    },
    /// A flush was carried out.
    Flushed,
    /// A meta command's reply: the payload is the bytes the owner's
    /// handler wrote (none under `q`, when it says nothing).
    Meta,
    /// A `Get`'s answer, one per key asked, in order (`None`: a miss).
    Values(Vec<Option<Entry>>),
    /// The owner's shard map has another epoch (this one): nothing done.
    WrongEpoch(u64),
    /// At the same epoch, the owner's map gives the key to another node:
    /// nothing done.
    NotOwner(u64),
    /// Over `-I`.
    TooLarge,
    /// Over `-m`, or no memory.
    OutOfMemory,
    /// incr/decr of a value that is not a number.
    NonNumeric,
    /// The request did not decode.
    BadRequest,
}

/// Why a control structure was not encoded or did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForwardError {
    /// The control ended early.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes there.
        available: usize,
    },
    /// Bytes after the last field.
    TrailingBytes {
        /// How many.
        extra: usize,
    },
    /// A version this build does not speak.
    Version {
        /// The one found.
        found: u8,
    },
    /// An unknown request op.
    UnknownOp {
        /// The op.
        op: u8,
    },
    /// An unknown reply status.
    UnknownStatus {
        /// The status.
        status: u8,
    },
    /// An unknown store mode.
    UnknownMode {
        /// The mode.
        mode: u8,
    },
    /// A yes/no byte that is neither 0 nor 1.
    BadFlag {
        /// Which field.
        field: &'static str,
        /// Its value.
        value: u8,
    },
    /// A get without touch carries an expiry time.
    ExpiryWithoutTouch,
    /// An incr/decr that creates nothing carries an initial value or an
    /// expiry time.
    CreateFieldsWithoutCreate,
    /// A meta line that is empty, too long, does not start with `m` or
    /// does not end with a newline.
    BadMetaLine {
        /// Its length.
        len: usize,
    },
    /// A key of 0 or more than 250 bytes.
    BadKeyLength {
        /// Its length.
        len: usize,
    },
    /// A get or a reply of no keys, or more than [`MAX_GET_KEYS`].
    KeyCount {
        /// How many.
        count: usize,
    },
    /// A payload on a command that has none.
    UnexpectedPayload {
        /// Its length.
        len: usize,
    },
    /// The payload is not as long as the control says.
    PayloadMismatch {
        /// What the control says.
        said: u64,
        /// What came.
        payload: usize,
    },
    /// The control would pass [`MAX_CONTROL_LEN`].
    ControlTooLong {
        /// Its length.
        len: usize,
    },
}

impl fmt::Display for ForwardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForwardError::Truncated { needed, available } => write!(
                f,
                "forwarded control truncated: {needed} bytes needed, {available} there"
            ),
            ForwardError::TrailingBytes { extra } => {
                write!(
                    f,
                    "forwarded control has {extra} bytes after its last field"
                )
            }
            ForwardError::Version { found } => {
                write!(f, "forwarding version {found}, this node speaks {VERSION}")
            }
            ForwardError::UnknownOp { op } => write!(f, "unknown forwarded op {op}"),
            ForwardError::UnknownStatus { status } => {
                write!(f, "unknown forwarded reply status {status}")
            }
            ForwardError::UnknownMode { mode } => write!(f, "unknown store mode {mode}"),
            ForwardError::BadFlag { field, value } => {
                write!(f, "{field} is {value}, not 0 or 1")
            }
            ForwardError::ExpiryWithoutTouch => {
                f.write_str("a get without touch carries an expiry time")
            }
            ForwardError::BadMetaLine { len } => write!(
                f,
                "a meta line of {len} bytes (1 to {META_LINE_MAX}, m first, a newline last)"
            ),
            ForwardError::CreateFieldsWithoutCreate => f.write_str(
                "an incr/decr that creates nothing carries an initial value or an expiry time",
            ),
            ForwardError::BadKeyLength { len } => {
                write!(f, "a key of {len} bytes (1 to {KEY_MAX_LENGTH})")
            }
            ForwardError::KeyCount { count } => {
                write!(f, "{count} keys (1 to {MAX_GET_KEYS})")
            }
            ForwardError::UnexpectedPayload { len } => {
                write!(f, "a payload of {len} bytes on a command that has none")
            }
            ForwardError::PayloadMismatch { said, payload } => {
                write!(f, "the control says {said} payload bytes, {payload} came")
            }
            ForwardError::ControlTooLong { len } => {
                write!(f, "a control of {len} bytes (at most {MAX_CONTROL_LEN})")
            }
        }
    }
}

/// Reads fields off a control, front to back.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `control` past its version byte, which must be ours,
    /// if the control is within [`MAX_CONTROL_LEN`].
    fn open(control: &'a [u8]) -> Result<Self, ForwardError> {
        if control.len() > MAX_CONTROL_LEN {
            return Err(ForwardError::ControlTooLong { len: control.len() });
        }
        let mut reader = Reader {
            bytes: control,
            at: 0,
        };
        let version = reader.u8()?;
        if version != VERSION {
            return Err(ForwardError::Version { found: version });
        }
        Ok(reader)
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], ForwardError> {
        let end = self.at.saturating_add(len);
        let taken = self
            .bytes
            .get(self.at..end)
            .ok_or(ForwardError::Truncated {
                needed: end,
                available: self.bytes.len(),
            })?;
        self.at = end;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ForwardError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, ForwardError> {
        Ok(self.array::<1>()?[0])
    }

    fn flag(&mut self, field: &'static str) -> Result<bool, ForwardError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(ForwardError::BadFlag { field, value }),
        }
    }

    fn u16(&mut self) -> Result<u16, ForwardError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, ForwardError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, ForwardError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, ForwardError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn key(&mut self) -> Result<&'a [u8], ForwardError> {
        let len = usize::from(self.u8()?);
        check_key(len)?;
        self.take(len)
    }

    fn finish(&self) -> Result<(), ForwardError> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            extra => Err(ForwardError::TrailingBytes { extra }),
        }
    }
}

fn check_key(len: usize) -> Result<(), ForwardError> {
    if len == 0 || len > KEY_MAX_LENGTH {
        return Err(ForwardError::BadKeyLength { len });
    }
    Ok(())
}

/// Whether `control` is a request of op `Meta` (served with the whole
/// server, `meta_forward.rs`), before it is decoded.
#[must_use]
pub fn is_meta(control: &[u8]) -> bool {
    control.get(1) == Some(&OP_META)
}

fn check_meta_line(line: &[u8]) -> Result<(), ForwardError> {
    let well_formed =
        line.len() <= META_LINE_MAX && line.first() == Some(&b'm') && line.last() == Some(&b'\n');
    if !well_formed {
        return Err(ForwardError::BadMetaLine { len: line.len() });
    }
    Ok(())
}

fn check_count(count: usize) -> Result<(), ForwardError> {
    if count == 0 || count > MAX_GET_KEYS {
        return Err(ForwardError::KeyCount { count });
    }
    Ok(())
}

fn no_payload(payload_len: usize) -> Result<(), ForwardError> {
    match payload_len {
        0 => Ok(()),
        len => Err(ForwardError::UnexpectedPayload { len }),
    }
}

fn push_key(out: &mut Vec<u8>, key: &[u8]) -> Result<(), ForwardError> {
    check_key(key.len())?;
    // At most KEY_MAX_LENGTH (250), checked above.
    out.push(u8::try_from(key.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(key);
    Ok(())
}

fn checked_len(out: Vec<u8>) -> Result<Vec<u8>, ForwardError> {
    if out.len() > MAX_CONTROL_LEN {
        return Err(ForwardError::ControlTooLong { len: out.len() });
    }
    Ok(out)
}

impl<'a> ForwardRequest<'a> {
    /// The control's bytes.
    ///
    /// # Errors
    ///
    /// A key of a bad length, a get of no or too many keys, or a control
    /// longer than [`MAX_CONTROL_LEN`] (split the keys: [`get_batches`]).
    pub fn encode(&self) -> Result<Vec<u8>, ForwardError> {
        let mut out = Vec::with_capacity(64);
        out.push(VERSION);
        let fields = |out: &mut Vec<u8>, op: u8| {
            out.push(op);
            out.extend_from_slice(&self.epoch.to_le_bytes());
        };
        match &self.command {
            Command::Get { cas, touch, keys } => {
                fields(&mut out, OP_GET);
                check_count(keys.len())?;
                out.push(u8::from(*cas));
                out.push(u8::from(touch.is_some()));
                out.extend_from_slice(&touch.unwrap_or(0).to_le_bytes());
                // At most MAX_GET_KEYS, checked above.
                let count = u16::try_from(keys.len()).unwrap_or(u16::MAX);
                out.extend_from_slice(&count.to_le_bytes());
                for key in keys {
                    push_key(&mut out, key)?;
                }
            }
            Command::Store {
                mode,
                flags,
                exptime,
                cas,
                key,
            } => {
                fields(&mut out, OP_STORE);
                out.push(*mode as u8);
                out.extend_from_slice(&flags.to_le_bytes());
                out.extend_from_slice(&exptime.to_le_bytes());
                out.extend_from_slice(&cas.to_le_bytes());
                push_key(&mut out, key)?;
            }
            Command::Delete { cas, key } => {
                fields(&mut out, OP_DELETE);
                out.extend_from_slice(&cas.to_le_bytes());
                push_key(&mut out, key)?;
            }
            Command::Arith {
                incr,
                delta,
                cas,
                create,
                key,
            } => {
                fields(&mut out, OP_ARITH);
                out.push(u8::from(*incr));
                out.extend_from_slice(&delta.to_le_bytes());
                out.extend_from_slice(&cas.to_le_bytes());
                out.push(u8::from(create.is_some()));
                let Create { initial, exptime } = create.unwrap_or(Create {
                    initial: 0,
                    exptime: 0,
                });
                out.extend_from_slice(&initial.to_le_bytes());
                out.extend_from_slice(&exptime.to_le_bytes());
                push_key(&mut out, key)?;
            }
            Command::Touch { exptime, key } => {
                fields(&mut out, OP_TOUCH);
                out.extend_from_slice(&exptime.to_le_bytes());
                push_key(&mut out, key)?;
            }
            Command::Flush { delay } => {
                fields(&mut out, OP_FLUSH);
                out.extend_from_slice(&delay.to_le_bytes());
            }
            Command::Meta { line } => {
                fields(&mut out, OP_META);
                check_meta_line(line)?;
                // At most META_LINE_MAX, checked above.
                let len = u16::try_from(line.len()).unwrap_or(u16::MAX);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(line);
            }
        }
        checked_len(out)
    }

    /// Decodes a request whose payload is `payload_len` bytes.
    ///
    /// # Errors
    ///
    /// The first deviation from the layout.
    pub fn decode(control: &'a [u8], payload_len: usize) -> Result<Self, ForwardError> {
        let mut r = Reader::open(control)?;
        let op = r.u8()?;
        let epoch = r.u64()?;
        let command = match op {
            OP_GET => {
                let cas = r.flag("cas")?;
                let touch = r.flag("touch")?;
                let exptime = r.i64()?;
                if !touch && exptime != 0 {
                    return Err(ForwardError::ExpiryWithoutTouch);
                }
                let count = usize::from(r.u16()?);
                check_count(count)?;
                let keys = (0..count).map(|_| r.key()).collect::<Result<Vec<_>, _>>()?;
                no_payload(payload_len)?;
                Command::Get {
                    cas,
                    touch: touch.then_some(exptime),
                    keys,
                }
            }
            OP_STORE => {
                let mode_byte = r.u8()?;
                let mode = StoreMode::from_byte(mode_byte)
                    .ok_or(ForwardError::UnknownMode { mode: mode_byte })?;
                Command::Store {
                    mode,
                    flags: r.u32()?,
                    exptime: r.i64()?,
                    cas: r.u64()?,
                    key: r.key()?,
                }
            }
            OP_DELETE => {
                let cas = r.u64()?;
                let key = r.key()?;
                no_payload(payload_len)?;
                Command::Delete { cas, key }
            }
            OP_ARITH => {
                let incr = r.flag("incr")?;
                let delta = r.u64()?;
                let cas = r.u64()?;
                let creates = r.flag("create")?;
                let (initial, exptime) = (r.u64()?, r.i64()?);
                if !creates && (initial, exptime) != (0, 0) {
                    return Err(ForwardError::CreateFieldsWithoutCreate);
                }
                let key = r.key()?;
                no_payload(payload_len)?;
                Command::Arith {
                    incr,
                    delta,
                    cas,
                    create: creates.then_some(Create { initial, exptime }),
                    key,
                }
            }
            OP_TOUCH => {
                let exptime = r.i64()?;
                let key = r.key()?;
                no_payload(payload_len)?;
                Command::Touch { exptime, key }
            }
            OP_FLUSH => {
                let delay = r.i64()?;
                no_payload(payload_len)?;
                Command::Flush { delay }
            }
            OP_META => {
                let len = usize::from(r.u16()?);
                let line = r.take(len)?;
                check_meta_line(line)?;
                Command::Meta { line }
            }
            op => return Err(ForwardError::UnknownOp { op }),
        };
        r.finish()?;
        Ok(ForwardRequest { epoch, command })
    }

    /// The keys the request names (none for a flush).
    #[must_use]
    pub fn keys(&self) -> &[&'a [u8]] {
        match &self.command {
            Command::Get { keys, .. } => keys,
            // A meta line's key is found by parsing it (`meta_forward.rs`).
            Command::Flush { .. } | Command::Meta { .. } => &[],
            Command::Store { key, .. }
            | Command::Delete { key, .. }
            | Command::Arith { key, .. }
            | Command::Touch { key, .. } => core::slice::from_ref(key),
        }
    }
}

/// `Get` requests asking for `keys`, in order, each within
/// [`MAX_GET_KEYS`] and [`MAX_CONTROL_LEN`] (a multiget to one owner that
/// one call cannot carry).
///
/// # Errors
///
/// A key of a bad length.
pub fn get_batches<'a>(
    epoch: u64,
    cas: bool,
    touch: Option<i64>,
    keys: &[&'a [u8]],
) -> Result<Vec<ForwardRequest<'a>>, ForwardError> {
    let mut batches = Vec::new();
    let mut batch: Vec<&'a [u8]> = Vec::new();
    let mut len = REQUEST_HEADER + GET_FIELDS;
    for &key in keys {
        check_key(key.len())?;
        let key_len = 1 + key.len();
        if batch.len() == MAX_GET_KEYS || len + key_len > MAX_CONTROL_LEN {
            batches.push(core::mem::take(&mut batch));
            len = REQUEST_HEADER + GET_FIELDS;
        }
        batch.push(key);
        len += key_len;
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    Ok(batches
        .into_iter()
        .map(|keys| ForwardRequest {
            epoch,
            command: Command::Get { cas, touch, keys },
        })
        .collect())
}

const ST_STORED: u8 = 0;
const ST_NOT_STORED: u8 = 1;
const ST_EXISTS: u8 = 2;
const ST_NOT_FOUND: u8 = 3;
const ST_DELETED: u8 = 4;
const ST_TOUCHED: u8 = 5;
const ST_NUMBER: u8 = 6;
const ST_VALUES: u8 = 7;
const ST_FLUSHED: u8 = 8;
const ST_META: u8 = 9;
const ST_WRONG_EPOCH: u8 = 16;
const ST_NOT_OWNER: u8 = 17;
const ST_TOO_LARGE: u8 = 18;
const ST_OUT_OF_MEMORY: u8 = 19;
const ST_NON_NUMERIC: u8 = 20;
const ST_BAD_REQUEST: u8 = 21;

impl ForwardReply {
    /// The control's bytes (the found values are the payload, in order).
    ///
    /// # Errors
    ///
    /// `Values` of no or too many keys.
    pub fn encode(&self) -> Result<Vec<u8>, ForwardError> {
        let mut out = Vec::with_capacity(16);
        out.push(VERSION);
        match self {
            ForwardReply::Stored(cas) => {
                out.push(ST_STORED);
                out.extend_from_slice(&cas.to_le_bytes());
            }
            ForwardReply::Flushed => out.push(ST_FLUSHED),
            ForwardReply::Meta => out.push(ST_META),
            ForwardReply::NotStored => out.push(ST_NOT_STORED),
            ForwardReply::Exists => out.push(ST_EXISTS),
            ForwardReply::NotFound => out.push(ST_NOT_FOUND),
            ForwardReply::Deleted => out.push(ST_DELETED),
            ForwardReply::Touched => out.push(ST_TOUCHED),
            ForwardReply::Number { value, cas } => {
                out.push(ST_NUMBER);
                out.extend_from_slice(&value.to_le_bytes());
                out.extend_from_slice(&cas.to_le_bytes());
            }
            ForwardReply::Values(entries) => {
                out.push(ST_VALUES);
                check_count(entries.len())?;
                // At most MAX_GET_KEYS, checked above.
                let count = u16::try_from(entries.len()).unwrap_or(u16::MAX);
                out.extend_from_slice(&count.to_le_bytes());
                for entry in entries {
                    match entry {
                        None => out.push(0),
                        Some(entry) => {
                            out.push(1);
                            out.extend_from_slice(&entry.flags.to_le_bytes());
                            out.extend_from_slice(&entry.cas.to_le_bytes());
                            out.extend_from_slice(&entry.len.to_le_bytes());
                        }
                    }
                }
            }
            ForwardReply::WrongEpoch(epoch) => {
                out.push(ST_WRONG_EPOCH);
                out.extend_from_slice(&epoch.to_le_bytes());
            }
            ForwardReply::NotOwner(epoch) => {
                out.push(ST_NOT_OWNER);
                out.extend_from_slice(&epoch.to_le_bytes());
            }
            ForwardReply::TooLarge => out.push(ST_TOO_LARGE),
            ForwardReply::OutOfMemory => out.push(ST_OUT_OF_MEMORY),
            ForwardReply::NonNumeric => out.push(ST_NON_NUMERIC),
            ForwardReply::BadRequest => out.push(ST_BAD_REQUEST),
        }
        checked_len(out)
    }

    /// Decodes a reply whose payload is `payload_len` bytes.
    ///
    /// # Errors
    ///
    /// The first deviation from the layout; `Values` whose lengths do not
    /// add up to the payload's.
    pub fn decode(control: &[u8], payload_len: usize) -> Result<ForwardReply, ForwardError> {
        let mut r = Reader::open(control)?;
        let reply = match r.u8()? {
            ST_STORED => ForwardReply::Stored(r.u64()?),
            ST_FLUSHED => ForwardReply::Flushed,
            ST_META => {
                // Any payload: the reply's bytes.
                r.finish()?;
                return Ok(ForwardReply::Meta);
            }
            ST_NOT_STORED => ForwardReply::NotStored,
            ST_EXISTS => ForwardReply::Exists,
            ST_NOT_FOUND => ForwardReply::NotFound,
            ST_DELETED => ForwardReply::Deleted,
            ST_TOUCHED => ForwardReply::Touched,
            ST_NUMBER => ForwardReply::Number {
                value: r.u64()?,
                cas: r.u64()?,
            },
            ST_VALUES => {
                let count = usize::from(r.u16()?);
                check_count(count)?;
                let mut entries = Vec::with_capacity(count);
                let mut total: u64 = 0;
                for _ in 0..count {
                    if r.flag("found")? {
                        let entry = Entry {
                            flags: r.u32()?,
                            cas: r.u64()?,
                            len: r.u32()?,
                        };
                        total += u64::from(entry.len);
                        entries.push(Some(entry));
                    } else {
                        entries.push(None);
                    }
                }
                if total != payload_len as u64 {
                    return Err(ForwardError::PayloadMismatch {
                        said: total,
                        payload: payload_len,
                    });
                }
                r.finish()?;
                return Ok(ForwardReply::Values(entries));
            }
            ST_WRONG_EPOCH => ForwardReply::WrongEpoch(r.u64()?),
            ST_NOT_OWNER => ForwardReply::NotOwner(r.u64()?),
            ST_TOO_LARGE => ForwardReply::TooLarge,
            ST_OUT_OF_MEMORY => ForwardReply::OutOfMemory,
            ST_NON_NUMERIC => ForwardReply::NonNumeric,
            ST_BAD_REQUEST => ForwardReply::BadRequest,
            status => return Err(ForwardError::UnknownStatus { status }),
        };
        no_payload(payload_len)?;
        r.finish()?;
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn the_largest_get_reply_fits_the_control_limit() {
        let entries = vec![
            Some(Entry {
                flags: 1,
                cas: 2,
                len: 0
            });
            MAX_GET_KEYS
        ];
        let control = ForwardReply::Values(entries).encode().unwrap();
        assert!(control.len() <= MAX_CONTROL_LEN);
        assert_eq!(MAX_GET_KEYS, 240);
    }

    #[test]
    fn a_store_round_trips_with_its_payload() {
        let request = ForwardRequest {
            epoch: 3,
            command: Command::Store {
                mode: StoreMode::Cas,
                flags: 0xdead_beef,
                exptime: -1,
                cas: 77,
                key: b"k",
            },
        };
        let control = request.encode().unwrap();
        assert_eq!(ForwardRequest::decode(&control, 5), Ok(request));
    }

    #[test]
    fn deviations_are_named() {
        let delete = ForwardRequest {
            epoch: 1,
            command: Command::Delete {
                cas: 0,
                key: b"key",
            },
        }
        .encode()
        .unwrap();
        assert_eq!(
            ForwardRequest::decode(&delete, 1),
            Err(ForwardError::UnexpectedPayload { len: 1 })
        );
        let mut bad = delete.clone();
        bad[0] = 3;
        assert_eq!(
            ForwardRequest::decode(&bad, 0),
            Err(ForwardError::Version { found: 3 })
        );
        bad = delete.clone();
        bad[1] = 9;
        assert_eq!(
            ForwardRequest::decode(&bad, 0),
            Err(ForwardError::UnknownOp { op: 9 })
        );
        bad = delete.clone();
        bad[18] = 0;
        assert_eq!(
            ForwardRequest::decode(&bad, 0),
            Err(ForwardError::BadKeyLength { len: 0 })
        );
        bad = delete.clone();
        bad.push(0);
        assert_eq!(
            ForwardRequest::decode(&bad, 0),
            Err(ForwardError::TrailingBytes { extra: 1 })
        );
        assert_eq!(
            ForwardRequest::decode(&delete[..12], 0),
            Err(ForwardError::Truncated {
                needed: 18,
                available: 12
            })
        );
        assert_eq!(
            ForwardReply::decode(
                &[VERSION, ST_VALUES, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0],
                2
            ),
            Err(ForwardError::PayloadMismatch {
                said: 3,
                payload: 2
            })
        );
        assert_eq!(
            ForwardReply::decode(&[VERSION, 99], 0),
            Err(ForwardError::UnknownStatus { status: 99 })
        );
    }

    #[test]
    fn a_flush_and_a_creating_incr_round_trip_and_name_no_key() {
        let flush = ForwardRequest {
            epoch: 0,
            command: Command::Flush { delay: 30 },
        };
        let control = flush.encode().unwrap();
        assert_eq!(ForwardRequest::decode(&control, 0), Ok(flush.clone()));
        assert!(flush.keys().is_empty());
        assert_eq!(
            ForwardRequest::decode(&control, 1),
            Err(ForwardError::UnexpectedPayload { len: 1 })
        );
        let incr = ForwardRequest {
            epoch: 2,
            command: Command::Arith {
                incr: true,
                delta: 5,
                cas: 9,
                create: Some(Create {
                    initial: 7,
                    exptime: 60,
                }),
                key: b"n",
            },
        };
        let mut control = incr.encode().unwrap();
        assert_eq!(ForwardRequest::decode(&control, 0), Ok(incr));
        // The create flag cleared, its fields left: refused, not ignored.
        control[27] = 0;
        assert_eq!(
            ForwardRequest::decode(&control, 0),
            Err(ForwardError::CreateFieldsWithoutCreate)
        );
        for reply in [
            ForwardReply::Stored(u64::MAX),
            ForwardReply::Number { value: 3, cas: 4 },
            ForwardReply::Flushed,
        ] {
            let control = reply.encode().unwrap();
            assert_eq!(ForwardReply::decode(&control, 0), Ok(reply));
        }
    }

    #[test]
    fn a_long_multiget_is_split_within_both_limits() {
        let keys: Vec<Vec<u8>> = (0..1000u32)
            .map(|i| {
                let mut key = vec![b'k'; 200];
                key.extend_from_slice(&i.to_le_bytes());
                key
            })
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let batches = get_batches(5, true, None, &refs).unwrap();
        let mut seen = Vec::new();
        for batch in &batches {
            let control = batch.encode().unwrap();
            assert!(control.len() <= MAX_CONTROL_LEN);
            seen.extend_from_slice(batch.keys());
        }
        assert_eq!(seen, refs);
        let per_batch = (MAX_CONTROL_LEN - REQUEST_HEADER - GET_FIELDS) / 205;
        assert_eq!(batches.len(), 1000usize.div_ceil(per_batch));
    }
}
