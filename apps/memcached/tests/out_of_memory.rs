//! An allocation that fails on the request path is answered, not fatal
//! (issue 15, defect 1): a store whose value cannot be allocated gets
//! memcached's out-of-memory reply (text and meta: `SERVER_ERROR out of
//! memory storing object`; binary: status 0x82 `Out of memory allocating
//! item`, as `item_alloc` failing in 1.6.18's proto_text.c and
//! proto_bin.c), is counted as `outofmemory`, its data is swallowed, and
//! the same connection keeps being served. An append whose joined value
//! cannot be allocated is NOT_STORED, and a multiget whose reply cannot
//! grow is `SERVER_ERROR out of memory writing get response`, as in
//! memcached.
//!
//! The failure is real: the hosted server runs with `EBB_MEM_REGION_LIMIT`
//! set (see `ebb_mem::hosted::REGION_LIMIT_VAR`), so its global allocator
//! (ebb-mem, the one it always uses) returns null for any allocation above
//! the limit, as it would when the machine is out of memory. Every path
//! that copies a value larger than the limit (gathering the request,
//! copying the value out, joining an append) meets the failure where it
//! really allocates.

mod common;

use common::binary::{self, req};
use common::{start_ours_with_env, Client};

/// Allocations above this many bytes fail in the server under test: just
/// above the largest one the server makes while starting (8 MiB, its
/// receive buffers), so that it starts and then meets the failure only on
/// the request path.
const REGION_LIMIT: usize = 9 << 20;

/// A value larger than the limit, within `-I`.
const BIG: usize = 12 << 20;

/// The binary protocol's out-of-memory status (protocol_binary.h).
const STATUS_ENOMEM: u16 = 0x82;

fn server() -> common::Server {
    let limit = format!("EBB_MEM_REGION_LIMIT={REGION_LIMIT}");
    start_ours_with_env(&[&limit], &["-m", "256", "-I", "32m"])
}

fn text_set(command: &str, key: &str, len: usize) -> Vec<u8> {
    let mut request = format!("{command} {key} 0 0 {len}\r\n").into_bytes();
    request.resize(request.len() + len, b'v');
    request.extend_from_slice(b"\r\n");
    request
}

/// The value of `name` in a `stats` or `stats items` reply.
fn stat(client: &mut Client, command: &[u8], name: &str) -> Option<u64> {
    let reply = client.text(command);
    let text = String::from_utf8_lossy(&reply).into_owned();
    let prefix = format!("STAT {name} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(|value| value.trim().parse().unwrap())
}

#[test]
fn a_text_set_that_cannot_be_allocated_is_refused_and_the_connection_goes_on() {
    let server = server();
    let mut client = Client::connect(&server);
    assert_eq!(client.text(b"set small 0 0 5\r\nhello\r\n"), b"STORED\r\n");
    assert_eq!(
        client.text(&text_set("set", "big", BIG)),
        b"SERVER_ERROR out of memory storing object\r\n"
    );
    // A failed set drops the key's old value (memcached does the same).
    assert_eq!(client.text(b"get big\r\n"), b"END\r\n");
    assert_eq!(client.text(b"set after 0 0 2\r\nok\r\n"), b"STORED\r\n");
    assert_eq!(
        client.text(b"get after\r\n"),
        b"VALUE after 0 2\r\nok\r\nEND\r\n"
    );
    // Once for the set; the retry after evicting is the same store.
    assert_eq!(
        stat(&mut client, b"stats items\r\n", "items:1:outofmemory"),
        Some(1)
    );
}

#[test]
fn a_meta_set_that_cannot_be_allocated_is_refused_and_the_connection_goes_on() {
    let server = server();
    let mut client = Client::connect(&server);
    let mut request = format!("ms big {BIG} T0\r\n").into_bytes();
    request.resize(request.len() + BIG, b'm');
    request.extend_from_slice(b"\r\n");
    assert_eq!(
        client.text(&request),
        b"SERVER_ERROR out of memory storing object\r\n"
    );
    assert_eq!(client.text(b"ms after 2 T0\r\nok\r\n"), b"HD\r\n");
    assert_eq!(client.text(b"mg after v\r\n"), b"VA 2\r\nok\r\n");
}

/// memcached's `do_store_item` answers NOT_STORED when the joined item
/// of an append cannot be allocated (`failed_alloc`).
#[test]
fn an_append_whose_joined_value_cannot_be_allocated_is_not_stored() {
    let server = server();
    let mut client = Client::connect(&server);
    // Both halves fit under the limit, the joined value does not.
    let half = REGION_LIMIT * 3 / 4;
    assert_eq!(client.text(&text_set("set", "joined", half)), b"STORED\r\n");
    assert_eq!(
        client.text(&text_set("append", "joined", half)),
        b"NOT_STORED\r\n"
    );
    assert_eq!(client.text(b"set after 0 0 2\r\nok\r\n"), b"STORED\r\n");
}

#[test]
fn a_binary_set_that_cannot_be_allocated_gets_enomem_and_the_connection_goes_on() {
    let server = server();
    let mut client = Client::connect(&server);
    let value = vec![b'b'; BIG];
    let reply = client.binary(&binary::set(b"big", &value, 0, 0).bytes());
    assert!(reply.len() >= 24, "short reply {reply:?}");
    let status = u16::from_be_bytes([reply[6], reply[7]]);
    assert_eq!(status, STATUS_ENOMEM);
    assert_eq!(&reply[24..], b"Out of memory allocating item");
    let reply = client.binary(&binary::set(b"after", b"ok", 0, 0).bytes());
    assert_eq!(u16::from_be_bytes([reply[6], reply[7]]), 0);
    let reply = client.binary(&req(0x00, b"after").bytes());
    assert!(reply.ends_with(b"ok"), "get after: {reply:?}");
}

/// A multiget whose reply needs a segment list larger than the limit
/// (200,000 hits of a 2,000-byte value, each chained as three segments)
/// gets memcached's `SERVER_ERROR out of memory writing get response`
/// instead of its values.
#[test]
fn a_multiget_whose_reply_cannot_grow_is_refused_and_the_connection_goes_on() {
    multiget_beyond_the_limit(2_000, 200_000);
}

/// The same where the values are small enough to be copied into the
/// reply's own buffer (10,000 hits of 1,000 bytes: 10 MB, above the
/// limit).
#[test]
fn a_multiget_of_copied_values_beyond_the_limit_is_refused_too() {
    multiget_beyond_the_limit(1_000, 10_000);
}

fn multiget_beyond_the_limit(value_len: usize, hits: usize) {
    let server = server();
    let mut client = Client::connect(&server);
    assert_eq!(client.text(&text_set("set", "k", value_len)), b"STORED\r\n");
    let mut request = b"get".to_vec();
    for _ in 0..hits {
        request.extend_from_slice(b" k");
    }
    request.extend_from_slice(b"\r\n");
    assert_eq!(
        client.text(&request),
        b"SERVER_ERROR out of memory writing get response\r\n"
    );
    let mut one = format!("VALUE k 0 {value_len}\r\n").into_bytes();
    one.resize(one.len() + value_len, b'v');
    one.extend_from_slice(b"\r\nEND\r\n");
    assert_eq!(client.text(b"get k\r\n"), one);
}
