//! virtio-net checksum offload (virtio 1.2 §5.1.6.2, §5.1.6.4): the
//! `virtio_net_hdr` in front of each frame, built for transmit from what
//! the stack left partial, and read on receive into what the stack need
//! not verify.

use ebb_netstack::checksum::partial_offsets;
use ebb_netstack::RxChecksum;

/// Feature bit (§5.1.3): the device completes partial checksums we send.
pub const F_CSUM: u64 = 1 << 0;
/// Feature bit: we accept frames with partial or already-verified
/// checksums (and the device says which).
pub const F_GUEST_CSUM: u64 = 1 << 1;

/// `virtio_net_hdr` with VERSION_1 (§5.1.6): flags, gso_type, hdr_len,
/// gso_size, csum_start, csum_offset, num_buffers (little endian).
pub const HEADER: usize = 12;
/// `flags`: the checksum from `csum_start` on is partial (both ways).
const NEEDS_CSUM: u8 = 1;
/// `flags` on receive: the device verified the checksum.
const DATA_VALID: u8 = 2;

/// The transmit header for a frame starting with `headers` (its first
/// segment, which holds every header the stack wrote): with `csum` (the
/// device completes checksums, so the stack left TCP and UDP ones
/// partial), NEEDS_CSUM and where the checksum is; otherwise all zeros
/// (no offload, no GSO: §5.1.6.2.1).
pub fn tx_header(csum: bool, headers: &[u8]) -> [u8; HEADER] {
    let mut header = [0u8; HEADER];
    if let Some((start, offset)) = csum.then(|| partial_offsets(headers)).flatten() {
        header[0] = NEEDS_CSUM;
        header[6..8].copy_from_slice(&(start as u16).to_le_bytes());
        header[8..10].copy_from_slice(&(offset as u16).to_le_bytes());
    }
    header
}

/// What a received frame's header says of its transport checksum, if
/// GUEST_CSUM was negotiated (else the device sets no flags, §5.1.6.3).
pub fn rx_checksum(guest_csum: bool, header: &[u8]) -> RxChecksum {
    let flags = header.first().copied().unwrap_or(0);
    if !guest_csum {
        RxChecksum::Unverified
    } else if flags & NEEDS_CSUM != 0 {
        // §5.1.6.4: a packet from another guest or the host, its checksum
        // left for a NIC that never comes; the data did not cross a wire.
        RxChecksum::Partial
    } else if flags & DATA_VALID != 0 {
        RxChecksum::Verified
    } else {
        RxChecksum::Unverified
    }
}
