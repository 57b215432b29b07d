//! SEGMENT ARRIVES (RFC 9293 §3.10.7): acceptability, RST and SYN
//! checks, ACK processing, data and FIN.

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::NetError;

use super::super::congestion::DupAckAction;
use super::super::segment::Segment;
use super::super::seq::Seq;
use super::super::trace::TraceKind;
use super::{ConnEvent, Ctx, State, Tcb};

/// Segments a paused connection holds before it gathers them into one
/// buffer of its own (see `Tcb::deliver`).
pub const MAX_HELD_SEGMENTS: usize = 16;

impl Tcb {
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
    pub(super) fn input_syn_sent(&mut self, seg: &Segment, ctx: &mut Ctx<'_>) {
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
            self.rtt.restart_after_lost_syn();
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
    pub(super) fn input_synchronized(&mut self, mut seg: Segment, ctx: &mut Ctx<'_>) {
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
                    self.time_wait_until = Some(ctx.now + self.config.msl.saturating_mul(2));
                }
                // With a zero window nothing is acceptable, "but special
                // allowance should be made to accept valid ACKs": the
                // peer's window probes carry them.
                if self.rcv_wnd() == 0
                    && self.state.synchronized()
                    && seg.flags.ack
                    && !seg.flags.syn
                    && seg.seq == self.rcv_nxt
                    && seg.ack.le(self.ack_limit())
                {
                    self.process_ack(&seg, ctx);
                }
                self.ack_unusable(ctx.now);
            }
            return;
        }
        self.trim_to_window(&mut seg);
        // Second, check the RST bit (RFC 5961 §3.2: exact match resets,
        // anything else in the window gets a challenge ACK).
        if seg.flags.rst {
            if seg.seq != self.rcv_nxt {
                self.ack_unusable(ctx.now);
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
            self.ack_unusable(ctx.now);
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
                self.rtt.restart_after_lost_syn();
                ctx.events.push(ConnEvent::Established);
            } else {
                ctx.out.push(self.reset_for(seg.ack));
                return;
            }
        }
        if seg.ack.gt(self.ack_limit()) {
            // Acknowledges something not yet sent: ACK and drop.
            self.ack_unusable(ctx.now);
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

    /// An ACK answering a segment we cannot use (out of the window, a
    /// challenge, an ACK of unsent data), at most one per
    /// `invalid_ack_interval` (RFC 5961 §7 limits challenge ACKs; Linux
    /// does the same for all of these): two ends that lost sync — say,
    /// after spoofed data — would otherwise answer each other's ACKs
    /// forever.
    fn ack_unusable(&mut self, now: Instant) {
        let interval = self.config.invalid_ack_interval;
        if self
            .last_unusable_ack
            .is_some_and(|t| now.saturating_since(t) < interval)
        {
            return;
        }
        self.last_unusable_ack = Some(now);
        self.ack_pending = true;
        self.ack_now = true;
    }

    /// The highest acceptable SEG.ACK.
    pub(super) fn ack_limit(&self) -> Seq {
        self.snd_max.wrapping_add(usize::from(self.probe_sent))
    }

    /// The window we accept now (at least the advertised one).
    pub(super) fn rcv_wnd(&self) -> usize {
        let room = self.rcv_buf.saturating_sub(self.held.len());
        let room = if self.rcv_wscale == 0 {
            room.min(0xffff)
        } else {
            room
        };
        room.max(self.rcv_adv.since(self.rcv_nxt))
    }

    /// RFC 9293 §3.10.7.4, the four cases of segment acceptability.
    pub(super) fn acceptable(&self, seg: &Segment) -> bool {
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
    pub(super) fn trim_to_window(&self, seg: &mut Segment) {
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
    pub(super) fn process_ack(&mut self, seg: &Segment, ctx: &mut Ctx<'_>) {
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
    pub(super) fn acknowledge(&mut self, ack: Seq, acked: usize, ctx: &mut Ctx<'_>) {
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

    pub(super) fn maybe_credit(&mut self, ctx: &mut Ctx<'_>) {
        if self.want_credit && self.send_credit() > 0 {
            self.want_credit = false;
            ctx.events.push(ConnEvent::SendCredit);
        }
    }

    /// Karn's rule (RFC 6298 §3): only a segment sent once is timed, and
    /// timing stops at any retransmission.
    pub(super) fn take_rtt_sample(&mut self, ack: Seq, ctx: &mut Ctx<'_>) {
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

    pub(super) fn trace_cwnd(&self, ctx: &mut Ctx<'_>) {
        ctx.trace(TraceKind::Cwnd {
            cwnd: self.cc.cwnd,
            ssthresh: self.cc.ssthresh,
        });
    }

    /// In-order data goes to the application (or is held while paused);
    /// later data waits in the out-of-order queue.
    pub(super) fn receive_data(&mut self, seq: Seq, payload: IoBuf, ctx: &mut Ctx<'_>) {
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

    pub(super) fn deliver(&mut self, data: IoChain, ctx: &mut Ctx<'_>) {
        if data.is_empty() {
            return;
        }
        if self.paused {
            let mut data = data;
            self.held.append(&mut data);
            // Data held for a paused application is gathered into memory of
            // its own every few segments, so that it gives the device's
            // receive buffers back: a paused connection may hold up to its
            // whole window (1 MiB, hundreds of frames), and a few of them
            // holding frames emptied native virtio-net's receive ring, after
            // which the guest received nothing, not even the ACKs that would
            // let it drain (issue 15, defect 8). `coalesce` copies each byte
            // O(1) times in all.
            if self.held.segment_count() > MAX_HELD_SEGMENTS {
                self.held.coalesce();
            }
        } else {
            ctx.events.push(ConnEvent::Data(data));
        }
    }

    pub(super) fn store_out_of_order(&mut self, seq: Seq, payload: IoBuf) {
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
    pub(super) fn pull_out_of_order(&mut self, data: &mut IoChain) {
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
    pub(super) fn receive_fin(&mut self, ctx: &mut Ctx<'_>) {
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
            State::TimeWait => {
                self.time_wait_until = Some(ctx.now + self.config.msl.saturating_mul(2))
            }
            _ => {}
        }
    }

    pub(super) fn enter_time_wait(&mut self, ctx: &mut Ctx<'_>) {
        self.state = State::TimeWait;
        self.time_wait_until = Some(ctx.now + self.config.msl.saturating_mul(2));
        self.rexmit_at = None;
        self.persist_at = None;
        self.delack_at = None;
    }

    /// The sequence number of our FIN, once the application closed.
    pub(super) fn fin_seq(&self) -> Option<Seq> {
        self.fin_queued
            .then(|| self.data_start().wrapping_add(self.send_queue.len()))
    }

    pub(super) fn fin_acked(&self) -> bool {
        self.fin_seq().is_some_and(|fin| self.snd_una.gt(fin))
    }

    /// The sequence number of the first byte in the send queue.
    pub(super) fn data_start(&self) -> Seq {
        self.send_queue_seq
    }
}
