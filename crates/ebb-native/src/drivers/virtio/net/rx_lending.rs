//! When a received frame is copied rather than lent to the stack (see
//! `device.rs`, "Receive without copies"): a stack that holds every
//! receive buffer must still receive the ACKs that let it free them, and a
//! device without buffers delivers nothing (virtio 1.2 §5.1.6.3), so the
//! driver lends a buffer only while the others can fill the ring again.

/// Whether lending one more receive buffer would leave too few to fill
/// the ring again: its free slots (the popped buffer's among them)
/// outnumber the pool's buffers plus those still to be made.
pub fn lending_would_starve_the_ring(pooled: usize, still_to_make: usize, ring_free: u16) -> bool {
    pooled + still_to_make < usize::from(ring_free)
}

#[cfg(test)]
mod tests {
    use super::lending_would_starve_the_ring;

    /// The driver's ring size and buffer limit.
    const RING: u16 = 256;
    const BUFFERS: usize = 1024;

    #[test]
    fn buffers_are_lent_while_the_ring_can_be_filled_again() {
        // At start: a full ring, the rest still to be made.
        assert!(!lending_would_starve_the_ring(
            0,
            BUFFERS - usize::from(RING),
            1
        ));
        // All made, some back in the pool: enough for every free slot.
        assert!(!lending_would_starve_the_ring(10, 0, 10));
    }

    #[test]
    fn the_frame_is_copied_once_the_rest_could_not_fill_the_ring() {
        // All made and lent but the ring's: the popped buffer must go back.
        assert!(lending_would_starve_the_ring(0, 0, 1));
        // Two slots free, one buffer to fill them: lending would leave one
        // empty for good.
        assert!(lending_would_starve_the_ring(1, 0, 2));
        assert!(lending_would_starve_the_ring(0, 1, 2));
        // A ring drained entirely (the stall: every buffer with the stack).
        assert!(lending_would_starve_the_ring(0, 0, RING));
    }
}
