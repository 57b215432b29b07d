//! TIMEOUTS (RFC 9293 §3.10.8): retransmission (RFC 6298 §5), zero-window
//! probes (RFC 9293 §3.8.6.1), delayed ACKs, TIME-WAIT.

use ebb_event::Instant;
use ebb_net::NetError;

use super::super::segment::Flags;
use super::super::trace::TraceKind;
use super::output::chain_range;
use super::{ConnEvent, Ctx, State, Tcb};

impl Tcb {
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

    /// Whether this is a TIME-WAIT whose 2·MSL is over at `now`.
    #[must_use]
    pub fn time_wait_over(&self, now: Instant) -> bool {
        self.time_wait_until.is_some_and(|t| t <= now)
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
    pub(super) fn on_retransmission_timeout(&mut self, ctx: &mut Ctx<'_>) {
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
            let covered = self.retransmit_first(ctx);
            self.snd_nxt = self.snd_una.wrapping_add(covered);
        }
    }

    /// A one-byte probe beyond the zero window (RFC 9293 §3.8.6.1); its
    /// ACK reports the window. SND.NXT and SND.MAX stay; an ACK covering
    /// the byte is acceptable while the probe is out.
    pub(super) fn send_window_probe(&mut self, ctx: &mut Ctx<'_>) {
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
