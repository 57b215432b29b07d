//! The connections of one stack: demultiplexing by 4-tuple, listeners,
//! RST for segments that belong nowhere (RFC 9293 §3.10.7.1), timers,
//! and the queue of events for the applications' handlers.
//!
//! The table lives on the stack's core and is only touched there: each
//! core runs its own stack (one virtio-net queue pair per core, the device
//! steering a flow to the queue it was sent from), so lookups take no
//! lock and share no cache lines. Connections and 4-tuples are in hash
//! tables (`flow_hash`); timers are found through `deadlines`, so neither
//! a segment nor a timer tick costs time in proportion to the number of
//! connections.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use hashbrown::HashMap;

use ebb_core::CoreId;
use ebb_event::Instant;
use ebb_iobuf::IoChain;
use ebb_net::{AcceptFn, NetError, SendError, TcpHandler};

use super::conn::{ConnEvent, ConnInfo, Ctx, Endpoints, State, Tcb};
use super::deadlines::Deadlines;
use super::flow_hash::FlowHash;
use super::listener::Listener;
use super::segment::{Flags, OutSegment, Segment};
use super::seq::Seq;
use super::trace::{Trace, TraceEvent};
use super::TcpConfig;
use crate::rng::Rng;
use crate::steering::{Claim, FlowKey, Steering};
use crate::udp::EPHEMERAL_FIRST;

/// What the TCP layer counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Segments that reached the TCP layer (after checksum).
    pub segments_in: u64,
    /// Segments handed down to IP.
    pub segments_out: u64,
    /// RSTs sent for segments that belong to no connection.
    pub resets_sent: u64,
    /// SYNs dropped because the listener's backlog was full.
    pub syn_backlog_full: u64,
    /// SYNs dropped because the table was full.
    pub table_full: u64,
    /// Connections established from listeners.
    pub accepted: u64,
    /// Connections established by `connect`.
    pub connected: u64,
    /// Segments handed to the core that owns their connection (see
    /// [`crate::steering`]).
    pub forwarded: u64,
}

/// (local address, local port, remote address, remote port).
type Tuple = (Ipv4Addr, u16, Ipv4Addr, u16);

struct Entry {
    tcb: Tcb,
    /// The listener's port, for a passive connection.
    listener: Option<u16>,
    /// The application's handler was released (TIME-WAIT: both sides
    /// closed, nothing more to tell it).
    released: bool,
}

/// Something to tell an application, in order.
pub(crate) enum Event {
    Connected(u64),
    Accepted {
        id: u64,
        accept: AcceptFn,
    },
    Data(u64, IoChain),
    SendCredit(u64),
    PeerClosed(u64),
    Aborted(u64, NetError),
    /// The connection is gone: drop its handler.
    Release(u64),
}

/// The application's side of a connection.
pub(crate) struct App {
    pub(crate) local: SocketAddr,
    pub(crate) remote: SocketAddr,
    /// `None` before accept and while the handler runs.
    pub(crate) handler: Option<Box<dyn TcpHandler>>,
}

/// One stack's TCP.
pub struct TcpLayer {
    config: TcpConfig,
    mtu: usize,
    conns: HashMap<u64, Entry, FlowHash>,
    tuples: HashMap<Tuple, u64, FlowHash>,
    /// When each connection's next timer is due.
    deadlines: Deadlines,
    /// Scratch for [`TcpLayer::poll`]'s due connections.
    due: Vec<u64>,
    /// Scratch for the events of one connection's step in `ctx_run`
    /// (most segments carry data, so a fresh vector would cost an
    /// allocation per segment).
    conn_events: Vec<ConnEvent>,
    listeners: BTreeMap<u16, Listener>,
    pub(crate) apps: HashMap<u64, App, FlowHash>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) out: Vec<OutSegment>,
    /// Events are being handed out (the delivery loop is not reentrant).
    pub(crate) draining: bool,
    next_id: u64,
    next_ephemeral: u16,
    secret: u64,
    trace: Trace,
    stats: TcpStats,
    /// Set when other cores' stacks share the interface.
    steering: Option<Rc<dyn Steering>>,
}

/// The next ephemeral port from `next` on that is `free`, round-robin over
/// the IANA dynamic range.
fn next_free_port(next: &mut u16, mut free: impl FnMut(u16) -> bool) -> Option<u16> {
    let span = u32::from(u16::MAX - EPHEMERAL_FIRST) + 1;
    for _ in 0..span {
        let port = (*next).max(EPHEMERAL_FIRST);
        *next = if port == u16::MAX {
            EPHEMERAL_FIRST
        } else {
            port + 1
        };
        if free(port) {
            return Some(port);
        }
    }
    None
}

fn first_ephemeral(core: CoreId) -> u16 {
    let span = usize::from(u16::MAX - EPHEMERAL_FIRST) + 1;
    let offset = core.0.wrapping_mul(4093) % span;
    EPHEMERAL_FIRST + u16::try_from(offset).unwrap_or(0)
}

fn flow_key(tuple: Tuple) -> FlowKey {
    FlowKey {
        remote: tuple.2,
        remote_port: tuple.3,
        local_port: tuple.1,
    }
}

fn v4(addr: (Ipv4Addr, u16)) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(addr.0, addr.1))
}

impl TcpLayer {
    /// An empty table for a device with `mtu`.
    #[must_use]
    pub fn new(config: TcpConfig, mtu: usize) -> Self {
        let mut rng = Rng::new(config.seed);
        let hash = FlowHash::with_seed(rng.next_u64());
        TcpLayer {
            config,
            mtu,
            conns: HashMap::with_hasher(hash.clone()),
            tuples: HashMap::with_hasher(hash.clone()),
            deadlines: Deadlines::new(hash.clone()),
            due: Vec::new(),
            conn_events: Vec::new(),
            listeners: BTreeMap::new(),
            apps: HashMap::with_hasher(hash),
            events: VecDeque::new(),
            out: Vec::new(),
            draining: false,
            next_id: 1,
            // Cores sharing an address start far apart in the range, so
            // their connects rarely meet on one port (the directory's
            // claim settles it when they do).
            next_ephemeral: first_ephemeral(config.core),
            secret: rng.next_u64(),
            trace: Trace {
                events: Vec::new(),
                capacity: config.trace_capacity,
            },
            stats: TcpStats::default(),
            steering: None,
        }
    }

    /// Shares the interface with other cores' stacks through `steering`.
    pub fn set_steering(&mut self, steering: Rc<dyn Steering>) {
        self.steering = Some(steering);
    }

    /// Claims `tuple` for this core; `Some(owner)` if another core has it.
    fn claim(&self, tuple: Tuple) -> Option<CoreId> {
        let steering = self.steering.as_ref()?;
        match steering
            .directory()
            .claim(flow_key(tuple), self.config.core)
        {
            Claim::Taken(owner) => Some(owner),
            Claim::Claimed | Claim::Full => None,
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &TcpConfig {
        &self.config
    }

    /// RFC 6528: ISS = M + F(4-tuple, secret), M a 4 µs clock.
    fn iss(&self, tuple: Tuple, now: Instant) -> Seq {
        let mut h = self.secret;
        for part in [
            u64::from(u32::from(tuple.0)),
            u64::from(tuple.1),
            u64::from(u32::from(tuple.2)),
            u64::from(tuple.3),
        ] {
            h = Rng::new(h ^ part).next_u64();
        }
        let m = now.0 / 4000;
        Seq((h.wrapping_add(m) & 0xffff_ffff).try_into().unwrap_or(0))
    }

    fn ctx_run<R>(
        &mut self,
        id: u64,
        now: Instant,
        f: impl FnOnce(&mut Tcb, &mut Ctx<'_>) -> R,
    ) -> Option<R> {
        let entry = self.conns.get_mut(&id)?;
        let was_half_open = entry.tcb.state() == State::SynReceived && entry.listener.is_some();
        let mut events = core::mem::take(&mut self.conn_events);
        let result = {
            let mut ctx = Ctx {
                now,
                id,
                out: &mut self.out,
                events: &mut events,
                trace: &mut self.trace,
            };
            f(&mut entry.tcb, &mut ctx)
        };
        let state = entry.tcb.state();
        let listener = entry.listener;
        self.deadlines.arm(id, entry.tcb.poll_at());
        if was_half_open && state != State::SynReceived {
            if let Some(l) = listener.and_then(|port| self.listeners.get_mut(&port)) {
                l.half_open = l.half_open.saturating_sub(1);
            }
        }
        for event in events.drain(..) {
            let event = match event {
                ConnEvent::Established => match listener {
                    Some(port) => match self.listeners.get(&port) {
                        Some(l) => {
                            self.stats.accepted += 1;
                            Event::Accepted {
                                id,
                                accept: l.accept.clone(),
                            }
                        }
                        None => {
                            // The listener went away: nobody takes it (the
                            // scratch vector goes too; the next step makes
                            // a new one).
                            self.abort_now(id, now);
                            return Some(result);
                        }
                    },
                    None => {
                        self.stats.connected += 1;
                        Event::Connected(id)
                    }
                },
                ConnEvent::Data(data) => Event::Data(id, data),
                ConnEvent::SendCredit => Event::SendCredit(id),
                ConnEvent::PeerClosed => Event::PeerClosed(id),
                ConnEvent::Aborted(error) => Event::Aborted(id, error),
            };
            self.events.push_back(event);
        }
        self.conn_events = events;
        if state == State::Closed {
            self.remove(id);
        } else if state == State::TimeWait {
            // "The connection is gone once both sides closed" (ebb-net):
            // the handler goes now, the TCB stays for 2·MSL.
            if let Some(entry) = self.conns.get_mut(&id) {
                if !core::mem::replace(&mut entry.released, true) {
                    self.events.push_back(Event::Release(id));
                }
            }
        }
        Some(result)
    }

    fn abort_now(&mut self, id: u64, now: Instant) {
        if let Some(entry) = self.conns.get_mut(&id) {
            let mut events = Vec::new();
            let mut ctx = Ctx {
                now,
                id,
                out: &mut self.out,
                events: &mut events,
                trace: &mut self.trace,
            };
            entry.tcb.abort(&mut ctx);
        }
        self.remove(id);
    }

    fn remove(&mut self, id: u64) {
        self.deadlines.forget(id);
        if let Some(entry) = self.conns.remove(&id) {
            let ends = entry.tcb.endpoints();
            let tuple = (ends.local.0, ends.local.1, ends.remote.0, ends.remote.1);
            self.tuples.remove(&tuple);
            if let Some(steering) = &self.steering {
                steering
                    .directory()
                    .remove(flow_key(tuple), self.config.core);
            }
            if !entry.released {
                self.events.push_back(Event::Release(id));
            }
        }
    }

    /// A segment arrived from `src` to `dst` (RFC 9293 §3.10.7). Returns
    /// the core to forward it to when another core's stack owns its
    /// connection.
    #[must_use]
    pub fn input(
        &mut self,
        now: Instant,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        mut seg: Segment,
    ) -> Option<CoreId> {
        self.stats.segments_in += 1;
        let tuple = (dst, seg.dst_port, src, seg.src_port);
        if let Some(&id) = self.tuples.get(&tuple) {
            // A TIME-WAIT whose 2·MSL has run out is gone, even if its
            // timer has not run yet (the stack takes frames before
            // timers): its timer closes it, and the segment, typically a
            // new SYN for the same pair, goes on as for no connection.
            let left = self.ctx_run(id, now, |tcb, ctx| {
                if tcb.time_wait_over(ctx.now) {
                    tcb.on_timer(ctx);
                    Some(seg)
                } else {
                    tcb.input(seg, ctx);
                    None
                }
            });
            match left.flatten() {
                Some(unused) => seg = unused,
                None => return None,
            }
        }
        if let Some(steering) = &self.steering {
            let owner = steering.directory().lookup(flow_key(tuple));
            if let Some(core) = owner.filter(|&core| core != self.config.core) {
                self.stats.forwarded += 1;
                return Some(core);
            }
        }
        self.input_unknown(now, src, dst, seg, tuple)
    }

    /// A segment for no connection of any core: LISTEN or CLOSED.
    fn input_unknown(
        &mut self,
        now: Instant,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        seg: Segment,
        tuple: Tuple,
    ) -> Option<CoreId> {
        let listening = self
            .listeners
            .get(&seg.dst_port)
            .is_some_and(|l| l.accepts(dst));
        if !listening {
            self.reset_closed(&seg, src, dst);
            return None;
        }
        // RFC 9293 §3.10.7.2, LISTEN.
        if seg.flags.rst {
            return None;
        }
        if seg.flags.ack {
            self.send_reset(dst, src, &seg, seg.ack, None);
            return None;
        }
        if !seg.flags.syn {
            return None;
        }
        let listener = self.listeners.get_mut(&seg.dst_port)?;
        if !listener.has_room() {
            self.stats.syn_backlog_full += 1;
            return None;
        }
        if self.conns.len() >= self.config.max_connections {
            self.stats.table_full += 1;
            return None;
        }
        // Another core may have taken this flow since the lookup (its
        // own copy of this SYN): then the SYN is that core's.
        if let Some(owner) = self.claim(tuple) {
            self.stats.forwarded += 1;
            return Some(owner);
        }
        let listener = self.listeners.get_mut(&seg.dst_port)?;
        listener.half_open += 1;
        let id = self.next_id;
        self.next_id += 1;
        let iss = self.iss(tuple, now);
        let ends = Endpoints {
            local: (dst, seg.dst_port),
            remote: (src, seg.src_port),
        };
        let mut events = Vec::new();
        let mut ctx = Ctx {
            now,
            id,
            out: &mut self.out,
            events: &mut events,
            trace: &mut self.trace,
        };
        let tcb = Tcb::accept(&self.config, ends, iss, self.mtu, &seg, &mut ctx);
        self.deadlines.arm(id, tcb.poll_at());
        self.conns.insert(
            id,
            Entry {
                tcb,
                listener: Some(seg.dst_port),
                released: false,
            },
        );
        self.tuples.insert(tuple, id);
        self.apps.insert(
            id,
            App {
                local: v4(ends.local),
                remote: v4(ends.remote),
                handler: None,
            },
        );
        None
    }

    /// RFC 9293 §3.10.7.1, CLOSED: every segment but a RST gets a RST.
    fn reset_closed(&mut self, seg: &Segment, src: Ipv4Addr, dst: Ipv4Addr) {
        if seg.flags.rst {
            return;
        }
        if seg.flags.ack {
            // <SEQ=SEG.ACK><CTL=RST>
            self.send_reset(dst, src, seg, seg.ack, None);
        } else {
            // <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>
            self.send_reset(dst, src, seg, Seq(0), Some(seg.seq.wrapping_add(seg.len())));
        }
    }

    fn send_reset(
        &mut self,
        local: Ipv4Addr,
        remote: Ipv4Addr,
        seg: &Segment,
        seq: Seq,
        ack: Option<Seq>,
    ) {
        self.stats.resets_sent += 1;
        self.out.push(OutSegment {
            src: (local, seg.dst_port),
            dst: (remote, seg.src_port),
            seq,
            ack: ack.unwrap_or_default(),
            flags: Flags {
                rst: true,
                ack: ack.is_some(),
                ..Flags::default()
            },
            ..OutSegment::default()
        });
    }

    /// Listens on `addr:port` (port 0: an ephemeral one); returns the port.
    ///
    /// # Errors
    ///
    /// [`NetError::AddrInUse`] if the port is taken.
    pub fn listen(&mut self, addr: Ipv4Addr, port: u16, accept: AcceptFn) -> Result<u16, NetError> {
        let port = if port == 0 {
            let listeners = &self.listeners;
            next_free_port(&mut self.next_ephemeral, |p| !listeners.contains_key(&p))
                .ok_or(NetError::AddrInUse)?
        } else {
            port
        };
        if self.listeners.contains_key(&port) {
            return Err(NetError::AddrInUse);
        }
        self.listeners
            .insert(port, Listener::new(addr, accept, self.config.syn_backlog));
        Ok(port)
    }

    /// Stops listening on `port` (established connections stay).
    pub fn unlisten(&mut self, port: u16) {
        self.listeners.remove(&port);
    }

    /// An active open from `local` to `remote` (RFC 9293 §3.10.1).
    ///
    /// # Errors
    ///
    /// [`NetError::AddrInUse`] if no ephemeral port is free or the table
    /// is full.
    pub fn connect(
        &mut self,
        now: Instant,
        local: Ipv4Addr,
        remote: SocketAddrV4,
        handler: Box<dyn TcpHandler>,
    ) -> Result<(u64, SocketAddr), NetError> {
        if self.conns.len() >= self.config.max_connections {
            return Err(NetError::AddrInUse);
        }
        let (listeners, tuples, steering) = (&self.listeners, &self.tuples, &self.steering);
        let core = self.config.core;
        let port = next_free_port(&mut self.next_ephemeral, |p| {
            let tuple = (local, p, *remote.ip(), remote.port());
            // Other cores' stacks share the address: the port must be free
            // of their flows too, and claiming it settles a race for it.
            !listeners.contains_key(&p)
                && !tuples.contains_key(&tuple)
                && steering.as_ref().is_none_or(|s| {
                    !matches!(s.directory().claim(flow_key(tuple), core), Claim::Taken(_))
                })
        })
        .ok_or(NetError::AddrInUse)?;
        let tuple = (local, port, *remote.ip(), remote.port());
        let id = self.next_id;
        self.next_id += 1;
        let iss = self.iss(tuple, now);
        let ends = Endpoints {
            local: (local, port),
            remote: (*remote.ip(), remote.port()),
        };
        let mut events = Vec::new();
        let mut ctx = Ctx {
            now,
            id,
            out: &mut self.out,
            events: &mut events,
            trace: &mut self.trace,
        };
        let tcb = Tcb::connect(&self.config, ends, iss, self.mtu, &mut ctx);
        self.deadlines.arm(id, tcb.poll_at());
        self.conns.insert(
            id,
            Entry {
                tcb,
                listener: None,
                released: false,
            },
        );
        self.tuples.insert(tuple, id);
        let local = v4(ends.local);
        self.apps.insert(
            id,
            App {
                local,
                remote: v4(ends.remote),
                handler: Some(handler),
            },
        );
        Ok((id, local))
    }

    /// SEND on connection `id`.
    ///
    /// # Errors
    ///
    /// As [`Tcb::send`]; [`NetError::Closed`] if the connection is gone.
    pub fn send(
        &mut self,
        now: Instant,
        id: u64,
        data: IoChain,
        all: bool,
    ) -> Result<(), SendError> {
        // One lookup: the closure takes the data only if `id` is there.
        let mut data = Some(data);
        let sent = self.ctx_run(id, now, |tcb, ctx| {
            tcb.send(data.take().unwrap_or_default(), all, ctx)
        });
        match sent {
            Some(result) => result.map_err(|(error, data)| SendError { error, data }),
            None => Err(SendError {
                error: NetError::Closed,
                data: data.unwrap_or_default(),
            }),
        }
    }

    /// The send credit of connection `id` (0 if it is gone).
    #[must_use]
    pub fn send_credit(&mut self, id: u64) -> usize {
        self.conns
            .get_mut(&id)
            .map_or(0, |e| e.tcb.send_credit_for_application())
    }

    /// Pauses receiving on `id`.
    pub fn pause(&mut self, id: u64) {
        if let Some(entry) = self.conns.get_mut(&id) {
            entry.tcb.pause();
            self.deadlines.arm(id, entry.tcb.poll_at());
        }
    }

    /// Resumes receiving on `id`.
    pub fn resume(&mut self, now: Instant, id: u64) {
        self.ctx_run(id, now, Tcb::resume);
    }

    /// CLOSE on `id`.
    pub fn close(&mut self, now: Instant, id: u64) {
        self.ctx_run(id, now, Tcb::close);
    }

    /// ABORT on `id`.
    pub fn abort(&mut self, now: Instant, id: u64) {
        self.abort_now(id, now);
    }

    /// Runs the timers due at `now`, earliest first.
    pub fn poll(&mut self, now: Instant) {
        let mut due = core::mem::take(&mut self.due);
        self.deadlines.take_due(now, &mut due);
        for &id in &due {
            // Re-arms the connection's next timer.
            self.ctx_run(id, now, Tcb::on_timer);
        }
        due.clear();
        self.due = due;
    }

    /// The earliest timer of any connection.
    #[must_use]
    pub fn poll_at(&self) -> Option<Instant> {
        self.deadlines.next()
    }

    /// The state of connection `id`; `None` once it is gone (CLOSED).
    #[must_use]
    pub fn state(&self, id: u64) -> Option<State> {
        self.conns.get(&id).map(|e| e.tcb.state())
    }

    /// A snapshot of connection `id`.
    #[must_use]
    pub fn info(&self, id: u64) -> Option<ConnInfo> {
        self.conns.get(&id).map(|e| e.tcb.info())
    }

    /// The ids of all connections, oldest first.
    #[must_use]
    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.conns.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Connections in the table (all states).
    #[must_use]
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether the table is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Half-open connections of the listener on `port`.
    #[must_use]
    pub fn half_open(&self, port: u16) -> usize {
        self.listeners.get(&port).map_or(0, |l| l.half_open)
    }

    /// Counters.
    #[must_use]
    pub fn stats(&self) -> TcpStats {
        self.stats
    }

    pub(crate) fn count_out(&mut self, n: usize) {
        self.stats.segments_out += u64::try_from(n).unwrap_or(u64::MAX);
    }

    /// The trace so far (empty unless `trace_capacity` is set).
    #[must_use]
    pub fn trace(&self) -> &[TraceEvent] {
        &self.trace.events
    }
}

#[cfg(test)]
mod tests;
