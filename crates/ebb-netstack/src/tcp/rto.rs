//! The retransmission timeout (RFC 6298).
//!
//! SRTT and RTTVAR follow RFC 6298 §2 with α = 1/8, β = 1/4, K = 4 and a
//! clock granularity G of 1 ms; the RTO is clamped to
//! [`min_rto`, `max_rto`] (§2.4, §2.5) and doubles on each expiry (§5.5).

use core::time::Duration;

/// Clock granularity G (RFC 6298 §2).
const GRANULARITY: Duration = Duration::from_millis(1);

/// The RTT estimator and the current RTO of one connection.
#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    /// SRTT, once a first measurement was made.
    srtt: Option<Duration>,
    /// RTTVAR.
    rttvar: Duration,
    /// The RTO before back-off.
    base_rto: Duration,
    /// Expiries since the last new measurement or acknowledgment.
    backoff: u32,
    min_rto: Duration,
    max_rto: Duration,
}

impl RttEstimator {
    /// An estimator before any measurement: RTO = `initial` (RFC 6298 §2.1).
    #[must_use]
    pub fn new(initial: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            base_rto: initial.clamp(min_rto, max_rto),
            backoff: 0,
            min_rto,
            max_rto,
        }
    }

    /// Takes a measurement `r` (RFC 6298 §2.2, §2.3) and clears the
    /// back-off (§5.7: the RTO comes from the new estimate).
    pub fn sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                // §2.2: SRTT <- R, RTTVAR <- R/2.
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                // §2.3: RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'|
                //       SRTT <- (1 - alpha) * SRTT + alpha * R'
                let delta = srtt.abs_diff(r);
                self.rttvar = (self.rttvar.saturating_mul(3) / 4).saturating_add(delta / 4);
                self.srtt = Some((srtt.saturating_mul(7) / 8).saturating_add(r / 8));
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        // RTO <- SRTT + max (G, K*RTTVAR), then §2.4/§2.5 bounds.
        self.base_rto = srtt
            .saturating_add(GRANULARITY.max(self.rttvar.saturating_mul(4)))
            .clamp(self.min_rto, self.max_rto);
        self.backoff = 0;
    }

    /// The handshake completed after a retransmitted SYN or SYN,ACK and
    /// without a measurement (Karn's rule): RFC 6298 §5.7, "the RTO MUST be
    /// re-initialized to 3 seconds when data transmission begins".
    pub fn restart_after_lost_syn(&mut self) {
        if self.srtt.is_none() && self.backoff > 0 {
            self.base_rto = Duration::from_secs(3).clamp(self.min_rto, self.max_rto);
            self.backoff = 0;
        }
    }

    /// The timer expired: back off (RFC 6298 §5.5, "RTO <- RTO * 2").
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }

    /// New data was acknowledged: keep the estimate, drop the back-off.
    pub fn reset_backoff(&mut self) {
        self.backoff = 0;
    }

    /// The current RTO, backed off and capped at the maximum.
    #[must_use]
    pub fn rto(&self) -> Duration {
        let factor = 1u32.checked_shl(self.backoff.min(20)).unwrap_or(u32::MAX);
        self.base_rto.saturating_mul(factor).min(self.max_rto)
    }

    /// SRTT, once measured.
    #[must_use]
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTTVAR.
    #[must_use]
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// Expiries in a row.
    #[must_use]
    pub fn backoff(&self) -> u32 {
        self.backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn follows_rfc6298_formulas() {
        let mut e = RttEstimator::new(MS * 1000, MS * 10, MS * 60_000);
        assert_eq!(e.rto(), MS * 1000, "§2.1 initial RTO");
        e.sample(MS * 100);
        assert_eq!(e.srtt(), Some(MS * 100));
        assert_eq!(e.rttvar(), MS * 50);
        assert_eq!(e.rto(), MS * 300, "100 + 4 * 50");
        e.sample(MS * 200);
        // RTTVAR = 3/4 * 50 + 1/4 * 100 = 62.5; SRTT = 7/8 * 100 + 25 = 112.5
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(362_500));
    }

    #[test]
    fn backs_off_doubling_up_to_the_cap_and_respects_the_minimum() {
        let mut e = RttEstimator::new(MS * 1000, MS * 200, MS * 5000);
        e.sample(MS);
        assert_eq!(e.rto(), MS * 200, "§2.4 minimum");
        e.back_off();
        assert_eq!(e.rto(), MS * 400);
        e.back_off();
        assert_eq!(e.rto(), MS * 800);
        for _ in 0..40 {
            e.back_off();
        }
        assert_eq!(e.rto(), MS * 5000, "§2.5 maximum");
        e.reset_backoff();
        assert_eq!(e.rto(), MS * 200);
    }

    #[test]
    fn three_seconds_after_a_lost_syn() {
        let mut e = RttEstimator::new(MS * 1000, MS * 200, MS * 60_000);
        e.restart_after_lost_syn();
        assert_eq!(e.rto(), MS * 1000, "nothing was lost");
        e.back_off();
        assert_eq!(e.rto(), MS * 2000);
        e.restart_after_lost_syn();
        assert_eq!(e.rto(), MS * 3000, "RFC 6298 §5.7");
    }
}
