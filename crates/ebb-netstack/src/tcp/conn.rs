//! One connection: the transmission control block (RFC 9293 §3.3.1) and
//! its state machine (RFC 9293 §3.3.2, event processing §3.10).
//!
//! Variables carry the RFC's names: `snd_una` is SND.UNA, `rcv_nxt` is
//! RCV.NXT, and so on. Two are not in RFC 9293: `snd_max`, the highest
//! sequence number sent (SND.NXT goes back to SND.UNA after a timeout;
//! ACKs up to `snd_max` stay acceptable, as in 4.4BSD), and `rcv_adv`, the
//! right edge of the window we advertised (we never move it left, RFC 9293
//! §3.8.6.2.2).
//!
//! Data to send is one [`IoChain`] of the application's buffers starting
//! at SND.UNA; a segment (first transmission or retransmission) carries
//! views of those same buffers. Received data reaches the application as
//! views of the receive buffers.

use alloc::vec::Vec;
use core::net::Ipv4Addr;
use core::time::Duration;

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::NetError;

use super::congestion::{DupAckAction, NewReno};
use super::rto::RttEstimator;
use super::segment::{Flags, OutSegment, Segment, MAX_WINDOW_SCALE};
use super::seq::Seq;
use super::trace::{Trace, TraceKind};
use super::TcpConfig;

/// Connection states (RFC 9293 §3.3.2; LISTEN lives in the listener).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Our SYN is out, waiting for the peer's.
    SynSent,
    /// Both SYNs seen, ours not yet acknowledged.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// We closed; our FIN is not yet acknowledged.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for our FIN's ACK.
    LastAck,
    /// Both done; waiting 2·MSL for stray segments.
    TimeWait,
    /// Gone.
    Closed,
}

impl State {
    /// Whether the handshake completed (RFC 9293 "synchronized states").
    #[must_use]
    pub fn synchronized(self) -> bool {
        !matches!(self, State::SynSent | State::SynReceived | State::Closed)
    }
}

/// What the application hears about, in order.
#[derive(Debug)]
pub enum ConnEvent {
    /// The handshake completed.
    Established,
    /// In-order data.
    Data(IoChain),
    /// Send credit grew after running out.
    SendCredit,
    /// The peer's FIN arrived (after all its data).
    PeerClosed,
    /// The connection was reset or timed out.
    Aborted(NetError),
}

/// A snapshot of a connection's variables, for tests and statistics.
#[derive(Clone, Copy, Debug)]
pub struct ConnInfo {
    /// The state.
    pub state: State,
    /// SND.UNA.
    pub snd_una: Seq,
    /// SND.NXT.
    pub snd_nxt: Seq,
    /// SND.WND (scaled).
    pub snd_wnd: usize,
    /// RCV.NXT.
    pub rcv_nxt: Seq,
    /// The window we would advertise now.
    pub rcv_wnd: usize,
    /// The effective send MSS.
    pub smss: usize,
    /// cwnd.
    pub cwnd: usize,
    /// ssthresh.
    pub ssthresh: usize,
    /// SRTT, once measured.
    pub srtt: Option<Duration>,
    /// The current RTO.
    pub rto: Duration,
    /// Our window scale shift (0 if scaling is off).
    pub rcv_wscale: u8,
    /// The peer's window scale shift (0 if scaling is off).
    pub snd_wscale: u8,
    /// Bytes queued to send (unacknowledged and unsent).
    pub send_queued: usize,
    /// Bytes received and held back by `pause_receive`.
    pub held: usize,
    /// Bytes held out of order.
    pub out_of_order: usize,
    /// Retransmissions so far.
    pub retransmissions: u64,
}

/// Everything a connection's processing writes to.
pub struct Ctx<'a> {
    /// The current time.
    pub now: Instant,
    /// The connection's id (for the trace).
    pub id: u64,
    /// Segments to send.
    pub out: &'a mut Vec<OutSegment>,
    /// Events for the application.
    pub events: &'a mut Vec<ConnEvent>,
    pub(crate) trace: &'a mut Trace,
}

impl Ctx<'_> {
    fn trace(&mut self, kind: TraceKind) {
        self.trace.record(self.now, self.id, kind);
    }
}

/// The options and addresses a connection starts with.
#[derive(Clone, Copy, Debug)]
pub struct Endpoints {
    /// Our address and port.
    pub local: (Ipv4Addr, u16),
    /// The peer's address and port.
    pub remote: (Ipv4Addr, u16),
}

/// The transmission control block.
#[derive(Debug)]
pub struct Tcb {
    state: State,
    ends: Endpoints,
    passive: bool,
    config: TcpConfig,
    /// Our MSS limit: the device MTU minus 40, clamped by the config.
    our_mss: u16,
    /// ISS.
    iss: Seq,
    /// IRS.
    irs: Seq,
    /// SND.UNA.
    snd_una: Seq,
    /// SND.NXT.
    snd_nxt: Seq,
    /// The highest sequence number sent so far (see the module doc).
    snd_max: Seq,
    /// SND.WND, already scaled.
    snd_wnd: usize,
    /// SND.WL1.
    snd_wl1: Seq,
    /// SND.WL2.
    snd_wl2: Seq,
    /// Snd.Wind.Shift of RFC 7323 §2.3.
    snd_wscale: u8,
    /// Rcv.Wind.Shift of RFC 7323 §2.3.
    rcv_wscale: u8,
    /// Whether we offered window scaling in our SYN.
    offered_wscale: bool,
    /// The effective send MSS (RFC 9293 §3.7.1, Eff.snd.MSS).
    smss: usize,
    /// Data from SND.UNA on (after the SYN): sent and unsent.
    send_queue: IoChain,
    /// The sequence number of the first byte of `send_queue`.
    send_queue_seq: Seq,
    /// The application closed: a FIN follows the queued data.
    fin_queued: bool,
    /// RCV.NXT.
    rcv_nxt: Seq,
    /// The right edge of the window we advertised.
    rcv_adv: Seq,
    /// Receive buffer size.
    rcv_buf: usize,
    /// Segments beyond RCV.NXT, sorted by sequence number.
    out_of_order: Vec<(Seq, IoBuf)>,
    /// A FIN seen beyond RCV.NXT.
    out_of_order_fin: Option<Seq>,
    /// The application paused receiving.
    paused: bool,
    /// In-order data held while paused.
    held: IoChain,
    /// The peer's FIN, held while paused.
    held_fin: bool,
    rtt: RttEstimator,
    /// The segment being timed (Karn's rule: only first transmissions).
    rtt_timed: Option<(Seq, Instant)>,
    cc: NewReno,
    dup_acks: u32,
    /// When the retransmission timer expires.
    rexmit_at: Option<Instant>,
    /// Expiries in a row.
    retries: u32,
    /// When the next zero-window probe goes out (RFC 9293 §3.8.6.1).
    persist_at: Option<Instant>,
    persist_backoff: u32,
    /// A zero-window probe byte at SND.MAX is out: an ACK covering it is
    /// acceptable.
    probe_sent: bool,
    /// An ACK is owed.
    ack_pending: bool,
    /// ... and must go out now.
    ack_now: bool,
    /// When a delayed ACK must go out at the latest.
    delack_at: Option<Instant>,
    /// Segments received since our last ACK.
    unacked_segments: u32,
    /// When TIME-WAIT ends.
    time_wait_until: Option<Instant>,
    /// A send found too little credit: tell the application when it grows.
    want_credit: bool,
    retransmissions: u64,
}

/// The views of `len` bytes at `offset` in `chain` (no copy).
fn chain_range(chain: &IoChain, mut offset: usize, mut len: usize) -> IoChain {
    let mut out = IoChain::new();
    for buf in chain.segments() {
        if len == 0 {
            break;
        }
        if offset >= buf.len() {
            offset -= buf.len();
            continue;
        }
        let take = (buf.len() - offset).min(len);
        if let Ok(view) = buf.slice(offset..offset + take) {
            out.push_back(view);
        }
        len -= take;
        offset = 0;
    }
    out
}

/// The smallest shift that makes `buffer` fit 16 bits (RFC 7323 §2.3).
fn window_shift(buffer: usize) -> u8 {
    let mut shift = 0;
    while shift < MAX_WINDOW_SCALE && (buffer >> shift) > 0xffff {
        shift += 1;
    }
    shift
}

impl Tcb {
    fn new(config: &TcpConfig, ends: Endpoints, iss: Seq, mtu: usize) -> Self {
        let device_mss = u16::try_from(mtu.saturating_sub(40)).unwrap_or(u16::MAX);
        let our_mss = config.mss.map_or(device_mss, |m| m.min(device_mss)).max(64);
        let rcv_wscale = if config.window_scaling {
            window_shift(config.recv_buffer)
        } else {
            0
        };
        Tcb {
            state: State::Closed,
            ends,
            passive: false,
            config: *config,
            our_mss,
            iss,
            irs: Seq(0),
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            snd_wl1: Seq(0),
            snd_wl2: Seq(0),
            snd_wscale: 0,
            rcv_wscale,
            offered_wscale: config.window_scaling,
            smss: usize::from(super::segment::DEFAULT_MSS.min(our_mss)),
            send_queue: IoChain::new(),
            send_queue_seq: iss.wrapping_add(1),
            fin_queued: false,
            rcv_nxt: Seq(0),
            rcv_adv: Seq(0),
            rcv_buf: config.recv_buffer.max(1),
            out_of_order: Vec::new(),
            out_of_order_fin: None,
            paused: false,
            held: IoChain::new(),
            held_fin: false,
            rtt: RttEstimator::new(config.initial_rto, config.min_rto, config.max_rto),
            rtt_timed: None,
            cc: NewReno::new(usize::from(super::segment::DEFAULT_MSS), iss),
            dup_acks: 0,
            rexmit_at: None,
            retries: 0,
            persist_at: None,
            persist_backoff: 0,
            probe_sent: false,
            ack_pending: false,
            ack_now: false,
            delack_at: None,
            unacked_segments: 0,
            time_wait_until: None,
            want_credit: false,
            retransmissions: 0,
        }
    }

    /// An active OPEN (RFC 9293 §3.10.1): sends a SYN, enters SYN-SENT.
    pub fn connect(
        config: &TcpConfig,
        ends: Endpoints,
        iss: Seq,
        mtu: usize,
        ctx: &mut Ctx<'_>,
    ) -> Self {
        let mut tcb = Tcb::new(config, ends, iss, mtu);
        tcb.state = State::SynSent;
        tcb.output(ctx);
        tcb
    }

    /// A SYN arrived at a listener (RFC 9293 §3.10.7.2, "third, check for
    /// a SYN"): enters SYN-RECEIVED and sends SYN,ACK.
    pub fn accept(
        config: &TcpConfig,
        ends: Endpoints,
        iss: Seq,
        mtu: usize,
        syn: &Segment,
        ctx: &mut Ctx<'_>,
    ) -> Self {
        let mut tcb = Tcb::new(config, ends, iss, mtu);
        tcb.passive = true;
        tcb.state = State::SynReceived;
        tcb.take_syn_options(syn);
        tcb.irs = syn.seq;
        tcb.rcv_nxt = syn.seq.wrapping_add(1);
        tcb.rcv_adv = tcb.rcv_nxt;
        // RFC 7323 §2.2: the window in a SYN is never scaled.
        tcb.snd_wnd = usize::from(syn.window);
        tcb.snd_wl1 = syn.seq;
        tcb.snd_wl2 = iss;
        tcb.output(ctx);
        tcb
    }

    /// The state.
    #[must_use]
    pub fn state(&self) -> State {
        self.state
    }

    /// Whether this connection came from a listener.
    #[must_use]
    pub fn passive(&self) -> bool {
        self.passive
    }

    /// The addresses.
    #[must_use]
    pub fn endpoints(&self) -> Endpoints {
        self.ends
    }

    /// A snapshot of the variables.
    #[must_use]
    pub fn info(&self) -> ConnInfo {
        ConnInfo {
            state: self.state,
            snd_una: self.snd_una,
            snd_nxt: self.snd_nxt,
            snd_wnd: self.snd_wnd,
            rcv_nxt: self.rcv_nxt,
            rcv_wnd: self.rcv_wnd(),
            smss: self.smss,
            cwnd: self.cc.cwnd,
            ssthresh: self.cc.ssthresh,
            srtt: self.rtt.srtt(),
            rto: self.rtt.rto(),
            rcv_wscale: self.rcv_wscale,
            snd_wscale: self.snd_wscale,
            send_queued: self.send_queue.len(),
            held: self.held.len(),
            out_of_order: self.out_of_order.iter().map(|(_, b)| b.len()).sum(),
            retransmissions: self.retransmissions,
        }
    }

    /// MSS and window scale from the peer's SYN (RFC 9293 §3.7.1, RFC 7323
    /// §2.2: scaling only if both SYNs carry the option).
    fn take_syn_options(&mut self, syn: &Segment) {
        let peer_mss = syn.mss.unwrap_or(super::segment::DEFAULT_MSS);
        // Eff.snd.MSS = min(SendMSS, MMS_S - options): our own limit is the
        // device MTU (and the configured clamp).
        self.smss = usize::from(peer_mss.min(self.our_mss).max(64));
        self.cc.set_smss(self.smss);
        match (syn.window_scale, self.offered_wscale || self.passive) {
            (Some(shift), true) if self.config.window_scaling => {
                self.snd_wscale = shift;
                self.offered_wscale = true;
            }
            _ => {
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
                self.offered_wscale = false;
            }
        }
    }

    // ----- the application's calls (RFC 9293 §3.10.2–§3.10.5) -----

    /// Bytes the connection takes now without queueing beyond what the
    /// windows allow: min(cwnd, SND.WND) minus what is queued.
    #[must_use]
    pub fn send_credit(&self) -> usize {
        if self.fin_queued {
            return 0;
        }
        match self.state {
            State::Established | State::CloseWait => self
                .cc
                .cwnd
                .min(self.snd_wnd)
                .saturating_sub(self.send_queue.len()),
            State::SynSent | State::SynReceived => {
                self.cc.cwnd.saturating_sub(self.send_queue.len())
            }
            _ => 0,
        }
    }

    /// SEND (RFC 9293 §3.10.2). With `all`, queues everything; otherwise
    /// only if it fits the credit.
    ///
    /// # Errors
    ///
    /// [`NetError::Closed`] after CLOSE or in a closing state;
    /// [`NetError::NoCredit`] if `!all` and `data` exceeds the credit.
    pub fn send(
        &mut self,
        data: IoChain,
        all: bool,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), (NetError, IoChain)> {
        let open = matches!(
            self.state,
            State::SynSent | State::SynReceived | State::Established | State::CloseWait
        );
        if !open || self.fin_queued {
            return Err((NetError::Closed, data));
        }
        let credit = self.send_credit();
        if data.len() > credit {
            self.want_credit = true;
            if !all {
                let offered = data.len();
                return Err((NetError::NoCredit { credit, offered }, data));
            }
        }
        let mut data = data;
        self.send_queue.append(&mut data);
        self.output(ctx);
        Ok(())
    }

    /// CLOSE (RFC 9293 §3.10.4): a FIN follows the queued data.
    pub fn close(&mut self, ctx: &mut Ctx<'_>) {
        match self.state {
            State::SynSent => self.state = State::Closed,
            State::SynReceived => self.fin_queued = true,
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
        self.output(ctx);
    }

    /// ABORT (RFC 9293 §3.10.5): a RST if synchronized, then CLOSED.
    pub fn abort(&mut self, ctx: &mut Ctx<'_>) {
        if matches!(
            self.state,
            State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
        ) {
            let rst = self.segment(
                self.snd_nxt,
                Flags {
                    rst: true,
                    ..Flags::default()
                },
            );
            ctx.out.push(rst);
        }
        self.state = State::Closed;
    }

    /// The application stops reading: the window's right edge stays where
    /// it is and data up to it is held.
    pub fn pause(&mut self) {
        self.paused = true;
    }

    /// The application reads again: held data is delivered and the window
    /// reopens (a window update goes out).
    pub fn resume(&mut self, ctx: &mut Ctx<'_>) {
        if !self.paused {
            return;
        }
        self.paused = false;
        let held = core::mem::take(&mut self.held);
        if !held.is_empty() {
            ctx.events.push(ConnEvent::Data(held));
        }
        if core::mem::take(&mut self.held_fin) {
            ctx.events.push(ConnEvent::PeerClosed);
        }
        if self.state.synchronized() {
            self.ack_now = true;
            self.ack_pending = true;
            self.output(ctx);
        }
    }

    // ----- SEGMENT ARRIVES (RFC 9293 §3.10.7) -----

    /// Processes a segment addressed to this connection.
    pub fn input(&mut self, seg: Segment, ctx: &mut Ctx<'_>) {
        ctx.trace(TraceKind::Received {
            seq: seg.seq,
            len: seg.payload.len(),
        });
        match self.state {
            State::Closed => {}
            State::SynSent => self.input_syn_sent(&seg, ctx),
            _ => self.input_synchronized(seg, ctx),
        }
        if self.state != State::Closed {
            self.output(ctx);
        }
    }

    /// RFC 9293 §3.10.7.3, SYN-SENT.
    fn input_syn_sent(&mut self, seg: &Segment, ctx: &mut Ctx<'_>) {
        // First, check the ACK bit.
        if seg.flags.ack && (seg.ack.le(self.iss) || seg.ack.gt(self.snd_max)) {
            if !seg.flags.rst {
                ctx.out.push(self.reset_for(seg.ack));
            }
            return;
        }
        let ack_acceptable = seg.flags.ack;
        // Second, check the RST bit.
        if seg.flags.rst {
            if ack_acceptable {
                ctx.events
                    .push(ConnEvent::Aborted(NetError::ConnectionRefused));
                self.state = State::Closed;
            }
            return;
        }
        // Fourth, check the SYN bit.
        if !seg.flags.syn {
            return;
        }
        self.take_syn_options(seg);
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq.wrapping_add(1);
        self.rcv_adv = self.rcv_nxt;
        self.snd_wnd = usize::from(seg.window);
        self.snd_wl1 = seg.seq;
        self.snd_wl2 = seg.ack;
        self.ack_pending = true;
        self.ack_now = true;
        if ack_acceptable {
            self.snd_una = seg.ack;
            self.take_rtt_sample(seg.ack, ctx);
            self.rexmit_at = None;
            self.retries = 0;
            self.state = State::Established;
            ctx.events.push(ConnEvent::Established);
        } else {
            // Simultaneous open (RFC 9293 §3.5, Figure 7): SYN,ACK with
            // our ISS again.
            self.state = State::SynReceived;
            self.snd_nxt = self.iss;
            self.rtt_timed = None;
        }
    }

    /// RFC 9293 §3.10.7.4, every state after SYN-SENT.
    #[allow(clippy::too_many_lines)]
    fn input_synchronized(&mut self, mut seg: Segment, ctx: &mut Ctx<'_>) {
        // A SYN again in SYN-RECEIVED: the peer missed our SYN,ACK (no ACK:
        // send it again) or this is its SYN,ACK of a simultaneous open
        // (the SYN was seen: step past it).
        if self.state == State::SynReceived && seg.flags.syn && seg.seq == self.irs {
            if !seg.flags.ack || seg.flags.rst {
                if !seg.flags.rst {
                    self.snd_nxt = self.iss;
                    self.rtt_timed = None;
                }
                return;
            }
            seg.flags.syn = false;
            seg.seq = seg.seq.wrapping_add(1);
        }
        // First, check the sequence number.
        if !self.acceptable(&seg) {
            if !seg.flags.rst {
                if self.state == State::TimeWait && seg.flags.fin {
                    // A retransmitted FIN: restart the 2·MSL wait.
                    self.time_wait_until = Some(ctx.now + self.config.msl * 2);
                }
                self.ack_pending = true;
                self.ack_now = true;
            }
            return;
        }
        self.trim_to_window(&mut seg);
        // Second, check the RST bit (RFC 5961 §3.2: exact match resets,
        // anything else in the window gets a challenge ACK).
        if seg.flags.rst {
            if seg.seq != self.rcv_nxt {
                self.ack_pending = true;
                self.ack_now = true;
                return;
            }
            match self.state {
                State::SynReceived if self.passive => {}
                State::SynReceived => {
                    ctx.events
                        .push(ConnEvent::Aborted(NetError::ConnectionRefused));
                }
                State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait => {
                    ctx.events
                        .push(ConnEvent::Aborted(NetError::ConnectionReset));
                }
                _ => {}
            }
            self.state = State::Closed;
            return;
        }
        // Fourth, check the SYN bit (RFC 5961 §4: challenge ACK).
        if seg.flags.syn {
            self.ack_pending = true;
            self.ack_now = true;
            return;
        }
        // Fifth, check the ACK field.
        if !seg.flags.ack {
            return;
        }
        if self.state == State::SynReceived {
            if seg.ack.gt(self.snd_una) && seg.ack.le(self.snd_max) {
                self.state = if self.fin_queued {
                    State::FinWait1
                } else {
                    State::Established
                };
                self.snd_wnd = usize::from(seg.window) << self.snd_wscale;
                self.snd_wl1 = seg.seq;
                self.snd_wl2 = seg.ack;
                ctx.events.push(ConnEvent::Established);
            } else {
                ctx.out.push(self.reset_for(seg.ack));
                return;
            }
        }
        if seg.ack.gt(self.ack_limit()) {
            // Acknowledges something not yet sent: ACK and drop.
            self.ack_pending = true;
            self.ack_now = true;
            return;
        }
        self.process_ack(&seg, ctx);
        if self.state == State::Closed || self.state == State::TimeWait && !seg.flags.fin {
            return;
        }
        // Seventh, process the segment text.
        if !seg.payload.is_empty() {
            if matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            ) {
                self.receive_data(seg.seq, seg.payload.clone(), ctx);
            } else {
                // After the peer's FIN no data can be new.
                self.ack_pending = true;
                self.ack_now = true;
            }
        }
        // Eighth, check the FIN bit.
        if seg.flags.fin {
            let fin_seq = seg.seq.wrapping_add(seg.payload.len());
            if fin_seq == self.rcv_nxt {
                self.receive_fin(ctx);
            } else if fin_seq.gt(self.rcv_nxt) {
                self.out_of_order_fin = Some(fin_seq);
                self.ack_now = true;
                self.ack_pending = true;
            }
        }
    }

    /// The highest acceptable SEG.ACK.
    fn ack_limit(&self) -> Seq {
        self.snd_max.wrapping_add(usize::from(self.probe_sent))
    }

    /// The window we accept now (at least the advertised one).
    fn rcv_wnd(&self) -> usize {
        let room = self.rcv_buf.saturating_sub(self.held.len());
        let room = if self.rcv_wscale == 0 {
            room.min(0xffff)
        } else {
            room
        };
        room.max(self.rcv_adv.since(self.rcv_nxt))
    }

    /// RFC 9293 §3.10.7.4, the four cases of segment acceptability.
    fn acceptable(&self, seg: &Segment) -> bool {
        let wnd = self.rcv_wnd();
        let len = seg.len();
        let end = self.rcv_nxt.wrapping_add(wnd);
        let in_window = |s: Seq| s.ge(self.rcv_nxt) && s.lt(end);
        match (len, wnd) {
            (0, 0) => seg.seq == self.rcv_nxt,
            (0, _) => in_window(seg.seq),
            (_, 0) => false,
            _ => in_window(seg.seq) || in_window(seg.seq.wrapping_add(len - 1)),
        }
    }

    /// Cuts what lies before RCV.NXT or beyond the window (RFC 9293
    /// §3.10.7.4: "trimmed such that only the portion that lies within the
    /// window is processed").
    fn trim_to_window(&self, seg: &mut Segment) {
        if seg.seq.lt(self.rcv_nxt) {
            let mut before = self.rcv_nxt.since(seg.seq);
            if seg.flags.syn {
                seg.flags.syn = false;
                before -= 1;
            }
            let cut = before.min(seg.payload.len());
            let _ = seg.payload.trim_front(cut);
            seg.seq = seg.seq.wrapping_add(cut);
            if before > cut {
                // Only a FIN that was already received can be before.
                seg.flags.fin = false;
                seg.seq = self.rcv_nxt;
            }
        }
        let room = self.rcv_wnd().saturating_sub(seg.seq.since(self.rcv_nxt));
        if seg.payload.len() > room {
            let _ = seg.payload.trim_back(seg.payload.len() - room);
            seg.flags.fin = false;
        }
    }

    /// Fifth step for a synchronized state: SND.UNA, the window, RTT,
    /// congestion control and the closing transitions.
    fn process_ack(&mut self, seg: &Segment, ctx: &mut Ctx<'_>) {
        let ack = seg.ack;
        if ack.lt(self.snd_una) {
            // An old duplicate: its window information is stale too.
            return;
        }
        let acked = ack.since(self.snd_una);
        let flight_before = self.snd_max.since(self.snd_una);
        if acked > 0 {
            self.acknowledge(ack, acked, ctx);
        } else if seg.payload.is_empty()
            && !seg.flags.fin
            && usize::from(seg.window) << self.snd_wscale == self.snd_wnd
            && self.snd_wnd > 0
            && flight_before > 0
        {
            // RFC 5681 §2 "duplicate acknowledgment".
            self.dup_acks += 1;
            let action = self
                .cc
                .on_dup_ack(self.dup_acks, ack, flight_before, self.snd_max);
            if action == DupAckAction::FastRetransmit {
                ctx.trace(TraceKind::FastRetransmit {
                    seq: self.snd_una,
                    ssthresh: self.cc.ssthresh,
                });
                self.retransmit_first(ctx);
            }
            self.trace_cwnd(ctx);
        }
        // Update the send window (RFC 9293 §3.10.7.4, SND.WL1/SND.WL2).
        if self.snd_wl1.lt(seg.seq) || (self.snd_wl1 == seg.seq && self.snd_wl2.le(ack)) {
            let was_zero = self.snd_wnd == 0;
            self.snd_wnd = usize::from(seg.window) << self.snd_wscale;
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            if self.snd_wnd > 0 {
                self.persist_at = None;
                self.persist_backoff = 0;
                self.probe_sent = false;
                if was_zero {
                    self.maybe_credit(ctx);
                }
            }
        }
        // The closing transitions once our FIN is acknowledged.
        if self.fin_acked() {
            match self.state {
                State::FinWait1 => self.state = State::FinWait2,
                State::Closing => self.enter_time_wait(ctx),
                State::LastAck => self.state = State::Closed,
                _ => {}
            }
        }
    }

    /// New data (or our SYN/FIN) is acknowledged up to `ack`.
    fn acknowledge(&mut self, ack: Seq, acked: usize, ctx: &mut Ctx<'_>) {
        // The SYN occupies the first sequence number, a FIN the last.
        let mut data_acked = acked;
        if self.snd_una == self.iss {
            data_acked -= 1;
        }
        let data_acked = data_acked.min(self.send_queue.len());
        let _ = self.send_queue.trim_front(data_acked);
        self.send_queue_seq = self.send_queue_seq.wrapping_add(data_acked);
        self.snd_una = ack;
        if self.snd_nxt.lt(ack) {
            self.snd_nxt = ack;
        }
        if self.snd_max.lt(ack) {
            // The peer took our window probe.
            self.snd_max = ack;
            self.probe_sent = false;
        }
        self.dup_acks = 0;
        self.retries = 0;
        self.take_rtt_sample(ack, ctx);
        let flight = self.snd_max.since(self.snd_una);
        let partial = self.cc.on_ack(acked, ack, flight);
        self.trace_cwnd(ctx);
        // RFC 6298 §5.2/§5.3: stop the timer when all is acknowledged,
        // restart it otherwise.
        self.rexmit_at = (flight > 0).then(|| ctx.now + self.rtt.rto());
        if partial {
            // RFC 6582 §3.2 step 3: retransmit the first unacknowledged
            // segment.
            self.retransmit_first(ctx);
        }
        self.maybe_credit(ctx);
    }

    fn maybe_credit(&mut self, ctx: &mut Ctx<'_>) {
        if self.want_credit && self.send_credit() > 0 {
            self.want_credit = false;
            ctx.events.push(ConnEvent::SendCredit);
        }
    }

    /// Karn's rule (RFC 6298 §3): only a segment sent once is timed, and
    /// timing stops at any retransmission.
    fn take_rtt_sample(&mut self, ack: Seq, ctx: &mut Ctx<'_>) {
        if let Some((seq, sent)) = self.rtt_timed {
            if ack.gt(seq) {
                let rtt = ctx.now.saturating_since(sent);
                self.rtt.sample(rtt);
                self.rtt_timed = None;
                ctx.trace(TraceKind::RttSample {
                    rtt,
                    rto: self.rtt.rto(),
                });
            }
        }
    }

    fn trace_cwnd(&self, ctx: &mut Ctx<'_>) {
        ctx.trace(TraceKind::Cwnd {
            cwnd: self.cc.cwnd,
            ssthresh: self.cc.ssthresh,
        });
    }

    /// In-order data goes to the application (or is held while paused);
    /// later data waits in the out-of-order queue.
    fn receive_data(&mut self, seq: Seq, payload: IoBuf, ctx: &mut Ctx<'_>) {
        if seq != self.rcv_nxt {
            self.store_out_of_order(seq, payload);
            // RFC 5681 §4.2: an out-of-order segment is acknowledged at
            // once (it produces the duplicate ACKs of fast retransmit).
            self.ack_pending = true;
            self.ack_now = true;
            return;
        }
        let full_sized = payload.len() >= self.smss;
        self.rcv_nxt = self.rcv_nxt.wrapping_add(payload.len());
        let mut data = IoChain::from(payload);
        let filled_hole = !self.out_of_order.is_empty();
        self.pull_out_of_order(&mut data);
        self.deliver(data, ctx);
        self.ack_pending = true;
        self.unacked_segments += 1;
        // RFC 5681 §4.2: ACK at least every second full-sized segment, and
        // at once when a hole is filled; otherwise within the delay
        // (RFC 1122 §4.2.3.2).
        if filled_hole
            || (full_sized && self.unacked_segments >= 2)
            || self.config.delayed_ack.is_zero()
        {
            self.ack_now = true;
        } else if self.delack_at.is_none() {
            self.delack_at = Some(ctx.now + self.config.delayed_ack);
        }
        if let Some(fin) = self.out_of_order_fin {
            if fin == self.rcv_nxt {
                self.out_of_order_fin = None;
                self.receive_fin(ctx);
            }
        }
    }

    fn deliver(&mut self, data: IoChain, ctx: &mut Ctx<'_>) {
        if data.is_empty() {
            return;
        }
        if self.paused {
            let mut data = data;
            self.held.append(&mut data);
        } else {
            ctx.events.push(ConnEvent::Data(data));
        }
    }

    fn store_out_of_order(&mut self, seq: Seq, payload: IoBuf) {
        let position = self
            .out_of_order
            .iter()
            .position(|(s, _)| s.ge(seq))
            .unwrap_or(self.out_of_order.len());
        if let Some((s, b)) = self.out_of_order.get(position) {
            if *s == seq && b.len() >= payload.len() {
                return; // a duplicate
            }
        }
        if self.out_of_order.len() >= self.config.max_out_of_order {
            return;
        }
        self.out_of_order.insert(position, (seq, payload));
    }

    /// Moves what became contiguous from the out-of-order queue to `data`.
    fn pull_out_of_order(&mut self, data: &mut IoChain) {
        while let Some((seq, _)) = self.out_of_order.first() {
            let seq = *seq;
            if seq.gt(self.rcv_nxt) {
                break;
            }
            let (_, mut buf) = self.out_of_order.remove(0);
            let overlap = self.rcv_nxt.since(seq);
            if overlap >= buf.len() {
                continue;
            }
            let _ = buf.trim_front(overlap);
            self.rcv_nxt = self.rcv_nxt.wrapping_add(buf.len());
            data.push_back(buf);
        }
    }

    /// Eighth step: the peer's FIN is in order.
    fn receive_fin(&mut self, ctx: &mut Ctx<'_>) {
        self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
        self.ack_pending = true;
        self.ack_now = true;
        if self.paused {
            self.held_fin = true;
        } else {
            ctx.events.push(ConnEvent::PeerClosed);
        }
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.fin_acked() {
                    self.enter_time_wait(ctx);
                } else {
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(ctx),
            State::TimeWait => self.time_wait_until = Some(ctx.now + self.config.msl * 2),
            _ => {}
        }
    }

    fn enter_time_wait(&mut self, ctx: &mut Ctx<'_>) {
        self.state = State::TimeWait;
        self.time_wait_until = Some(ctx.now + self.config.msl * 2);
        self.rexmit_at = None;
        self.persist_at = None;
        self.delack_at = None;
    }

    /// The sequence number of our FIN, once the application closed.
    fn fin_seq(&self) -> Option<Seq> {
        self.fin_queued
            .then(|| self.data_start().wrapping_add(self.send_queue.len()))
    }

    fn fin_acked(&self) -> bool {
        self.fin_seq().is_some_and(|fin| self.snd_una.gt(fin))
    }

    /// The sequence number of the first byte in the send queue.
    fn data_start(&self) -> Seq {
        self.send_queue_seq
    }

    // ----- OUTPUT -----

    /// A segment from us at `seq`, with the ACK and window we have now.
    fn segment(&self, seq: Seq, mut flags: Flags) -> OutSegment {
        // Every segment but the first SYN and a RST carries an ACK.
        flags.ack = self.state != State::SynSent && !flags.rst;
        let syn = flags.syn;
        let window = if syn {
            self.rcv_wnd().min(0xffff)
        } else {
            (self.rcv_wnd() >> self.rcv_wscale).min(0xffff)
        };
        OutSegment {
            src: self.ends.local,
            dst: self.ends.remote,
            seq,
            ack: self.rcv_nxt,
            flags,
            window: u16::try_from(window).unwrap_or(u16::MAX),
            mss: syn.then_some(self.our_mss),
            window_scale: (syn && self.offered_wscale).then_some(self.rcv_wscale),
            payload: IoChain::new(),
        }
    }

    /// A RST answering an unacceptable ACK: <SEQ=SEG.ACK><CTL=RST>.
    fn reset_for(&self, ack: Seq) -> OutSegment {
        OutSegment {
            src: self.ends.local,
            dst: self.ends.remote,
            seq: ack,
            flags: Flags {
                rst: true,
                ..Flags::default()
            },
            ..OutSegment::default()
        }
    }

    /// Sends `segment`, noting the window we advertised and the ACK.
    fn transmit(&mut self, segment: OutSegment, retransmission: bool, ctx: &mut Ctx<'_>) {
        if segment.flags.ack {
            self.ack_pending = false;
            self.ack_now = false;
            self.delack_at = None;
            self.unacked_segments = 0;
            let shift = if segment.flags.syn {
                0
            } else {
                self.rcv_wscale
            };
            let edge = self
                .rcv_nxt
                .wrapping_add(usize::from(segment.window) << shift);
            self.rcv_adv = self.rcv_adv.max(edge);
        }
        if retransmission {
            self.retransmissions += 1;
        }
        ctx.trace(TraceKind::Sent {
            seq: segment.seq,
            ack: segment.ack,
            len: segment.payload.len(),
            flags: segment.flags,
            window: segment.window,
            retransmission,
        });
        ctx.out.push(segment);
    }

    /// Sends what the state, the windows and the queue allow, then a bare
    /// ACK if one is owed now.
    pub fn output(&mut self, ctx: &mut Ctx<'_>) {
        match self.state {
            State::Closed => return,
            State::SynSent | State::SynReceived => {
                if self.snd_nxt == self.iss {
                    let syn = self.segment(
                        self.iss,
                        Flags {
                            syn: true,
                            ..Flags::default()
                        },
                    );
                    let again = self.snd_max != self.iss;
                    self.transmit(syn, again, ctx);
                    if !again {
                        self.rtt_timed = Some((self.iss, ctx.now));
                    }
                    self.snd_nxt = self.iss.wrapping_add(1);
                    self.snd_max = self.snd_max.max(self.snd_nxt);
                    self.rexmit_at = Some(ctx.now + self.rtt.rto());
                }
                return;
            }
            State::TimeWait => {}
            _ => self.send_data(ctx),
        }
        if self.ack_pending && self.ack_now {
            // A bare ACK carries SND.MAX: after a timeout SND.NXT went back
            // below what the peer may already have (RCV.NXT), and a
            // sequence number below its RCV.NXT would make the segment
            // unacceptable there (and its ACK field ignored).
            let ack = self.segment(self.snd_max, Flags::default());
            self.transmit(ack, false, ctx);
        }
    }

    fn send_data(&mut self, ctx: &mut Ctx<'_>) {
        loop {
            let start = self.data_start();
            let offset = self.snd_nxt.since(start);
            let unsent = self.send_queue.len().saturating_sub(offset);
            let fin_pending = self.fin_seq().is_some_and(|fin| self.snd_nxt.le(fin))
                && matches!(
                    self.state,
                    State::FinWait1 | State::Closing | State::LastAck
                );
            let flight = self.snd_nxt.since(self.snd_una);
            let usable = self.cc.cwnd.min(self.snd_wnd).saturating_sub(flight);
            let len = unsent.min(self.smss).min(usable);
            // Sender silly window avoidance (RFC 9293 §3.8.6.2.1), without
            // Nagle: a full segment, everything queued, or anything when
            // nothing is in flight.
            let worth_it = len == self.smss || len == unsent || flight == 0;
            if (len == 0 || !worth_it) && !(fin_pending && unsent == 0) {
                break;
            }
            let fin = fin_pending && len == unsent;
            let seq = self.snd_nxt;
            let retransmission = seq.lt(self.snd_max);
            let mut segment = self.segment(
                seq,
                Flags {
                    fin,
                    psh: len > 0 && len == unsent,
                    ..Flags::default()
                },
            );
            segment.payload = chain_range(&self.send_queue, offset, len);
            self.transmit(segment, retransmission, ctx);
            if !retransmission && self.rtt_timed.is_none() {
                self.rtt_timed = Some((seq, ctx.now));
            }
            self.snd_nxt = seq.wrapping_add(len + usize::from(fin));
            self.snd_max = self.snd_max.max(self.snd_nxt);
            if self.rexmit_at.is_none() {
                // RFC 6298 §5.1.
                self.rexmit_at = Some(ctx.now + self.rtt.rto());
            }
            if fin {
                break;
            }
        }
        // Zero window with data waiting and nothing in flight: probe
        // (RFC 9293 §3.8.6.1).
        let unsent = self.send_queue.len() > self.snd_nxt.since(self.data_start());
        if self.snd_wnd == 0 && unsent && self.snd_max == self.snd_una {
            if self.persist_at.is_none() {
                self.persist_at = Some(ctx.now + self.persist_interval());
            }
        } else if self.snd_wnd > 0 {
            self.persist_at = None;
        }
    }

    fn persist_interval(&self) -> Duration {
        let factor = 1u32 << self.persist_backoff.min(10);
        self.rtt
            .rto()
            .saturating_mul(factor)
            .min(self.config.max_rto)
    }

    /// Resends the first unacknowledged segment (fast retransmit, partial
    /// ACK): the same buffers, at SND.UNA.
    fn retransmit_first(&mut self, ctx: &mut Ctx<'_>) {
        self.rtt_timed = None;
        let start = self.data_start();
        let offset = self.snd_una.since(start);
        let len = self.send_queue.len().saturating_sub(offset).min(self.smss);
        let fin = len == 0 && self.fin_seq() == Some(self.snd_una);
        if len == 0 && !fin {
            return;
        }
        let mut segment = self.segment(
            self.snd_una,
            Flags {
                fin,
                ..Flags::default()
            },
        );
        segment.payload = chain_range(&self.send_queue, offset, len);
        self.transmit(segment, true, ctx);
        self.rexmit_at = Some(ctx.now + self.rtt.rto());
    }

    // ----- TIMEOUTS (RFC 9293 §3.10.8) -----

    /// The earliest timer, if any.
    #[must_use]
    pub fn poll_at(&self) -> Option<Instant> {
        [
            self.rexmit_at,
            self.persist_at,
            self.delack_at,
            self.time_wait_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs the timers due at `ctx.now`.
    pub fn on_timer(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        if self.time_wait_until.is_some_and(|t| t <= now) {
            self.state = State::Closed;
            return;
        }
        if self.rexmit_at.is_some_and(|t| t <= now) {
            self.on_retransmission_timeout(ctx);
            if self.state == State::Closed {
                return;
            }
        }
        if self.persist_at.is_some_and(|t| t <= now) {
            self.persist_at = None;
            self.send_window_probe(ctx);
        }
        if self.delack_at.is_some_and(|t| t <= now) {
            self.delack_at = None;
            self.ack_now = true;
        }
        self.output(ctx);
    }

    /// RFC 6298 §5.4–§5.6 and RFC 5681 §3.1: retransmit the earliest
    /// unacknowledged segment, back off, collapse cwnd.
    fn on_retransmission_timeout(&mut self, ctx: &mut Ctx<'_>) {
        self.rexmit_at = None;
        self.retries += 1;
        let limit = if self.state.synchronized() {
            self.config.max_retries
        } else {
            self.config.max_syn_retries
        };
        if self.retries > limit {
            let error = if self.state.synchronized() {
                NetError::ConnectionReset
            } else {
                NetError::ConnectionRefused
            };
            if !(self.passive && self.state == State::SynReceived) {
                ctx.events.push(ConnEvent::Aborted(error));
            }
            self.state = State::Closed;
            return;
        }
        ctx.trace(TraceKind::Timeout {
            rto: self.rtt.rto(),
        });
        let first = self.rtt.backoff() == 0;
        self.rtt.back_off();
        // Karn's rule: nothing sent before is timed any more.
        self.rtt_timed = None;
        let flight = self.snd_max.since(self.snd_una);
        if self.state.synchronized() {
            self.cc.on_rto(flight, self.snd_max, first);
            self.trace_cwnd(ctx);
        }
        self.dup_acks = 0;
        // Go back to SND.UNA; output sends the first segment again and
        // restarts the timer with the backed-off RTO.
        self.snd_nxt = self.snd_una;
        if self.state.synchronized() {
            self.retransmit_first(ctx);
            let len = self
                .send_queue
                .len()
                .saturating_sub(self.snd_una.since(self.data_start()))
                .min(self.smss);
            let fin = len == 0 && self.fin_seq() == Some(self.snd_una);
            self.snd_nxt = self.snd_una.wrapping_add(len + usize::from(fin));
        }
    }

    /// A one-byte probe beyond the zero window (RFC 9293 §3.8.6.1); its
    /// ACK reports the window. SND.NXT and SND.MAX stay; an ACK covering
    /// the byte is acceptable while the probe is out.
    fn send_window_probe(&mut self, ctx: &mut Ctx<'_>) {
        let start = self.data_start();
        let offset = self.snd_nxt.since(start);
        if offset >= self.send_queue.len() || self.snd_wnd > 0 {
            return;
        }
        let mut probe = self.segment(self.snd_nxt, Flags::default());
        probe.payload = chain_range(&self.send_queue, offset, 1);
        let retransmission = self.probe_sent;
        self.transmit(probe, retransmission, ctx);
        self.probe_sent = true;
        self.persist_backoff += 1;
        self.persist_at = Some(ctx.now + self.persist_interval());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_range_takes_views() {
        let mut chain = IoChain::new();
        chain.push_back(IoBuf::from_vec(alloc::vec![0, 1, 2]));
        chain.push_back(IoBuf::from_vec(alloc::vec![3, 4, 5, 6]));
        let part = chain_range(&chain, 2, 3);
        assert_eq!(part.to_vec(), alloc::vec![2, 3, 4]);
        assert_eq!(part.segment_count(), 2);
        let first = chain.segments().next().unwrap();
        assert_eq!(
            part.segments().next().unwrap().as_ptr(),
            first.as_ptr().wrapping_add(2)
        );
        assert!(chain_range(&chain, 7, 3).is_empty());
    }

    #[test]
    fn window_shift_fits_sixteen_bits() {
        assert_eq!(window_shift(65_535), 0);
        assert_eq!(window_shift(65_536), 1);
        assert_eq!(window_shift(1 << 20), 5);
        assert_eq!(window_shift(usize::MAX), 14);
    }
}
