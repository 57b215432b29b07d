//! Congestion control: RFC 5681 slow start and congestion avoidance with
//! NewReno fast retransmit / fast recovery (RFC 6582), counting bytes
//! acknowledged in slow start as RFC 3465 (L = 2·SMSS) does, so that cwnd
//! doubles once per RTT even when the receiver delays its ACKs.

use super::seq::Seq;

/// One connection's congestion state.
#[derive(Clone, Copy, Debug)]
pub struct NewReno {
    /// cwnd, in bytes.
    pub cwnd: usize,
    /// ssthresh, in bytes.
    pub ssthresh: usize,
    /// SMSS.
    smss: usize,
    /// In fast recovery until `recover` is acknowledged (RFC 6582 §3.2).
    pub in_recovery: bool,
    /// `recover`: the highest sequence number sent when recovery started
    /// (RFC 6582 §3.2 step 1 initialises it to ISS).
    pub recover: Seq,
    /// Bytes acknowledged in congestion avoidance not yet turned into cwnd
    /// growth (RFC 5681 §3.1, the byte-counting variant).
    bytes_acked: usize,
}

/// What a duplicate ACK asks the sender to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DupAckAction {
    /// Nothing beyond maybe sending new data.
    None,
    /// Retransmit the first unacknowledged segment now (fast retransmit).
    FastRetransmit,
}

impl NewReno {
    /// The initial window of RFC 5681 §3.1: min(4·SMSS, max(2·SMSS, 4380)).
    #[must_use]
    pub fn new(smss: usize, iss: Seq) -> Self {
        NewReno {
            cwnd: initial_window(smss),
            // §3.1: "the initial value of ssthresh SHOULD be set
            // arbitrarily high".
            ssthresh: usize::MAX,
            smss,
            in_recovery: false,
            recover: iss,
            bytes_acked: 0,
        }
    }

    /// SMSS changed (the handshake settled the MSS): restart the initial
    /// window with it.
    pub fn set_smss(&mut self, smss: usize) {
        self.smss = smss;
        self.cwnd = initial_window(smss);
    }

    /// Whether cwnd < ssthresh (slow start, RFC 5681 §3.1).
    #[must_use]
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// An ACK acknowledged `acked` new bytes and moved SND.UNA to `ack`;
    /// `flight` is what is still outstanding after it. Returns whether the
    /// ACK was partial during recovery (RFC 6582 §3.2 step 3: retransmit
    /// the first unacknowledged segment).
    pub fn on_ack(&mut self, acked: usize, ack: Seq, flight: usize) -> bool {
        if self.in_recovery {
            if ack.gt(self.recover) || ack == self.recover {
                // RFC 6582 §3.2 step 3, full acknowledgment, option (1):
                // cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
                self.in_recovery = false;
                self.cwnd = self.ssthresh.min(flight.max(self.smss) + self.smss);
                self.bytes_acked = 0;
                return false;
            }
            // Partial acknowledgment: deflate by the amount acknowledged,
            // add back one SMSS if that was at least SMSS.
            self.cwnd = self.cwnd.saturating_sub(acked);
            if acked >= self.smss {
                self.cwnd += self.smss;
            }
            self.cwnd = self.cwnd.max(self.smss);
            return true;
        }
        if self.in_slow_start() {
            // RFC 5681 §3.1 (3.2), with RFC 3465 §2.2's limit L = 2·SMSS.
            self.cwnd = self.cwnd.saturating_add(acked.min(2 * self.smss));
        } else {
            // RFC 5681 §3.1 congestion avoidance, byte counting: one SMSS
            // per cwnd of acknowledged bytes.
            self.bytes_acked += acked;
            if self.bytes_acked >= self.cwnd {
                self.bytes_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(self.smss);
            }
        }
        false
    }

    /// The `count`-th duplicate ACK in a row arrived (RFC 5681 §3.2);
    /// `flight` is FlightSize and `snd_max` the highest sequence number
    /// sent; `ack` the duplicated acknowledgment.
    pub fn on_dup_ack(
        &mut self,
        count: u32,
        ack: Seq,
        flight: usize,
        snd_max: Seq,
    ) -> DupAckAction {
        if self.in_recovery {
            // RFC 5681 §3.2 step 4: inflate by SMSS for each further
            // duplicate (a segment left the network).
            self.cwnd = self.cwnd.saturating_add(self.smss);
            return DupAckAction::None;
        }
        // RFC 6582 §3.2 step 2: enter recovery only if the ACK covers more
        // than `recover` (avoids multiple reductions in one window).
        if count == 3 && ack.gt(self.recover) {
            // RFC 5681 §3.2 step 2, equation (4).
            self.ssthresh = (flight / 2).max(2 * self.smss);
            self.recover = snd_max;
            // Step 3: cwnd = ssthresh + 3·SMSS.
            self.cwnd = self.ssthresh + 3 * self.smss;
            self.in_recovery = true;
            return DupAckAction::FastRetransmit;
        }
        DupAckAction::None
    }

    /// The retransmission timer expired (RFC 5681 §3.1 equation (4) and
    /// "cwnd MUST be set to no more than the loss window, LW").
    pub fn on_rto(&mut self, flight: usize, snd_max: Seq, first_expiry: bool) {
        // §3.1: on a second expiry for the same segment ssthresh is kept.
        if first_expiry {
            self.ssthresh = (flight / 2).max(2 * self.smss);
        }
        self.cwnd = self.smss;
        self.bytes_acked = 0;
        self.in_recovery = false;
        // RFC 6582 §3.2 step 4 note: after a timeout, recover = highest
        // sequence number sent.
        self.recover = snd_max;
    }
}

fn initial_window(smss: usize) -> usize {
    (4 * smss).min((2 * smss).max(4380))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_then_avoidance() {
        let mut cc = NewReno::new(1000, Seq(0));
        assert_eq!(cc.cwnd, 4000, "RFC 5681 IW for SMSS 1000");
        cc.on_ack(1000, Seq(1000), 0);
        assert_eq!(cc.cwnd, 5000);
        cc.on_ack(2000, Seq(3000), 0);
        assert_eq!(cc.cwnd, 7000, "delayed ACK of two segments adds 2 SMSS");
        cc.ssthresh = 7000;
        for i in 0..7 {
            cc.on_ack(1000, Seq(4000 + i * 1000), 0);
        }
        assert_eq!(cc.cwnd, 8000, "one SMSS per cwnd acknowledged");
    }

    #[test]
    fn third_dup_ack_halves_and_recovery_deflates() {
        let mut cc = NewReno::new(1000, Seq(0));
        cc.cwnd = 20_000;
        assert_eq!(
            cc.on_dup_ack(1, Seq(100), 20_000, Seq(20_100)),
            DupAckAction::None
        );
        assert_eq!(
            cc.on_dup_ack(2, Seq(100), 20_000, Seq(20_100)),
            DupAckAction::None
        );
        assert_eq!(
            cc.on_dup_ack(3, Seq(100), 20_000, Seq(20_100)),
            DupAckAction::FastRetransmit
        );
        assert_eq!(cc.ssthresh, 10_000);
        assert_eq!(cc.cwnd, 13_000);
        cc.on_dup_ack(4, Seq(100), 20_000, Seq(20_100));
        assert_eq!(cc.cwnd, 14_000);
        assert!(cc.on_ack(5000, Seq(5100), 15_000), "partial ACK");
        assert_eq!(cc.cwnd, 10_000);
        assert!(!cc.on_ack(15_000, Seq(20_100), 0), "full ACK");
        assert_eq!(cc.cwnd, 2000, "min(ssthresh, max(FlightSize, SMSS) + SMSS)");
        assert!(!cc.in_recovery);
    }
}
