//! virtio-net's identity and device-specific configuration (virtio 1.2
//! §5.1.1, §5.1.4): where its fields sit in the device configuration
//! window the transport maps.

/// The PCI device id of a modern virtio-net function (§4.1.2: 0x1040 + 1;
/// the vendor is virtio's, `transport::pci::VENDOR`).
pub const DEVICE: u16 = 0x1041;

/// `mac`: the device's address, 6 bytes, valid with MAC.
pub const MAC_OFFSET: usize = 0;
/// `status`: 16 bits, valid with STATUS.
pub const STATUS_OFFSET: usize = 6;
/// `status` bit: the link is up.
pub const STATUS_LINK_UP: u16 = 1;
/// `max_virtqueue_pairs`: 16 bits, valid with MQ.
pub const MAX_PAIRS_OFFSET: usize = 8;
/// The largest `max_virtqueue_pairs` we take: the spec allows 0x8000, but
/// then the control queue's index (2 · 0x8000) does not fit the 16-bit
/// queue select.
pub const MAX_PAIRS_LIMIT: u16 = 0x7fff;
