//! The binary protocol, differentially: one scripted session sent to
//! Debian's memcached 1.6.18 and to ours, compared response by response,
//! byte for byte, except for values that must differ between two servers:
//! CAS values (replaced by their order of first appearance, so "the same
//! CAS as before" and "a new CAS" are still checked), and the values (not
//! the names) of STAT responses.

mod common;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::thread;
use std::time::Duration;

use common::binary::*;
use common::{start_ours, start_stock, Client, Server};

enum Step {
    /// Sent on the session's connection, followed by a NOOP sentinel.
    Request(&'static str, Vec<u8>),
    /// Sent alone on a new connection, which the server must close.
    Closes(&'static str, Vec<u8>),
    /// Wait (for expiry times).
    Sleep(Duration),
}

use Step::{Closes, Request, Sleep};

fn r(name: &'static str, request: Req) -> Step {
    Request(name, request.bytes())
}

fn many(name: &'static str, requests: &[Req]) -> Step {
    Request(name, requests.iter().flat_map(Req::bytes).collect())
}

fn script() -> Vec<Step> {
    let big_ok = vec![b'x'; 1_048_516];
    let big_no = vec![b'x'; 1_048_517];
    let past = 60 * 60 * 24 * 30 + 1;
    vec![
        r("noop", req(NOOP, b"").opaque(1)),
        r("version", req(VERSION, b"").opaque(2)),
        r("stats detail dump (empty)", req(STAT, b"detail dump")),
        r("stats sizes", req(STAT, b"sizes")),
        r("stats items (empty)", req(STAT, b"items")),
        r("stats slabs (empty)", req(STAT, b"slabs")),
        r("stats bogus", req(STAT, b"bogus").opaque(3)),
        r("stats detail bogus", req(STAT, b"detail x")),
        r("get miss", req(GET, b"foo").opaque(4)),
        r("getk miss", req(GETK, b"foo").opaque(5)),
        r("getq miss", req(GETQ, b"foo")),
        r("getkq miss", req(GETKQ, b"foo")),
        r("set", set(b"foo", b"bar", 0, 0).opaque(6)),
        r("get hit", req(GET, b"foo").opaque(7)),
        r("getk hit", req(GETK, b"foo")),
        r("getq hit", req(GETQ, b"foo")),
        r("getkq hit", req(GETKQ, b"foo")),
        r("set with flags", set(b"flagged", b"data", 0xdead_beef, 0)),
        r("get flags", req(GET, b"flagged")),
        r(
            "setq",
            req(SETQ, b"quiet")
                .extras(&store_extras(7, 0))
                .value(b"shh"),
        ),
        r("get setq", req(GET, b"quiet")),
        r(
            "add existing",
            req(ADD, b"foo").extras(&store_extras(0, 0)).value(b"x"),
        ),
        r(
            "addq existing",
            req(ADDQ, b"foo").extras(&store_extras(0, 0)).value(b"x"),
        ),
        r(
            "add new",
            req(ADD, b"added").extras(&store_extras(1, 0)).value(b"a"),
        ),
        r(
            "addq new",
            req(ADDQ, b"added2").extras(&store_extras(1, 0)).value(b"a"),
        ),
        r(
            "replace missing",
            req(REPLACE, b"nope")
                .extras(&store_extras(0, 0))
                .value(b"x"),
        ),
        r(
            "replaceq missing",
            req(REPLACEQ, b"nope")
                .extras(&store_extras(0, 0))
                .value(b"x"),
        ),
        r(
            "replace",
            req(REPLACE, b"added")
                .extras(&store_extras(2, 0))
                .value(b"b"),
        ),
        r(
            "replaceq",
            req(REPLACEQ, b"added")
                .extras(&store_extras(3, 0))
                .value(b"c"),
        ),
        r("get replaced", req(GETK, b"added")),
        // CAS: the CAS value of "foo" is its first set's (mapped to #1).
        r("gets for cas", req(GET, b"foo")),
        r("set bad cas", set(b"foo", b"new", 0, 0).cas(999_999)),
        r(
            "add with cas, present",
            req(ADD, b"foo")
                .extras(&store_extras(0, 0))
                .value(b"y")
                .cas(999_999),
        ),
        r(
            "add with cas, absent",
            req(ADD, b"absent")
                .extras(&store_extras(0, 0))
                .value(b"y")
                .cas(5),
        ),
        r(
            "replace with cas, absent",
            req(REPLACE, b"absent")
                .extras(&store_extras(0, 0))
                .value(b"y")
                .cas(5),
        ),
        r("delete bad cas", req(DELETE, b"foo").cas(999_999)),
        r(
            "append bad cas",
            req(APPEND, b"foo").value(b"!").cas(999_999),
        ),
        r(
            "incr bad cas",
            req(INCR, b"foo")
                .extras(&delta_extras(1, 0, 0))
                .cas(999_999),
        ),
        r("stats after cas", req(STAT, b"")),
        r("append", req(APPEND, b"foo").value(b"-tail")),
        r("appendq", req(APPENDQ, b"foo").value(b"-q")),
        r("prepend", req(PREPEND, b"foo").value(b"head-")),
        r("prependq", req(PREPENDQ, b"foo").value(b"q-")),
        r("get appended", req(GET, b"foo")),
        r("append missing", req(APPEND, b"missing").value(b"x")),
        r("prependq missing", req(PREPENDQ, b"missing").value(b"x")),
        r("delete", req(DELETE, b"added2")),
        r("delete missing", req(DELETE, b"added2")),
        r("deleteq missing", req(DELETEQ, b"added2")),
        r("deleteq", req(DELETEQ, b"added")),
        r("get deleted", req(GET, b"added")),
        r("set number", set(b"n", b"10", 5, 0)),
        r("decr", req(DECR, b"n").extras(&delta_extras(1, 0, 0))),
        r("get decr (space-padded)", req(GET, b"n")),
        r(
            "incr grows",
            req(INCR, b"n").extras(&delta_extras(100, 0, 0)),
        ),
        r("get incr", req(GET, b"n")),
        r(
            "decr below zero",
            req(DECR, b"n").extras(&delta_extras(1000, 0, 0)),
        ),
        r("incrq", req(INCRQ, b"n").extras(&delta_extras(5, 0, 0))),
        r("decrq", req(DECRQ, b"n").extras(&delta_extras(2, 0, 0))),
        r("get n", req(GET, b"n")),
        r("incr wraps", set(b"w", b"18446744073709551615", 0, 0)),
        r("incr wrap", req(INCR, b"w").extras(&delta_extras(2, 0, 0))),
        r("get wrapped", req(GET, b"w")),
        r(
            "incr missing, no create",
            req(INCR, b"ctr").extras(&delta_extras(1, 42, 0xffff_ffff)),
        ),
        r(
            "decrq missing, no create",
            req(DECRQ, b"ctr").extras(&delta_extras(1, 42, 0xffff_ffff)),
        ),
        r(
            "incr missing, create",
            req(INCR, b"ctr").extras(&delta_extras(1, 42, 0)),
        ),
        r(
            "incr created",
            req(INCR, b"ctr").extras(&delta_extras(1, 42, 0)),
        ),
        r("get created", req(GETK, b"ctr")),
        r(
            "incr non-numeric",
            req(INCR, b"foo").extras(&delta_extras(1, 0, 0)),
        ),
        r("set spaced number", set(b"sp", b" 12 x", 0, 0)),
        r(
            "incr spaced",
            req(INCR, b"sp").extras(&delta_extras(1, 0, 0)),
        ),
        r("set empty", set(b"empty", b"", 0, 0)),
        r(
            "incr empty",
            req(INCR, b"empty").extras(&delta_extras(1, 0, 0)),
        ),
        r("set negative", set(b"neg", b"-1", 0, 0)),
        r(
            "decr negative",
            req(DECR, b"neg").extras(&delta_extras(1, 0, 0)),
        ),
        r("touch", req(TOUCH, b"foo").extras(&100u32.to_be_bytes())),
        r(
            "touch missing",
            req(TOUCH, b"nope").extras(&100u32.to_be_bytes()),
        ),
        r("gat", req(GAT, b"foo").extras(&100u32.to_be_bytes())),
        r("gatq", req(GATQ, b"foo").extras(&100u32.to_be_bytes())),
        r(
            "gatq missing",
            req(GATQ, b"nope").extras(&100u32.to_be_bytes()),
        ),
        r("gatk", req(GATK, b"foo").extras(&100u32.to_be_bytes())),
        r(
            "gatk missing",
            req(GATK, b"nope").extras(&100u32.to_be_bytes()),
        ),
        r("gatkq", req(GATKQ, b"foo").extras(&100u32.to_be_bytes())),
        r(
            "gatkq missing",
            req(GATKQ, b"nope").extras(&100u32.to_be_bytes()),
        ),
        r("set in the past", set(b"old", b"x", 0, past)),
        r("get past", req(GET, b"old")),
        r("set expiring", set(b"soon", b"x", 0, 1)),
        r("set lasting", set(b"later", b"x", 0, 100)),
        r(
            "gat to expire",
            req(GAT, b"flagged").extras(&1u32.to_be_bytes()),
        ),
        r("largest value", set(b"k", &big_ok, 0, 0)),
        r("value too large", set(b"k", &big_no, 0, 0)),
        r("too large set dropped the old", req(GET, b"k")),
        r(
            "setq too large",
            req(SETQ, b"k").extras(&store_extras(0, 0)).value(&big_no),
        ),
        r("set near max", set(b"k", &big_ok[..1_000_000], 0, 0)),
        r(
            "append past max",
            req(APPEND, b"k").value(&big_ok[..100_000]),
        ),
        r("append too large", req(APPEND, b"k").value(&big_no)),
        r("get k still there", req(GETK, b"k").opaque(11)),
        many(
            "pipeline of quiet gets",
            &[
                req(GETQ, b"foo").opaque(21),
                req(GETKQ, b"nope").opaque(22),
                req(GETKQ, b"n").opaque(23),
                req(GETQ, b"nope").opaque(24),
                req(GETK, b"nope").opaque(25),
            ],
        ),
        many(
            "pipeline of quiet stores",
            &[
                req(SETQ, b"p1").extras(&store_extras(0, 0)).value(b"1"),
                req(ADDQ, b"p1").extras(&store_extras(0, 0)).value(b"2"),
                req(REPLACEQ, b"p2").extras(&store_extras(0, 0)).value(b"3"),
                req(APPENDQ, b"p1").value(b"4"),
                req(GET, b"p1"),
            ],
        ),
        Request(
            "unknown opcode discards bodylen bytes after its key",
            [req(0x1b, b"foo").bytes(), b"xyz".to_vec()].concat(),
        ),
        r("unknown opcode", req(0x42, b"").opaque(12)),
        r("unknown opcode with body", req(0x42, b"").value(b"junk")),
        r("sasl list mechs", req(SASL_LIST_MECHS, b"")),
        r("sasl auth", req(SASL_AUTH, b"PLAIN").value(b"\0user\0pass")),
        Request(
            "what bodylen says beyond the key of a stat is the next request",
            [
                req(STAT, b"reset").bodylen(5 + 24).bytes(),
                req(NOOP, b"").opaque(77).bytes(),
            ]
            .concat(),
        ),
        r("stats reset", req(STAT, b"reset")),
        r("stats settings", req(STAT, b"settings")),
        r("flush", req(FLUSH, b"")),
        r("get after flush", req(GET, b"foo")),
        r("set after flush", set(b"foo", b"again", 0, 0)),
        r("get after flush and set", req(GET, b"foo")),
        r("flushq", req(FLUSHQ, b"")),
        r("get after flushq", req(GET, b"foo")),
        r("set before a delayed flush", set(b"foo", b"x", 0, 0)),
        r(
            "flush with delay",
            req(FLUSH, b"").extras(&2u32.to_be_bytes()),
        ),
        Sleep(Duration::from_millis(2600)),
        r("expired", req(GET, b"soon")),
        r("touched to expire", req(GET, b"flagged")),
        r("flushed by the delayed flush", req(GET, b"foo")),
        r("set after the delayed flush", set(b"foo", b"y", 0, 0)),
        r("get after the delayed flush", req(GET, b"foo")),
        r(
            "flush with zero extras",
            req(FLUSH, b"").extras(&0u32.to_be_bytes()),
        ),
        r("get after flush 0", req(GET, b"later")),
        r("general stats", req(STAT, b"").opaque(13)),
        // Bodies larger than -I + 64 KB (issue 15, defect 7): refused, and
        // the connection reads past them and goes on.
        r(
            "a set of more than -I + 64 KB",
            set(b"huge", &vec![b'x'; (1 << 20) + (64 << 10) + 100], 0, 0),
        ),
        r("the huge set was not stored", req(GET, b"huge")),
        r(
            "an unknown opcode with more than -I + 64 KB of body",
            req(0x7f, b"").value(&vec![b'y'; (1 << 20) + (64 << 10) + 100]),
        ),
        r("served after the huge bodies", req(GET, b"later")),
        // Errors that close the connection.
        Closes(
            "bad magic",
            [req(NOOP, b"").bytes(), req(NOOP, b"").magic(0x81).bytes()].concat(),
        ),
        Closes("text on a binary connection", {
            let mut b = req(NOOP, b"").bytes();
            b.extend_from_slice(b"get foo\r\n");
            b
        }),
        Closes("key + extras > body", req(GET, b"abc").bodylen(2).bytes()),
        Closes("key > 250", req(GET, &[b'k'; 251]).bytes()),
        Closes("key 16000", req(GET, &[b'k'; 16_000]).bytes()),
        Closes("get with extras", req(GET, b"a").extras(b"xxxx").bytes()),
        Closes("get without key", req(GET, b"").bytes()),
        Closes("get with value", req(GET, b"a").value(b"v").bytes()),
        Closes("set without extras", req(SET, b"a").value(b"v").bytes()),
        Closes(
            "set without key",
            req(SET, b"").extras(&store_extras(0, 0)).bytes(),
        ),
        Closes(
            "setq with short extras",
            req(SETQ, b"a").extras(b"1234").value(b"v").bytes(),
        ),
        Closes(
            "delete with extras",
            req(DELETE, b"a").extras(b"1234").bytes(),
        ),
        Closes(
            "incr with short extras",
            req(INCR, b"a").extras(&[0; 8]).bytes(),
        ),
        Closes(
            "append with extras",
            req(APPEND, b"a").extras(b"1234").value(b"v").bytes(),
        ),
        Closes("touch without extras", req(TOUCH, b"a").bytes()),
        Closes("gatq without key", req(GATQ, b"").extras(b"1234").bytes()),
        Closes("noop with body", req(NOOP, b"").value(b"x").bytes()),
        Closes("version with key", req(VERSION, b"v").bytes()),
        Closes("flush with key", req(FLUSH, b"k").bytes()),
        Closes(
            "flush with 8 extras",
            req(FLUSH, b"").extras(&[0; 8]).bytes(),
        ),
        Closes("stat with extras", req(STAT, b"").extras(b"1234").bytes()),
        Closes("quit with body", req(QUIT, b"").value(b"x").bytes()),
        Closes(
            "sasl list with body",
            req(SASL_LIST_MECHS, b"").value(b"x").bytes(),
        ),
        Closes(
            "sasl auth without key",
            req(SASL_AUTH, b"").value(b"x").bytes(),
        ),
        Closes("quit", req(QUIT, b"").opaque(14).bytes()),
        Closes("quitq", req(QUITQ, b"").bytes()),
        r(
            "the session connection still works",
            req(GETK, b"foo").opaque(15),
        ),
        r("keylen 250 is fine", req(GET, &[b'k'; 250])),
    ]
}

/// One response, header fields and body.
struct Response {
    magic: u8,
    opcode: u8,
    keylen: u16,
    extlen: u8,
    datatype: u8,
    status: u16,
    bodylen: u32,
    opaque: u32,
    cas: u64,
    body: Vec<u8>,
}

fn parse(mut bytes: &[u8]) -> (Vec<Response>, Vec<u8>) {
    let mut responses = Vec::new();
    while bytes.len() >= 24 {
        let h = &bytes[..24];
        let bodylen = u32::from_be_bytes(h[8..12].try_into().unwrap());
        let total = 24 + usize::try_from(bodylen).unwrap();
        if bytes.len() < total {
            break;
        }
        responses.push(Response {
            magic: h[0],
            opcode: h[1],
            keylen: u16::from_be_bytes([h[2], h[3]]),
            extlen: h[4],
            datatype: h[5],
            status: u16::from_be_bytes([h[6], h[7]]),
            bodylen,
            opaque: u32::from_be_bytes(h[12..16].try_into().unwrap()),
            cas: u64::from_be_bytes(h[16..24].try_into().unwrap()),
            body: bytes[24..total].to_vec(),
        });
        bytes = &bytes[total..];
    }
    (responses, bytes.to_vec())
}

fn escape(bytes: &[u8]) -> String {
    if bytes.len() > 64 && bytes.iter().all(|&b| b == bytes[0]) {
        return format!("{:?} x {}", char::from(bytes[0]), bytes.len());
    }
    bytes
        .iter()
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect()
}

/// Renders a reply readably, CAS values mapped to their order of first
/// appearance in this server's session, STAT values hidden.
fn render(bytes: &[u8], cas_order: &mut HashMap<u64, usize>) -> String {
    let (responses, trailing) = parse(bytes);
    let mut text = String::new();
    for r in responses {
        let cas = if r.cas == 0 {
            "0".to_string()
        } else {
            let next = cas_order.len() + 1;
            format!("#{}", cas_order.entry(r.cas).or_insert(next))
        };
        let ext = usize::from(r.extlen).min(r.body.len());
        let key_end = (ext + usize::from(r.keylen)).min(r.body.len());
        let (extras, key, value) = (&r.body[..ext], &r.body[ext..key_end], &r.body[key_end..]);
        let (value, bodylen) = if (r.opcode == STAT && r.keylen > 0) || r.opcode == VERSION {
            ("<value>".to_string(), "<n>".to_string())
        } else {
            (escape(value), r.bodylen.to_string())
        };
        writeln!(
            text,
            "  magic={:#04x} op={:#04x} status={:#06x} keylen={} extlen={} datatype={} bodylen={} opaque={:#x} cas={} extras=[{}] key=\"{}\" value=\"{}\"",
            r.magic,
            r.opcode,
            r.status,
            r.keylen,
            r.extlen,
            r.datatype,
            bodylen,
            r.opaque,
            cas,
            escape(extras),
            escape(key),
            value
        )
        .unwrap();
    }
    if !trailing.is_empty() {
        writeln!(text, "  trailing bytes: \"{}\"", escape(&trailing)).unwrap();
    }
    text
}

struct Side {
    server: Server,
    client: Client,
    cas_order: HashMap<u64, usize>,
}

impl Side {
    fn new(server: Server) -> Side {
        let client = Client::connect(&server);
        Side {
            server,
            client,
            cas_order: HashMap::new(),
        }
    }

    fn run(&mut self, step: &Step) -> String {
        match step {
            Request(_, bytes) => {
                let reply = self.client.binary(bytes);
                render(&reply, &mut self.cas_order)
            }
            Closes(_, bytes) => {
                let mut client = Client::connect(&self.server);
                client.send_raw(bytes);
                let (reply, closed) = client.read_to_close(Duration::from_secs(3));
                let mut text = render(&reply, &mut self.cas_order);
                text.push_str(if closed {
                    "  (closed)\n"
                } else {
                    "  (still open after 3 s)\n"
                });
                text
            }
            Sleep(_) => String::new(),
        }
    }
}

#[test]
fn binary_sessions_match_memcached_byte_for_byte() {
    let mut stock = Side::new(start_stock(&["-u", "root"]));
    let mut ours = Side::new(start_ours(&[]));
    let steps = script();
    let requests = steps.iter().filter(|s| !matches!(s, Sleep(_))).count();
    assert!(requests >= 60, "the script has {requests} steps");
    let mut mismatches = String::new();
    let mut count = 0;
    for step in &steps {
        if let Sleep(duration) = step {
            thread::sleep(*duration);
            continue;
        }
        let name = match step {
            Request(name, _) | Closes(name, _) => *name,
            Sleep(_) => unreachable!(),
        };
        let want = stock.run(step);
        let got = ours.run(step);
        count += 1;
        if want != got {
            writeln!(
                mismatches,
                "step {count} \"{name}\":\n memcached:\n{want} ours:\n{got}"
            )
            .unwrap();
        }
    }
    assert!(
        mismatches.is_empty(),
        "replies differ from memcached 1.6.18:\n{mismatches}"
    );
}
