//! virtio-net's feature bits (virtio 1.2 §5.1.3; VERSION_1, §6, is the
//! transport's), the ones the driver asks for, and their names for the
//! feature dump.

use crate::drivers::virtio::transport::pci::F_VERSION_1;

/// The device completes partial checksums we send.
pub const F_CSUM: u64 = 1 << 0;
/// We accept frames with partial or already-verified checksums (and the
/// device says which).
pub const F_GUEST_CSUM: u64 = 1 << 1;

/// The device's MAC address is in its configuration.
pub const F_MAC: u64 = 1 << 5;
/// Receive buffers may be merged (`num_buffers` in the header).
pub const F_MRG_RXBUF: u64 = 1 << 15;
/// The configuration has a link status.
pub const F_STATUS: u64 = 1 << 16;
/// There is a control queue.
pub const F_CTRL_VQ: u64 = 1 << 17;
/// Several receive/transmit queue pairs (with the control queue).
pub const F_MQ: u64 = 1 << 22;
/// The features the driver asks for (and MQ with CTRL_VQ, for more than
/// one pair).
pub const WANTED: u64 = F_MAC | F_STATUS | F_MRG_RXBUF | F_CSUM | F_GUEST_CSUM;

/// The names of the virtio-net feature bits the driver knows (§5.1.3,
/// §6), for the feature dump.
pub const FEATURE_NAMES: &[(u64, &str)] = &[
    (F_CSUM, "CSUM"),
    (F_GUEST_CSUM, "GUEST_CSUM"),
    (F_MAC, "MAC"),
    (F_MRG_RXBUF, "MRG_RXBUF"),
    (F_STATUS, "STATUS"),
    (F_CTRL_VQ, "CTRL_VQ"),
    (F_MQ, "MQ"),
    (F_VERSION_1, "VERSION_1"),
];
