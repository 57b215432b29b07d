//! Sending: segments with the current ACK and window, data within the
//! windows, retransmission of the first unacknowledged segment.

use core::time::Duration;

use ebb_iobuf::IoChain;

use super::super::segment::{Flags, OutSegment};
use super::super::seq::Seq;
use super::super::trace::TraceKind;
use super::{Ctx, State, Tcb};

/// The views of `len` bytes at `offset` in `chain` (no copy).
pub(super) fn chain_range(chain: &IoChain, mut offset: usize, mut len: usize) -> IoChain {
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

impl Tcb {
    // ----- OUTPUT -----

    /// A segment from us at `seq`, with the ACK and window we have now.
    pub(super) fn segment(&self, seq: Seq, mut flags: Flags) -> OutSegment {
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
    pub(super) fn reset_for(&self, ack: Seq) -> OutSegment {
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
    pub(super) fn transmit(
        &mut self,
        segment: OutSegment,
        retransmission: bool,
        ctx: &mut Ctx<'_>,
    ) {
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
            // unacceptable there (and its ACK field ignored). Nor may it be
            // past the window the peer offers (SND.UNA + SND.WND): when
            // that window closed with our data beyond it unaccepted, a
            // zero-window peer accepts only SEG.SEQ = RCV.NXT (RFC 9293
            // §3.10.7.4), and an ACK it drops can be the one that would
            // have let it send, and so reopen its window (as Linux's
            // `tcp_acceptable_seq`).
            // With the window open, the edge itself is one past what the
            // peer accepts (SEG.SEQ < RCV.NXT + RCV.WND; Linux is lenient
            // there, our own `acceptable` is not): its last byte.
            let window_edge = self.snd_una.wrapping_add(self.snd_wnd);
            let last_acceptable = if self.snd_wnd == 0 {
                window_edge
            } else {
                Seq(window_edge.0.wrapping_sub(1))
            };
            let seq = if self.snd_max.gt(last_acceptable) {
                last_acceptable
            } else {
                self.snd_max
            };
            let ack = self.segment(seq, Flags::default());
            self.transmit(ack, false, ctx);
        }
    }

    pub(super) fn send_data(&mut self, ctx: &mut Ctx<'_>) {
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

    pub(super) fn persist_interval(&self) -> Duration {
        let factor = 1u32 << self.persist_backoff.min(10);
        self.rtt
            .rto()
            .saturating_mul(factor)
            .min(self.config.max_rto)
    }

    /// Resends the first unacknowledged segment (fast retransmit, partial
    /// ACK, timeout): the same buffers, at SND.UNA. Returns the sequence
    /// space it covers.
    ///
    /// A FIN already sent right after that data goes in the same segment,
    /// as it first went: sent apart, the data and the FIN would draw two
    /// ACKs, and if the first closed our side (LAST-ACK), the second would
    /// find no connection and draw an RST that ends the peer's TIME-WAIT.
    ///
    /// It resends only what was sent (up to SND.MAX): the first segment
    /// may have been cut short by the peer's window, and a full-sized
    /// retransmission would carry new data past SND.MAX. A peer whose
    /// window has reopened takes it and acknowledges beyond SND.MAX, an
    /// ACK we must drop as acknowledging unsent data (RFC 9293 §3.10.7.4),
    /// so both ends would wait for each other until the retries ran out.
    pub(super) fn retransmit_first(&mut self, ctx: &mut Ctx<'_>) -> usize {
        self.rtt_timed = None;
        let start = self.data_start();
        let offset = self.snd_una.since(start);
        let sent = self.snd_max.since(self.snd_una);
        let len = self
            .send_queue
            .len()
            .saturating_sub(offset)
            .min(self.smss)
            .min(sent);
        let end = self.snd_una.wrapping_add(len);
        let fin = self.fin_seq() == Some(end) && self.snd_max.gt(end);
        if len == 0 && !fin {
            return 0;
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
        len + usize::from(fin)
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use ebb_iobuf::IoBuf;

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

    /// A connection whose peer closed its window with 280 of our bytes
    /// sent beyond it and unaccepted (the tail of a stall seen in the
    /// paused-echo simulation with 2 % loss).
    fn established_against_a_closed_window() -> Tcb {
        let config = super::super::super::TcpConfig::default();
        let ends = super::super::Endpoints {
            local: (core::net::Ipv4Addr::new(10, 0, 0, 1), 1000),
            remote: (core::net::Ipv4Addr::new(10, 0, 0, 2), 7),
        };
        let mut tcb = Tcb::new(&config, ends, Seq(1000), 1500);
        tcb.state = State::Established;
        tcb.snd_una = Seq(5000);
        tcb.snd_nxt = Seq(5280);
        tcb.snd_max = Seq(5280);
        tcb.snd_wnd = 0;
        tcb.rcv_nxt = Seq(9000);
        tcb.ack_pending = true;
        tcb.ack_now = true;
        tcb
    }

    /// Runs `output` once; the bare ACK it owed.
    fn owed_ack(tcb: &mut Tcb) -> OutSegment {
        let mut out = Vec::new();
        let mut events = Vec::new();
        let mut trace = super::super::super::trace::Trace::default();
        let mut ctx = Ctx {
            now: ebb_event::Instant(0),
            id: 1,
            out: &mut out,
            events: &mut events,
            trace: &mut trace,
        };
        tcb.output(&mut ctx);
        out.pop().expect("the owed ACK was sent")
    }

    #[test]
    fn a_bare_ack_stays_inside_the_window_the_peer_offers() {
        let mut tcb = established_against_a_closed_window();
        let ack = owed_ack(&mut tcb);
        assert!(ack.flags.ack && ack.payload.is_empty());
        // RCV.NXT at a zero-window peer: the only acceptable SEG.SEQ.
        assert_eq!(ack.seq, Seq(5000));
        assert_eq!(ack.ack, Seq(9000));
    }

    #[test]
    fn a_bare_ack_past_an_open_window_takes_its_last_byte() {
        let mut tcb = established_against_a_closed_window();
        // The peer shrank its window to 100 bytes with our 280 out.
        tcb.snd_wnd = 100;
        let ack = owed_ack(&mut tcb);
        // RCV.NXT = 5000 and RCV.WND = 100 at the peer: 5099 is the last
        // acceptable sequence number (RFC 9293 §3.10.7.4).
        assert_eq!(ack.seq, Seq(5099));
    }

    #[test]
    fn a_bare_ack_carries_snd_max_when_the_window_covers_it() {
        let mut tcb = established_against_a_closed_window();
        tcb.snd_wnd = 65_535;
        // As after a timeout: SND.NXT went back to SND.UNA.
        tcb.snd_nxt = Seq(5000);
        tcb.send_queue = IoChain::new();
        let ack = owed_ack(&mut tcb);
        assert_eq!(ack.seq, Seq(5280));
    }
}
