//! Opcodes and status codes of the binary protocol (`protocol_binary.h`).

/// First byte of every response.
pub const RESPONSE_MAGIC: u8 = 0x81;

/// Get.
pub const GET: u8 = 0x00;
/// Set.
pub const SET: u8 = 0x01;
/// Add.
pub const ADD: u8 = 0x02;
/// Replace.
pub const REPLACE: u8 = 0x03;
/// Delete.
pub const DELETE: u8 = 0x04;
/// Increment.
pub const INCREMENT: u8 = 0x05;
/// Decrement.
pub const DECREMENT: u8 = 0x06;
/// Quit.
pub const QUIT: u8 = 0x07;
/// Flush.
pub const FLUSH: u8 = 0x08;
/// Quiet get.
pub const GETQ: u8 = 0x09;
/// No operation.
pub const NOOP: u8 = 0x0a;
/// Version.
pub const VERSION: u8 = 0x0b;
/// Get, returning the key.
pub const GETK: u8 = 0x0c;
/// Quiet get, returning the key.
pub const GETKQ: u8 = 0x0d;
/// Append.
pub const APPEND: u8 = 0x0e;
/// Prepend.
pub const PREPEND: u8 = 0x0f;
/// Statistics.
pub const STAT: u8 = 0x10;
/// Quiet set.
pub const SETQ: u8 = 0x11;
/// Quiet add.
pub const ADDQ: u8 = 0x12;
/// Quiet replace.
pub const REPLACEQ: u8 = 0x13;
/// Quiet delete.
pub const DELETEQ: u8 = 0x14;
/// Quiet increment.
pub const INCREMENTQ: u8 = 0x15;
/// Quiet decrement.
pub const DECREMENTQ: u8 = 0x16;
/// Quiet quit.
pub const QUITQ: u8 = 0x17;
/// Quiet flush.
pub const FLUSHQ: u8 = 0x18;
/// Quiet append.
pub const APPENDQ: u8 = 0x19;
/// Quiet prepend.
pub const PREPENDQ: u8 = 0x1a;
/// Touch.
pub const TOUCH: u8 = 0x1c;
/// Get and touch.
pub const GAT: u8 = 0x1d;
/// Quiet get and touch.
pub const GATQ: u8 = 0x1e;
/// SASL: list mechanisms (SASL is not supported: "Unknown command").
pub const SASL_LIST_MECHS: u8 = 0x20;
/// SASL: authenticate.
pub const SASL_AUTH: u8 = 0x21;
/// SASL: next step.
pub const SASL_STEP: u8 = 0x22;
/// Get and touch, returning the key.
pub const GATK: u8 = 0x23;
/// Quiet get and touch, returning the key.
pub const GATKQ: u8 = 0x24;

/// Success.
pub const STATUS_SUCCESS: u16 = 0x00;
/// Key not found.
pub const STATUS_KEY_ENOENT: u16 = 0x01;
/// Key exists (or CAS mismatch).
pub const STATUS_KEY_EEXISTS: u16 = 0x02;
/// Value too large.
pub const STATUS_E2BIG: u16 = 0x03;
/// Invalid arguments.
pub const STATUS_EINVAL: u16 = 0x04;
/// Item not stored.
pub const STATUS_NOT_STORED: u16 = 0x05;
/// incr/decr on a non-numeric value.
pub const STATUS_DELTA_BADVAL: u16 = 0x06;
/// Authentication error (also: flush disabled).
pub const STATUS_AUTH_ERROR: u16 = 0x20;
/// Unknown command.
pub const STATUS_UNKNOWN_COMMAND: u16 = 0x81;
/// Out of memory.
pub const STATUS_ENOMEM: u16 = 0x82;
/// Internal error (on a node of several: another node did not answer).
pub const STATUS_EINTERNAL: u16 = 0x84;
/// Temporary failure (on a node of several: the shard map is changing).
pub const STATUS_ETMPFAIL: u16 = 0x86;

/// The quiet variant's plain opcode and whether it was quiet, as
/// memcached's `dispatch_bin_command` maps them.
pub fn unquiet(opcode: u8) -> (u8, bool) {
    let plain = match opcode {
        SETQ => SET,
        ADDQ => ADD,
        REPLACEQ => REPLACE,
        DELETEQ => DELETE,
        INCREMENTQ => INCREMENT,
        DECREMENTQ => DECREMENT,
        QUITQ => QUIT,
        FLUSHQ => FLUSH,
        APPENDQ => APPEND,
        PREPENDQ => PREPEND,
        GETQ => GET,
        GETKQ => GETK,
        GATQ => GAT,
        GATKQ => GATK,
        other => return (other, false),
    };
    (plain, true)
}

/// memcached's generic message for an error status.
pub fn message(status: u16) -> &'static [u8] {
    match status {
        STATUS_ENOMEM => b"Out of memory",
        STATUS_UNKNOWN_COMMAND => b"Unknown command",
        STATUS_KEY_ENOENT => b"Not found",
        STATUS_EINVAL => b"Invalid arguments",
        STATUS_KEY_EEXISTS => b"Data exists for key.",
        STATUS_E2BIG => b"Too large.",
        STATUS_DELTA_BADVAL => b"Non-numeric server-side value for incr or decr",
        STATUS_NOT_STORED => b"Not stored.",
        STATUS_AUTH_ERROR => b"Auth failure.",
        _ => b"UNHANDLED ERROR",
    }
}
