//! Memcached as one cache across three nodes, through its clients: three
//! nodes and a frontend in one process (`cluster_support`), each node
//! serving the text protocol on a port of its own. 10,000 keys with
//! checksummed values written through node 1 read back identically
//! through nodes 2 and 3 (multigets whose keys every node owns some of,
//! and single gets); every command a client sends through a node that
//! does not own its key does what it does on the owner, in the text and
//! the binary and the meta protocol (`me`, debug, is refused),
//! and `flush_all` through one node flushes all three; then node 3 is
//! lost (its VM gone, its lease expired): through nodes 1 and 2, its
//! keys are misses, every other key reads back its value, and writes go
//! on. No wrong value is read at any point.

mod cluster_support;

use std::io::Write;
use std::net::TcpStream;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use cluster_support::{
    binary_request, key, read_all, read_binary, start_frontend, start_node, value,
    wait_for_agreement, write_through_first_read_through_others, BinaryReply, Client, JoinedNode,
    REPLY_WITHIN,
};
use ebb_core::{InProcessGlobalIdMap, NodeId};

const NODES: u32 = 3;
const KEYS: u32 = 10_000;

#[test]
fn clients_of_any_node_see_one_cache_and_a_lost_nodes_keys_only_miss() {
    let map = Arc::new(InProcessGlobalIdMap::new());
    let frontend = start_frontend(NODES, Arc::clone(&map));
    let (addr, ranges) = (frontend.addr, frontend.ranges.clone());
    let (joined_tx, joined_rx) = mpsc::channel::<JoinedNode>();
    let mut stops: Vec<_> = (1..=NODES)
        .zip(ranges)
        .map(|(node, ids)| start_node(node, addr, ids, Arc::clone(&map), joined_tx.clone()))
        .collect();
    let mut nodes: Vec<JoinedNode> = (0..NODES)
        .map(|_| {
            joined_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("every node joins")
        })
        .collect();
    nodes.sort_by_key(|n| n.node);
    let all: Vec<&JoinedNode> = nodes.iter().collect();
    let three = wait_for_agreement(&map, &all, 3);
    let mut clients: Vec<Client> = nodes.iter().map(|n| Client::connect(n.clients)).collect();

    // 10,000 keys through node 1, read back through nodes 2 and 3.
    write_through_first_read_through_others(&mut clients, KEYS);
    for i in (0..KEYS).step_by(97) {
        let found = clients[2].get("get", &[key(i)]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1, value(i, 1), "key:{i}");
    }

    // Every command, through a node that does not own its key.
    let owner_of = |key: &[u8]| three.owner(key).unwrap().node.0;
    let (far, far_node) = (0..)
        .map(|i| format!("far:{i}").into_bytes())
        .find_map(|k| (owner_of(&k) != 1).then(|| (k.clone(), owner_of(&k))))
        .unwrap();
    assert_ne!(far_node, 1);
    let c = &mut clients[0];
    assert_eq!(c.store("add", &far, b"10", ""), "STORED\r\n");
    assert_eq!(c.store("add", &far, b"11", ""), "NOT_STORED\r\n");
    assert_eq!(c.store("append", &far, b"0", ""), "STORED\r\n");
    assert_eq!(c.store("prepend", &far, b"1", ""), "STORED\r\n");
    let mut incr = b"incr ".to_vec();
    incr.extend_from_slice(&far);
    incr.extend_from_slice(b" 5\r\n");
    assert_eq!(c.ask(&incr), "1105\r\n");
    let cas = c.get("gets", std::slice::from_ref(&far))[0].2.unwrap();
    assert_eq!(
        c.store("cas", &far, b"x", &format!(" {}", cas + 1)),
        "EXISTS\r\n"
    );
    assert_eq!(
        c.store("cas", &far, b"word", &format!(" {cas}")),
        "STORED\r\n"
    );
    let mut decr = b"decr ".to_vec();
    decr.extend_from_slice(&far);
    decr.extend_from_slice(b" 1\r\n");
    assert_eq!(
        c.ask(&decr),
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    );
    let mut touch = b"touch ".to_vec();
    touch.extend_from_slice(&far);
    touch.extend_from_slice(b" 100\r\n");
    assert_eq!(c.ask(&touch), "TOUCHED\r\n");
    // noreply: no reply; the next line is the get's.
    let mut quiet = b"replace ".to_vec();
    quiet.extend_from_slice(&far);
    quiet.extend_from_slice(b" 7 0 5 noreply\r\nquiet\r\nget ");
    quiet.extend_from_slice(&far);
    quiet.extend_from_slice(b"\r\n");
    assert_eq!(
        c.ask(&quiet),
        String::from("VALUE ") + &String::from_utf8_lossy(&far) + " 7 5\r\n"
    );
    assert_eq!(c.line(), "quiet\r\n");
    assert_eq!(c.line(), "END\r\n");
    let mut delete = b"delete ".to_vec();
    delete.extend_from_slice(&far);
    delete.extend_from_slice(b"\r\n");
    assert_eq!(c.ask(&delete), "DELETED\r\n");
    assert_eq!(c.ask(&delete), "NOT_FOUND\r\n");
    assert!(c.get("get", std::slice::from_ref(&far)).is_empty());

    // Meta commands are run by the owner as sent: every flag as on one
    // node, quiet ones silent; `me` (debug) is refused.
    let far_text = String::from_utf8(far.clone()).unwrap();
    let meta = |command: &str| command.replace("KEY", &far_text).into_bytes();
    assert_eq!(c.ask(&meta("ms KEY 2 F5\r\nhi\r\n")), "HD\r\n");
    // The owner's refusal, its data block swallowed there.
    assert_eq!(
        c.ask(&meta("ms KEY 2 MZ\r\nno\r\n")),
        "CLIENT_ERROR invalid mode for ms M token\r\n"
    );
    assert_eq!(
        c.ask(&meta("mg KEY v f k Oab\r\n")),
        format!("VA 2 f5 k{far_text} Oab\r\n")
    );
    assert_eq!(c.line(), "hi\r\n");
    assert_eq!(c.ask(&meta("md KEY q\r\nmn\r\n")), "MN\r\n");
    assert_eq!(c.ask(&meta("mg KEY v\r\n")), "EN\r\n");
    assert_eq!(c.ask(&meta("ma KEY N0 J10 v\r\n")), "VA 2\r\n");
    assert_eq!(c.line(), "10\r\n");
    assert_eq!(c.ask(&meta("ma KEY v\r\n")), "VA 2\r\n");
    assert_eq!(c.line(), "11\r\n");
    assert_eq!(
        clients[1].ask(&meta("get KEY\r\n")),
        format!("VALUE {far_text} 0 2\r\n")
    );
    assert_eq!(clients[1].line(), "11\r\n");
    assert_eq!(clients[1].line(), "END\r\n");
    let c = &mut clients[0];
    assert_eq!(
        c.ask(&meta("me KEY\r\n")),
        "SERVER_ERROR me is not served by a node of several\r\n"
    );
    assert_eq!(c.ask(&meta("md KEY\r\n")), "HD\r\n");

    // The binary protocol is forwarded: a pipeline of quiet and plain
    // requests for another node's keys is answered in order, quiet
    // successes and quiet misses silent.
    let far_miss = (0..)
        .map(|i| format!("far-miss:{i}").into_bytes())
        .find(|k| owner_of(k) != 1)
        .unwrap();
    let mut binary = TcpStream::connect_timeout(&nodes[0].clients, REPLY_WITHIN).unwrap();
    binary.set_read_timeout(Some(REPLY_WITHIN)).unwrap();
    let mut pipeline = Vec::new();
    let set_extras = [0, 0, 0, 0x11, 0, 0, 0, 0];
    pipeline.extend(binary_request(0x11, 1, 0, &set_extras, &far, b"bin")); // SETQ
    pipeline.extend(binary_request(0x0c, 2, 0, &[], &far, b"")); // GETK
    pipeline.extend(binary_request(0x0d, 3, 0, &[], &far_miss, b"")); // GETKQ
    let mut arith = [0u8; 20];
    arith[7] = 1; // delta 1, initial 0, exptime 0: create a missing item
    pipeline.extend(binary_request(0x05, 4, 0, &arith, &far, b"")); // INCREMENT
    pipeline.extend(binary_request(0x04, 5, 0, &[], &far, b"")); // DELETE
    arith[15] = 42; // initial 42
    pipeline.extend(binary_request(0x05, 6, 0, &arith, &far, b"")); // INCREMENT
    pipeline.extend(binary_request(0x0a, 7, 0, &[], b"", b"")); // NOOP
    binary.write_all(&pipeline).unwrap();
    let replies: Vec<BinaryReply> = (0..5).map(|_| read_binary(&mut binary)).collect();
    let summary: Vec<(u8, u32, u16)> = replies
        .iter()
        .map(|r| (r.opcode, r.opaque, r.status))
        .collect();
    assert_eq!(
        summary,
        [
            (0x0c, 2, 0),
            (0x05, 4, 6),
            (0x04, 5, 0),
            (0x05, 6, 0),
            (0x0a, 7, 0)
        ]
    );
    let getk = &replies[0];
    assert_ne!(getk.cas, 0);
    assert_eq!(getk.body, [&[0, 0, 0, 0x11][..], &far, b"bin"].concat());
    assert_eq!(replies[3].body, 42u64.to_be_bytes());
    assert_ne!(replies[3].cas, 0);

    // Node 3 is lost: its VM is gone and its lease runs out.
    stops.pop().unwrap().send(());
    frontend.lose.send(NodeId(3));
    map.expire(nodes[2].lease).unwrap();
    let two = wait_for_agreement(&map, &all[..2], 2);
    assert_eq!(two.epoch(), three.epoch() + 1);
    let was_3s = |i: u32| three.owner(&key(i)).unwrap().node == NodeId(3);
    for client in &mut clients[..2] {
        let (hits, misses) = read_all(client, KEYS, |i| (!was_3s(i)).then(|| value(i, 1)));
        println!("after node 3's loss: {hits} hits, {misses} misses of {KEYS}");
        assert!(
            misses > KEYS / 5 && hits > KEYS / 3,
            "{hits} hits, {misses} misses"
        );
    }
    // Writes go on, through either survivor, to the new owners.
    for i in 0..KEYS {
        let client = &mut clients[(i % 2) as usize];
        assert_eq!(client.store("set", &key(i), &value(i, 2), ""), "STORED\r\n");
    }
    for client in &mut clients[..2] {
        assert_eq!(read_all(client, KEYS, |i| Some(value(i, 2))), (KEYS, 0));
    }
    // flush_all through one node flushes both: every key misses through
    // either.
    assert_eq!(clients[1].ask(b"flush_all\r\n"), "OK\r\n");
    for client in &mut clients[..2] {
        assert_eq!(read_all(client, KEYS, |_| None), (0, KEYS));
    }
    for stop in stops {
        stop.send(());
    }
    frontend.stop.send(());
}
