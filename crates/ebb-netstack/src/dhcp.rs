//! A DHCP client (RFC 2131), parsing and emitting through smoltcp's
//! `DhcpPacket`/`DhcpRepr`. States and timers are named as in RFC 2131
//! §4.4: INIT → SELECTING (DHCPDISCOVER) → REQUESTING (DHCPREQUEST) → BOUND;
//! at T1 RENEWING (DHCPREQUEST unicast to the server), at T2 REBINDING
//! (broadcast), at the lease's end back to INIT without an address.
//!
//! Simplifications: no initial random wait of 1–10 s, no randomisation of
//! the retransmission times (they double from 4 s up to 64 s, §4.1), no
//! DHCPDECLINE after an ARP probe of the offered address, no DHCPRELEASE,
//! no INIT-REBOOT. A prefix length is taken from the subnet mask option
//! (/24 if the server sends none).

use alloc::vec;
use alloc::vec::Vec;
use core::net::Ipv4Addr;
use core::time::Duration;

use ebb_event::Instant;
use smoltcp::wire::{DhcpMessageType, DhcpPacket, DhcpRepr, EthernetAddress};

use crate::rng::Rng;

/// The client's UDP port (RFC 2131 §4.1).
pub const CLIENT_PORT: u16 = 68;
/// The server's UDP port.
pub const SERVER_PORT: u16 = 67;

/// Options the client asks for: subnet mask, router, domain name server.
const PARAMETER_REQUEST_LIST: &[u8] = &[1, 3, 6];

/// The client's state (RFC 2131 §4.4, figure 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DhcpState {
    /// No address; about to send DHCPDISCOVER.
    Init,
    /// DHCPDISCOVER sent, waiting for a DHCPOFFER.
    Selecting,
    /// DHCPREQUEST sent for an offer, waiting for DHCPACK.
    Requesting,
    /// Holding a lease.
    Bound,
    /// Past T1: renewing with the server that granted the lease.
    Renewing,
    /// Past T2: asking any server to extend the lease.
    Rebinding,
}

/// A granted lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Our address (`yiaddr`).
    pub addr: Ipv4Addr,
    /// The subnet's prefix length.
    pub prefix_len: u8,
    /// The router option, if any.
    pub router: Option<Ipv4Addr>,
    /// The server identifier.
    pub server: Ipv4Addr,
    /// When the lease was granted (the DHCPACK arrived).
    pub acquired_at: Instant,
    /// T1: time to renew.
    pub t1: Instant,
    /// T2: time to rebind.
    pub t2: Instant,
    /// The lease's end.
    pub expires_at: Instant,
}

/// A DHCP message to send over UDP from port 68 to port 67.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DhcpSend {
    /// IP source: 0.0.0.0 until we hold an address, then our address.
    pub src: Ipv4Addr,
    /// IP destination: the limited broadcast, or the server when renewing.
    pub dst: Ipv4Addr,
    /// The DHCP message.
    pub payload: Vec<u8>,
}

/// A change of address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DhcpEvent {
    /// A lease was granted or extended: configure its address.
    Configured(Lease),
    /// The lease ended or was refused: drop the address.
    Deconfigured,
}

/// What the client wants done.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DhcpOutput {
    /// A message to send.
    pub send: Option<DhcpSend>,
    /// A change of address.
    pub event: Option<DhcpEvent>,
}

/// Messages sent and received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DhcpStats {
    /// DHCPDISCOVERs sent.
    pub discovers: u64,
    /// DHCPREQUESTs sent in REQUESTING.
    pub requests: u64,
    /// DHCPREQUESTs sent in RENEWING.
    pub renews: u64,
    /// DHCPREQUESTs sent in REBINDING.
    pub rebinds: u64,
    /// DHCPOFFERs taken.
    pub offers: u64,
    /// DHCPACKs taken.
    pub acks: u64,
    /// DHCPNAKs taken.
    pub naks: u64,
}

/// The DHCP client of one interface.
pub struct DhcpClient {
    hardware_addr: EthernetAddress,
    rng: Rng,
    state: DhcpState,
    transaction_id: u32,
    deadline: Instant,
    retries: u32,
    /// The server and address of the offer being requested.
    offer: Option<(Ipv4Addr, Ipv4Addr)>,
    lease: Option<Lease>,
    stats: DhcpStats,
}

/// RFC 2131 §4.1: retransmit after 4 s, doubling up to 64 s.
fn backoff(retries: u32) -> Duration {
    Duration::from_secs(4u64 << retries.min(4))
}

/// RFC 2131 §4.4.5: in RENEWING and REBINDING, wait half the time left
/// until `until`, at least 60 s, but not past `until`.
fn half_way(now: Instant, until: Instant) -> Instant {
    let half = until.saturating_since(now) / 2;
    core::cmp::min(now + half.max(Duration::from_secs(60)), until)
}

impl DhcpClient {
    /// A client in INIT that sends its first DHCPDISCOVER on the first poll.
    #[must_use]
    pub fn new(hardware_addr: EthernetAddress, seed: u64, now: Instant) -> Self {
        DhcpClient {
            hardware_addr,
            rng: Rng::new(seed),
            state: DhcpState::Init,
            transaction_id: 0,
            deadline: now,
            retries: 0,
            offer: None,
            lease: None,
            stats: DhcpStats::default(),
        }
    }

    /// The current state.
    #[must_use]
    pub fn state(&self) -> DhcpState {
        self.state
    }

    /// The current lease.
    #[must_use]
    pub fn lease(&self) -> Option<Lease> {
        self.lease
    }

    /// Messages so far.
    #[must_use]
    pub fn stats(&self) -> DhcpStats {
        self.stats
    }

    /// When [`poll`](Self::poll) next has something to do.
    #[must_use]
    pub fn poll_at(&self) -> Instant {
        self.deadline
    }

    fn message(
        &self,
        message_type: DhcpMessageType,
        client_ip: Ipv4Addr,
        requested_ip: Option<Ipv4Addr>,
        server_identifier: Option<Ipv4Addr>,
    ) -> Vec<u8> {
        let repr = DhcpRepr {
            message_type,
            transaction_id: self.transaction_id,
            secs: 0,
            client_hardware_address: self.hardware_addr,
            client_ip,
            your_ip: Ipv4Addr::UNSPECIFIED,
            server_ip: Ipv4Addr::UNSPECIFIED,
            router: None,
            subnet_mask: None,
            relay_agent_ip: Ipv4Addr::UNSPECIFIED,
            // Until we hold an address we cannot receive unicast (§4.1).
            broadcast: client_ip.is_unspecified(),
            requested_ip,
            client_identifier: Some(self.hardware_addr),
            server_identifier,
            parameter_request_list: Some(PARAMETER_REQUEST_LIST),
            dns_servers: None,
            max_size: None,
            lease_duration: None,
            renew_duration: None,
            rebind_duration: None,
            additional_options: &[],
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        // The buffer is exactly as long as the representation needs.
        let _ = repr.emit(&mut DhcpPacket::new_unchecked(&mut buf));
        buf
    }

    fn broadcast(payload: Vec<u8>) -> Option<DhcpSend> {
        Some(DhcpSend {
            src: Ipv4Addr::UNSPECIFIED,
            dst: Ipv4Addr::BROADCAST,
            payload,
        })
    }

    fn discover(&mut self, now: Instant) -> DhcpOutput {
        self.stats.discovers += 1;
        self.deadline = now + backoff(self.retries);
        let payload = self.message(DhcpMessageType::Discover, Ipv4Addr::UNSPECIFIED, None, None);
        DhcpOutput {
            send: Self::broadcast(payload),
            event: None,
        }
    }

    fn request(&mut self, now: Instant) -> DhcpOutput {
        let Some((server, addr)) = self.offer else {
            return self.restart(now);
        };
        self.stats.requests += 1;
        self.deadline = now + backoff(self.retries);
        let payload = self.message(
            DhcpMessageType::Request,
            Ipv4Addr::UNSPECIFIED,
            Some(addr),
            Some(server),
        );
        DhcpOutput {
            send: Self::broadcast(payload),
            event: None,
        }
    }

    /// Back to INIT (dropping any lease) and on to SELECTING.
    fn restart(&mut self, now: Instant) -> DhcpOutput {
        let had_lease = self.lease.take().is_some();
        self.offer = None;
        self.state = DhcpState::Selecting;
        self.retries = 0;
        self.transaction_id = self.rng.next_u32();
        let mut out = self.discover(now);
        if had_lease {
            out.event = Some(DhcpEvent::Deconfigured);
        }
        out
    }

    /// Runs the timers at `now`.
    pub fn poll(&mut self, now: Instant) -> DhcpOutput {
        if now < self.deadline {
            return DhcpOutput::default();
        }
        match self.state {
            DhcpState::Init => self.restart(now),
            DhcpState::Selecting => {
                self.retries += 1;
                self.discover(now)
            }
            DhcpState::Requesting => {
                self.retries += 1;
                if self.retries > 4 {
                    self.restart(now)
                } else {
                    self.request(now)
                }
            }
            DhcpState::Bound | DhcpState::Renewing | DhcpState::Rebinding => {
                let Some(lease) = self.lease else {
                    return self.restart(now);
                };
                if now >= lease.expires_at {
                    return self.restart(now);
                }
                let payload = self.message(DhcpMessageType::Request, lease.addr, None, None);
                if now >= lease.t2 {
                    self.state = DhcpState::Rebinding;
                    self.stats.rebinds += 1;
                    self.deadline = half_way(now, lease.expires_at);
                    DhcpOutput {
                        send: Some(DhcpSend {
                            src: lease.addr,
                            dst: Ipv4Addr::BROADCAST,
                            payload,
                        }),
                        event: None,
                    }
                } else {
                    self.state = DhcpState::Renewing;
                    self.stats.renews += 1;
                    self.deadline = half_way(now, lease.t2);
                    DhcpOutput {
                        send: Some(DhcpSend {
                            src: lease.addr,
                            dst: lease.server,
                            payload,
                        }),
                        event: None,
                    }
                }
            }
        }
    }

    /// Takes a DHCP message received on port 68.
    pub fn process(&mut self, now: Instant, payload: &[u8]) -> DhcpOutput {
        let Ok(packet) = DhcpPacket::new_checked(payload) else {
            return DhcpOutput::default();
        };
        let Ok(repr) = DhcpRepr::parse(&packet) else {
            return DhcpOutput::default();
        };
        if repr.transaction_id != self.transaction_id
            || repr.client_hardware_address != self.hardware_addr
        {
            return DhcpOutput::default();
        }
        match (self.state, repr.message_type) {
            (DhcpState::Selecting, DhcpMessageType::Offer) => {
                let Some(server) = repr.server_identifier else {
                    return DhcpOutput::default();
                };
                if repr.your_ip.is_unspecified() || repr.your_ip.is_broadcast() {
                    return DhcpOutput::default();
                }
                self.stats.offers += 1;
                self.offer = Some((server, repr.your_ip));
                self.state = DhcpState::Requesting;
                self.retries = 0;
                self.request(now)
            }
            (
                DhcpState::Requesting | DhcpState::Renewing | DhcpState::Rebinding,
                DhcpMessageType::Ack,
            ) => self.ack(now, &repr),
            (
                DhcpState::Requesting | DhcpState::Renewing | DhcpState::Rebinding,
                DhcpMessageType::Nak,
            ) => {
                self.stats.naks += 1;
                self.restart(now)
            }
            _ => DhcpOutput::default(),
        }
    }

    fn ack(&mut self, now: Instant, repr: &DhcpRepr<'_>) -> DhcpOutput {
        let Some(seconds) = repr.lease_duration else {
            return DhcpOutput::default();
        };
        let server = repr
            .server_identifier
            .or(self.offer.map(|(s, _)| s))
            .or(self.lease.map(|l| l.server));
        let Some(server) = server else {
            return DhcpOutput::default();
        };
        let duration = Duration::from_secs(u64::from(seconds));
        // RFC 2131 §4.4.5: T1 defaults to half the lease, T2 to 7/8 of it.
        let t1 = repr
            .renew_duration
            .map_or(duration / 2, |s| Duration::from_secs(u64::from(s)));
        let t2 = repr
            .rebind_duration
            .map_or(duration * 7 / 8, |s| Duration::from_secs(u64::from(s)));
        let prefix_len = repr.subnet_mask.map_or(24, |mask| {
            u8::try_from(u32::from(mask).leading_ones()).unwrap_or(32)
        });
        let lease = Lease {
            addr: repr.your_ip,
            prefix_len,
            router: repr.router,
            server,
            acquired_at: now,
            t1: now + t1,
            t2: now + t2,
            expires_at: now + duration,
        };
        self.stats.acks += 1;
        self.lease = Some(lease);
        self.offer = None;
        self.state = DhcpState::Bound;
        self.retries = 0;
        self.deadline = lease.t1;
        DhcpOutput {
            send: None,
            event: Some(DhcpEvent::Configured(lease)),
        }
    }
}
