//! Client-side key placement as libmemcached does it with
//! `MEMCACHED_BEHAVIOR_KETAMA` (what users of several stock memcached
//! servers run today): a consistent-hashing continuum of 100 points per
//! server, each point the 32-bit hash of `HOST-I` (`HOST:PORT-I` when the
//! port is not 11211), I = 0..100; a key goes to the server of the first
//! point at or after the key's hash, wrapping around. The hash is
//! libmemcached's default, Bob Jenkins' one-at-a-time hash: with this
//! behaviour alone, libmemcached 1.1 leaves `MEMCACHED_BEHAVIOR_HASH` at
//! `MEMCACHED_HASH_DEFAULT` (read back by `tools/ketama_reference.py`).
//! See libmemcached's documentation of `memcached_behavior_set` and
//! `memcached_generate_hash`. Written from that description and checked in
//! the tests below against 2,000 placements per server list that the real
//! library (`libmemcached.so.11`, Debian's libmemcached11 1.1.4) computed,
//! driven by `tools/ketama_reference.py`; no libmemcached code is used.
//!
//! The load generator uses it to send each key to the server a libmemcached
//! client would pick, so that the Linux cluster baseline of
//! `./ebb bench cluster-memcached` is measured by the same timing code as
//! Ebbflow's side.

use std::net::SocketAddr;

/// memcached's default port, left out of a server's continuum label.
const DEFAULT_PORT: u16 = 11211;
/// Points per (unweighted) server on the continuum.
const POINTS_PER_SERVER: u32 = 100;

/// Bob Jenkins' one-at-a-time hash ("A Hash Function for Hash Table
/// Lookup", Dr. Dobb's Journal, 1997), libmemcached's `MEMCACHED_HASH_DEFAULT`.
fn one_at_a_time(bytes: &[u8]) -> u32 {
    let mut hash: u32 = 0;
    for &byte in bytes {
        hash = hash.wrapping_add(u32::from(byte));
        hash = hash.wrapping_add(hash << 10);
        hash ^= hash >> 6;
    }
    hash = hash.wrapping_add(hash << 3);
    hash ^= hash >> 11;
    hash.wrapping_add(hash << 15)
}

/// A ketama continuum over a list of servers, in the order a client adds
/// them (the server index a key maps to is its place in that list).
#[derive(Clone, Debug)]
pub struct Ketama {
    /// `(point, server index)`, sorted by point.
    points: Vec<(u32, usize)>,
    servers: usize,
}

impl Ketama {
    /// The continuum of `servers`; `None` when the list is empty.
    pub fn new(servers: &[SocketAddr]) -> Option<Ketama> {
        if servers.is_empty() {
            return None;
        }
        let mut points = Vec::with_capacity(servers.len() * POINTS_PER_SERVER as usize);
        for (index, server) in servers.iter().enumerate() {
            let host = server.ip();
            for i in 0..POINTS_PER_SERVER {
                let label = if server.port() == DEFAULT_PORT {
                    format!("{host}-{i}")
                } else {
                    format!("{host}:{}-{i}", server.port())
                };
                points.push((one_at_a_time(label.as_bytes()), index));
            }
        }
        points.sort_unstable();
        Some(Ketama {
            points,
            servers: servers.len(),
        })
    }

    /// How many servers the continuum spans.
    pub fn servers(&self) -> usize {
        self.servers
    }

    /// The index (into the list given to [`Ketama::new`]) of the server
    /// that holds `key`.
    pub fn server_of(&self, key: &[u8]) -> usize {
        let hash = one_at_a_time(key);
        let at = self.points.partition_point(|&(point, _)| point < hash);
        self.points.get(at).unwrap_or(&self.points[0]).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|s| s.parse().expect("address")).collect()
    }

    fn placements(ketama: &Ketama, count: usize) -> Vec<usize> {
        (0..count)
            .map(|i| ketama.server_of(format!("key:{i}").as_bytes()))
            .collect()
    }

    /// Every list in `libmemcached_placements.txt` (what libmemcached
    /// 1.1.4 itself computed: `memcached_generate_hash` after
    /// `MEMCACHED_BEHAVIOR_KETAMA` and `memcached_server_add` of each server
    /// in order): the three addresses of a 3-node cluster network on the
    /// default port, and two servers on one host told apart by port.
    #[test]
    fn places_keys_as_libmemcached_does() {
        let reference = include_str!("libmemcached_placements.txt");
        let mut lists = 0;
        for line in reference.lines().filter(|l| !l.starts_with('#')) {
            let (list, expected) = line.split_once(' ').expect("servers, then placements");
            let list: Vec<&str> = list.split(',').collect();
            let ketama = Ketama::new(&servers(&list)).expect("servers");
            let expected: Vec<usize> = expected.bytes().map(|b| usize::from(b - b'0')).collect();
            assert_eq!(expected.len(), 2000);
            let got = placements(&ketama, expected.len());
            let differ = got.iter().zip(&expected).filter(|(g, e)| g != e).count();
            assert_eq!(
                differ, 0,
                "{list:?}: {differ} of 2000 keys placed differently"
            );
            lists += 1;
        }
        assert_eq!(lists, 2);
    }

    #[test]
    fn one_server_takes_every_key_and_none_is_refused() {
        let ketama = Ketama::new(&servers(&["10.0.0.1:11211"])).expect("server");
        assert!(placements(&ketama, 100).iter().all(|&s| s == 0));
        assert!(Ketama::new(&[]).is_none());
    }

    /// Consistency: adding a server moves keys only to the new server.
    #[test]
    fn adding_a_server_moves_keys_only_to_it() {
        let three = servers(&["10.96.0.2:11211", "10.96.0.3:11211", "10.96.0.4:11211"]);
        let mut four = three.clone();
        four.push("10.96.0.5:11211".parse().expect("address"));
        let before = placements(&Ketama::new(&three).expect("servers"), 2000);
        let after = placements(&Ketama::new(&four).expect("servers"), 2000);
        let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
        assert!(before.iter().zip(&after).all(|(b, a)| b == a || *a == 3));
        assert!((200..=900).contains(&moved), "moved {moved} of 2000");
    }
}
