//! virtio-net's per-queue counters, dumped when the node ends (`verbose`).

/// Counters of one queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Frames received or sent.
    pub packets: u64,
    /// Bytes of those frames (without the virtio header).
    pub bytes: u64,
    /// Interrupts that led to polling this queue.
    pub interrupts: u64,
    /// Times the queue was polled for used buffers.
    pub polls: u64,
    /// Frames dropped (receive: too long, split across buffers; transmit:
    /// ring full).
    pub dropped: u64,
    /// Switches between interrupts and polling (adaptive polling).
    pub mode_switches: u64,
    /// Transmit: frames that found the ring full and waited in the
    /// backlog (back-pressure) instead of being dropped.
    pub backlogged: u64,
    /// Frames whose checksum the device handled: transmit, left partial
    /// for it (NEEDS_CSUM); receive, flagged DATA_VALID or NEEDS_CSUM.
    pub csum_offloaded: u64,
    /// Notifications sent to the device (each a VM exit).
    pub notifications: u64,
    /// Notifications left out because the device said it needs none
    /// (`VIRTQ_USED_F_NO_NOTIFY`, §2.7.10).
    pub notifications_suppressed: u64,
    /// Receive: frames copied out of their buffer, which went straight
    /// back to the device, because every other receive buffer was lent to
    /// the stack (see `device.rs`, "Receive without copies").
    pub copied: u64,
}
