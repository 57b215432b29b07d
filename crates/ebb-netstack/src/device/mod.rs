//! Devices: the bottom of the stack, and wrappers that compose with any
//! device (as smoltcp's `phy` does): [`Tracer`], [`PcapWriter`] and
//! [`FaultInjector`]. The simulated wire's ports ([`crate::sim::SimPort`])
//! are devices too, so one stack runs on a simulated link, a TAP device or
//! virtio alike, and a capture or a loss pattern is one wrapper away.

pub(crate) mod fault;
mod pcap;
mod tracer;

pub use fault::{FaultConfig, FaultInjector, FaultStats};
pub use pcap::{PcapSink, PcapWriter};
pub use tracer::{summarize, Tracer};

use alloc::boxed::Box;

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};

/// Which checksums the device has already verified on received frames, so
/// the stack need not (checksum offload). A device that does not know says
/// `false` and the stack verifies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChecksumCapabilities {
    /// IPv4 header checksums of received packets were verified.
    pub ipv4: bool,
    /// UDP checksums of received datagrams were verified.
    pub udp: bool,
    /// ICMPv4 checksums of received messages were verified.
    pub icmpv4: bool,
    /// Transmit offload: the device completes TCP and UDP checksums
    /// (virtio-net's `VIRTIO_NET_F_CSUM`, virtio 1.2 §5.1.6.2), so the
    /// stack leaves them partial — the checksum field holds the folded,
    /// uncomplemented pseudo-header sum, as Linux's `CHECKSUM_PARTIAL` —
    /// and the device sums from the transport header to the end of the
    /// frame ([`crate::checksum::partial_offsets`] says where).
    pub tx_partial: bool,
}

/// What a device says about one received frame's TCP or UDP checksum
/// (virtio-net's per-packet header flags, virtio 1.2 §5.1.6.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxChecksum {
    /// Nothing: the stack verifies.
    #[default]
    Unverified,
    /// The device verified it (`VIRTIO_NET_HDR_F_DATA_VALID`).
    Verified,
    /// The frame comes from a sender on the same host that left the
    /// checksum partial and it was never computed
    /// (`VIRTIO_NET_HDR_F_NEEDS_CSUM`): nothing on the way could corrupt
    /// it, so it is accepted without verifying.
    Partial,
}

/// What a device can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCapabilities {
    /// The largest Ethernet payload (the IP MTU), 1500 on Ethernet.
    pub mtu: usize,
    /// Receive checksums the device vouches for.
    pub checksum: ChecksumCapabilities,
}

impl Default for DeviceCapabilities {
    fn default() -> Self {
        DeviceCapabilities {
            mtu: 1500,
            checksum: ChecksumCapabilities::default(),
        }
    }
}

/// Which way a frame goes through a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the wire to the stack.
    Rx,
    /// From the stack to the wire.
    Tx,
}

/// A network device carrying Ethernet frames.
///
/// Received frames are [`IoBuf`]s viewing the device's own receive buffers
/// (the stack hands views of them to the application, so a buffer goes back
/// to the device when the last view is dropped). Frames to send are
/// [`IoChain`]s — a header buffer followed by payload buffers — for
/// scatter/gather; the device keeps the chain until the frame is sent.
pub trait Device {
    /// The next received frame, if one is ready at `now`.
    fn receive(&mut self, now: Instant) -> Option<IoBuf>;

    /// As [`receive`](Self::receive), with what the device knows of the
    /// frame's transport checksum; the stack calls this one. Devices
    /// without receive checksum offload keep the default.
    fn receive_checked(&mut self, now: Instant) -> Option<(IoBuf, RxChecksum)> {
        self.receive(now)
            .map(|frame| (frame, RxChecksum::Unverified))
    }

    /// Sends `frame` (a complete Ethernet frame, without FCS). A device with
    /// no room drops the frame, as a NIC with a full ring does.
    fn transmit(&mut self, now: Instant, frame: IoChain);

    /// What the device can do.
    fn capabilities(&self) -> DeviceCapabilities;
}

impl<D: Device + ?Sized> Device for Box<D> {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        (**self).receive(now)
    }

    fn receive_checked(&mut self, now: Instant) -> Option<(IoBuf, RxChecksum)> {
        (**self).receive_checked(now)
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        (**self).transmit(now, frame);
    }

    fn capabilities(&self) -> DeviceCapabilities {
        (**self).capabilities()
    }
}
