//! ARP (RFC 826) for IPv4 over Ethernet: a bounded cache with expiry, and a
//! bounded queue of packets waiting for resolution, released in order.
//!
//! The cache follows RFC 826's "Packet Reception" algorithm: a packet
//! whose sender is already cached refreshes the entry (the *merge flag*);
//! a new sender is added only if the packet's target is us, so a flood of
//! ARP traffic between other hosts never grows the cache. The cache holds
//! at most [`ArpConfig::capacity`] entries (the one expiring first makes
//! room), and the queue at most [`ArpConfig::max_pending`] packets, so an
//! ARP flood or a burst of sends to dead addresses keeps memory bounded.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::net::Ipv4Addr;
use core::time::Duration;

use ebb_event::Instant;
use ebb_iobuf::IoBuf;
use smoltcp::wire::{ArpOperation, ArpPacket, ArpRepr, EthernetAddress};

use crate::RxError;

/// Length of an ARP packet for IPv4 over Ethernet.
pub const PACKET_LEN: usize = 28;

/// Limits and times of the ARP cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpConfig {
    /// Most entries kept.
    pub capacity: usize,
    /// How long an entry is trusted after it was last confirmed.
    pub entry_lifetime: Duration,
    /// Most packets waiting for resolution, over all destinations.
    pub max_pending: usize,
    /// How long a packet may wait before it is dropped.
    pub pending_timeout: Duration,
    /// How often a request is repeated while packets wait.
    pub request_interval: Duration,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            capacity: 64,
            entry_lifetime: Duration::from_secs(60),
            max_pending: 32,
            pending_timeout: Duration::from_secs(3),
            request_interval: Duration::from_secs(1),
        }
    }
}

/// What the cache did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArpStats {
    /// Entries dropped to make room for new ones.
    pub evicted: u64,
    /// Entries that expired.
    pub expired: u64,
    /// Packets dropped because the queue was full.
    pub queue_dropped: u64,
    /// Packets dropped because resolution took too long.
    pub queue_timed_out: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    hardware_addr: EthernetAddress,
    expires_at: Instant,
}

struct Pending<P> {
    next_hop: Ipv4Addr,
    queued_at: Instant,
    packet: P,
}

/// What [`ArpCache::enqueue`] did with a packet.
#[derive(Debug)]
pub enum Enqueued<P> {
    /// Queued; send a request for the next hop now.
    SendRequest,
    /// Queued behind packets for which a request was already sent.
    Queued,
    /// The queue is full: the packet is handed back (and counted dropped).
    Full(P),
}

/// The cache of IPv4-to-Ethernet translations plus the packets (of type
/// `P`) waiting for one.
pub struct ArpCache<P> {
    config: ArpConfig,
    entries: BTreeMap<Ipv4Addr, Entry>,
    pending: VecDeque<Pending<P>>,
    /// When a request was last sent for each address that has packets
    /// waiting (at most `max_pending` addresses).
    requested: BTreeMap<Ipv4Addr, Instant>,
    stats: ArpStats,
}

impl<P> ArpCache<P> {
    /// An empty cache.
    #[must_use]
    pub fn new(config: ArpConfig) -> Self {
        ArpCache {
            config,
            entries: BTreeMap::new(),
            pending: VecDeque::new(),
            requested: BTreeMap::new(),
            stats: ArpStats::default(),
        }
    }

    /// What the cache did so far.
    #[must_use]
    pub fn stats(&self) -> ArpStats {
        self.stats
    }

    /// Number of entries (including expired ones not yet swept).
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache has no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of packets waiting for resolution.
    #[must_use]
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The hardware address of `ip`, if cached and not expired at `now`.
    #[must_use]
    pub fn lookup(&self, ip: Ipv4Addr, now: Instant) -> Option<EthernetAddress> {
        self.entries
            .get(&ip)
            .filter(|e| e.expires_at > now)
            .map(|e| e.hardware_addr)
    }

    /// Adds or refreshes the translation `ip` → `hardware_addr`, making room
    /// if the cache is full.
    pub fn fill(&mut self, ip: Ipv4Addr, hardware_addr: EthernetAddress, now: Instant) {
        let expires_at = now + self.config.entry_lifetime;
        if let Some(entry) = self.entries.get_mut(&ip) {
            *entry = Entry {
                hardware_addr,
                expires_at,
            };
            return;
        }
        if self.entries.len() >= self.config.capacity {
            self.sweep(now);
        }
        if self.entries.len() >= self.config.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.expires_at)
                .map(|(ip, _)| *ip);
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
                self.stats.evicted += 1;
            }
        }
        if self.config.capacity > 0 {
            self.entries.insert(
                ip,
                Entry {
                    hardware_addr,
                    expires_at,
                },
            );
        }
    }

    fn sweep(&mut self, now: Instant) {
        let before = self.entries.len();
        self.entries.retain(|_, e| e.expires_at > now);
        self.stats.expired += u64::try_from(before - self.entries.len()).unwrap_or(0);
    }

    /// Queues `packet` until `next_hop` is resolved.
    pub fn enqueue(&mut self, next_hop: Ipv4Addr, packet: P, now: Instant) -> Enqueued<P> {
        if self.pending.len() >= self.config.max_pending {
            self.stats.queue_dropped += 1;
            return Enqueued::Full(packet);
        }
        self.pending.push_back(Pending {
            next_hop,
            queued_at: now,
            packet,
        });
        match self.requested.entry(next_hop) {
            alloc::collections::btree_map::Entry::Occupied(_) => Enqueued::Queued,
            alloc::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(now);
                Enqueued::SendRequest
            }
        }
    }

    /// Takes the packets waiting for `ip`, in the order they were queued.
    pub fn release(&mut self, ip: Ipv4Addr) -> Vec<P> {
        self.requested.remove(&ip);
        let mut released = Vec::new();
        let mut kept = VecDeque::with_capacity(self.pending.len());
        for p in self.pending.drain(..) {
            if p.next_hop == ip {
                released.push(p.packet);
            } else {
                kept.push_back(p);
            }
        }
        self.pending = kept;
        released
    }

    /// Expires entries and waiting packets at `now`; returns the addresses
    /// whose request should be repeated now.
    pub fn poll(&mut self, now: Instant) -> Vec<Ipv4Addr> {
        self.sweep(now);
        let timeout = self.config.pending_timeout;
        let before = self.pending.len();
        self.pending.retain(|p| p.queued_at + timeout > now);
        self.stats.queue_timed_out += u64::try_from(before - self.pending.len()).unwrap_or(0);
        let pending = &self.pending;
        self.requested
            .retain(|ip, _| pending.iter().any(|p| p.next_hop == *ip));
        let interval = self.config.request_interval;
        let mut again = Vec::new();
        for (ip, last) in &mut self.requested {
            if *last + interval <= now {
                *last = now;
                again.push(*ip);
            }
        }
        again
    }

    /// When [`poll`](Self::poll) next has something to do for waiting
    /// packets (entry expiry needs no timer: lookups check it).
    #[must_use]
    pub fn poll_at(&self) -> Option<Instant> {
        let timeouts = self
            .pending
            .iter()
            .map(|p| p.queued_at + self.config.pending_timeout);
        let requests = self
            .requested
            .values()
            .map(|t| *t + self.config.request_interval);
        timeouts.chain(requests).min()
    }

    /// RFC 826, "Packet Reception": updates the cache from a received
    /// packet and returns the reply to send, if it is a request for us.
    /// `protocol_addr` is our address (`None` while we have none: then we
    /// answer nothing and learn nothing).
    pub fn process(
        &mut self,
        repr: &ArpRepr,
        hardware_addr: EthernetAddress,
        protocol_addr: Option<Ipv4Addr>,
        now: Instant,
    ) -> Option<ArpRepr> {
        let ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_protocol_addr,
            ..
        } = *repr
        else {
            return None;
        };
        if source_hardware_addr.is_multicast() || source_protocol_addr.is_unspecified() {
            return None;
        }
        let merge_flag = self.entries.contains_key(&source_protocol_addr);
        if merge_flag {
            self.fill(source_protocol_addr, source_hardware_addr, now);
        }
        let us = protocol_addr?;
        if target_protocol_addr != us {
            return None;
        }
        if !merge_flag {
            self.fill(source_protocol_addr, source_hardware_addr, now);
        }
        (operation == ArpOperation::Request).then_some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: hardware_addr,
            source_protocol_addr: us,
            target_hardware_addr: source_hardware_addr,
            target_protocol_addr: source_protocol_addr,
        })
    }
}

/// Parses an ARP packet (an Ethernet payload).
///
/// # Errors
///
/// [`RxError::Truncated`] if it is short, [`RxError::Unsupported`] if it is
/// not IPv4 over Ethernet.
pub fn parse(packet: &IoBuf) -> Result<ArpRepr, RxError> {
    let view = ArpPacket::new_checked(packet.as_slice()).map_err(|_| RxError::Truncated)?;
    ArpRepr::parse(&view).map_err(|_| RxError::Unsupported)
}

/// Writes `repr` into `buf` ([`PACKET_LEN`] bytes).
pub fn emit(buf: &mut [u8], repr: &ArpRepr) {
    repr.emit(&mut ArpPacket::new_unchecked(buf));
}

/// A request for `target` from us.
#[must_use]
pub fn request(
    hardware_addr: EthernetAddress,
    protocol_addr: Ipv4Addr,
    target: Ipv4Addr,
) -> ArpRepr {
    ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: hardware_addr,
        source_protocol_addr: protocol_addr,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
    const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const IP_C: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);

    #[test]
    fn request_for_us_is_answered_and_learned() {
        let mut cache = ArpCache::<u32>::new(ArpConfig::default());
        let reply = cache.process(&request(MAC_A, IP_A, IP_B), MAC_B, Some(IP_B), Instant(0));
        assert_eq!(
            reply,
            Some(ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Reply,
                source_hardware_addr: MAC_B,
                source_protocol_addr: IP_B,
                target_hardware_addr: MAC_A,
                target_protocol_addr: IP_A,
            })
        );
        assert_eq!(cache.lookup(IP_A, Instant(1)), Some(MAC_A));
    }

    #[test]
    fn traffic_between_others_is_not_learned() {
        let mut cache = ArpCache::<u32>::new(ArpConfig::default());
        assert!(cache
            .process(&request(MAC_A, IP_A, IP_C), MAC_B, Some(IP_B), Instant(0))
            .is_none());
        assert!(cache.is_empty());
    }

    #[test]
    fn queue_releases_in_order_and_is_bounded() {
        let config = ArpConfig {
            max_pending: 3,
            ..ArpConfig::default()
        };
        let mut cache = ArpCache::new(config);
        assert!(matches!(
            cache.enqueue(IP_A, 1, Instant(0)),
            Enqueued::SendRequest
        ));
        assert!(matches!(
            cache.enqueue(IP_B, 10, Instant(0)),
            Enqueued::SendRequest
        ));
        assert!(matches!(
            cache.enqueue(IP_A, 2, Instant(0)),
            Enqueued::Queued
        ));
        assert!(matches!(
            cache.enqueue(IP_A, 3, Instant(0)),
            Enqueued::Full(3)
        ));
        assert_eq!(cache.release(IP_A), alloc::vec![1, 2]);
        assert_eq!(cache.pending_len(), 1);
        assert_eq!(cache.stats().queue_dropped, 1);
    }

    #[test]
    fn pending_packets_time_out_and_requests_repeat() {
        let mut cache = ArpCache::new(ArpConfig::default());
        cache.enqueue(IP_A, 1, Instant(0));
        assert!(cache.poll(Instant(500_000_000)).is_empty());
        assert_eq!(cache.poll(Instant(1_000_000_000)), alloc::vec![IP_A]);
        assert!(cache.poll(Instant(3_000_000_000)).is_empty());
        assert_eq!(cache.pending_len(), 0);
        assert_eq!(cache.stats().queue_timed_out, 1);
        assert_eq!(cache.poll_at(), None);
    }

    #[test]
    fn full_cache_evicts_the_entry_expiring_first() {
        let config = ArpConfig {
            capacity: 2,
            ..ArpConfig::default()
        };
        let mut cache = ArpCache::<u32>::new(config);
        cache.fill(IP_A, MAC_A, Instant(0));
        cache.fill(IP_B, MAC_B, Instant(1));
        cache.fill(IP_C, MAC_A, Instant(2));
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.lookup(IP_A, Instant(3)), None);
        assert_eq!(cache.stats().evicted, 1);
    }

    #[test]
    fn malformed_packets() {
        let mut buf = alloc::vec![0u8; PACKET_LEN];
        emit(&mut buf, &request(MAC_A, IP_A, IP_B));
        assert!(parse(&IoBuf::from_vec(buf.clone())).is_ok());
        assert_eq!(
            parse(&IoBuf::from_vec(buf[..27].to_vec())).unwrap_err(),
            RxError::Truncated
        );
        buf[5] = 16; // protocol length
        assert_eq!(
            parse(&IoBuf::from_vec(buf)).unwrap_err(),
            RxError::Truncated,
            "16-byte protocol addresses reach past the packet"
        );
    }
}
