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
//!
//! `input.rs` handles arriving segments, `output.rs` sends, `timers.rs`
//! runs the timeouts.

mod input;
mod output;
mod timers;

use alloc::vec::Vec;
use core::net::Ipv4Addr;
use core::time::Duration;

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::NetError;

use super::congestion::NewReno;
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
    /// When we last answered an unusable segment (see `ack_unusable`).
    last_unusable_ack: Option<Instant>,
    retransmissions: u64,
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
            last_unusable_ack: None,
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

    /// [`Tcb::send_credit`] as the application asks for it: an answer of 0
    /// also asks to hear when the credit grows again. The credit can fall
    /// to 0 with no send using it up (the peer's window closing as our
    /// queue drains into it), and an application that pauses on that 0
    /// must still be resumed (`TcpHandler::on_send_credit`).
    pub fn send_credit_for_application(&mut self) -> usize {
        let credit = self.send_credit();
        if credit == 0 {
            self.want_credit = true;
        }
        credit
    }

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
        // A send that exhausts the credit asks to hear when it grows again
        // (an application that pauses on zero credit relies on it).
        if data.len() >= credit {
            self.want_credit = true;
        }
        if data.len() > credit && !all {
            let offered = data.len();
            return Err((NetError::NoCredit { credit, offered }, data));
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
    /// reopens (a window update goes out if the pause held data).
    pub fn resume(&mut self, ctx: &mut Ctx<'_>) {
        if !self.paused {
            return;
        }
        self.paused = false;
        let held = core::mem::take(&mut self.held);
        // Only held data shrank the window we advertise (`rcv_wnd`): a
        // pause that held nothing (a request answered late, as a forwarded
        // memcached get is) left the peer's view right, and a window
        // update would be a bare ACK just after the answer that carried
        // the same ACK (RFC 9293 §3.8.6.2.2: no update the peer does not
        // need).
        let window_shrank = !held.is_empty();
        if window_shrank {
            ctx.events.push(ConnEvent::Data(held));
        }
        if core::mem::take(&mut self.held_fin) {
            ctx.events.push(ConnEvent::PeerClosed);
        }
        if self.state.synchronized() {
            if window_shrank {
                self.ack_now = true;
                self.ack_pending = true;
            }
            self.output(ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_shift_fits_sixteen_bits() {
        assert_eq!(window_shift(65_535), 0);
        assert_eq!(window_shift(65_536), 1);
        assert_eq!(window_shift(1 << 20), 5);
        assert_eq!(window_shift(usize::MAX), 14);
    }
}
