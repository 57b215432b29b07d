//! A device wrapper that writes every frame to a pcap capture (the classic
//! libpcap format: microsecond timestamps, link type 1 = Ethernet).

use alloc::vec::Vec;

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};

use super::{Device, DeviceCapabilities};

/// Where capture bytes go.
pub trait PcapSink {
    /// Appends `data` to the capture.
    fn write_all(&mut self, data: &[u8]);
}

impl PcapSink for Vec<u8> {
    fn write_all(&mut self, data: &[u8]) {
        self.extend_from_slice(data);
    }
}

/// pcap's magic number for microsecond timestamps.
pub const PCAP_MAGIC: u32 = 0xa1b2_c3d4;
/// pcap's link type for Ethernet.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// The snapshot length written in the header (frames are never cut).
pub const SNAPLEN: u32 = 65_535;

/// Wraps a device and records every received and sent frame into `sink`.
pub struct PcapWriter<D, S> {
    inner: D,
    sink: S,
}

impl<D: Device, S: PcapSink> PcapWriter<D, S> {
    /// Wraps `inner` and writes the capture's global header into `sink`.
    pub fn new(inner: D, mut sink: S) -> Self {
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&PCAP_MAGIC.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes()); // version 2.4
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0.
        header[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        header[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        sink.write_all(&header);
        PcapWriter { inner, sink }
    }

    /// The capture written so far.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The wrapped device.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    fn record<'a>(&mut self, now: Instant, len: usize, segments: impl Iterator<Item = &'a [u8]>) {
        let micros = now.0 / 1_000;
        let secs = u32::try_from(micros / 1_000_000).unwrap_or(u32::MAX);
        let usecs = u32::try_from(micros % 1_000_000).unwrap_or(0);
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        let mut header = [0u8; 16];
        header[0..4].copy_from_slice(&secs.to_le_bytes());
        header[4..8].copy_from_slice(&usecs.to_le_bytes());
        header[8..12].copy_from_slice(&len.to_le_bytes());
        header[12..16].copy_from_slice(&len.to_le_bytes());
        self.sink.write_all(&header);
        for segment in segments {
            self.sink.write_all(segment);
        }
    }
}

impl<D: Device, S: PcapSink> Device for PcapWriter<D, S> {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        let frame = self.inner.receive(now)?;
        self.record(now, frame.len(), core::iter::once(frame.as_slice()));
        Some(frame)
    }

    fn receive_checked(&mut self, now: Instant) -> Option<(IoBuf, super::RxChecksum)> {
        let (frame, checksum) = self.inner.receive_checked(now)?;
        self.record(now, frame.len(), core::iter::once(frame.as_slice()));
        Some((frame, checksum))
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        self.record(now, frame.len(), frame.segments().map(IoBuf::as_slice));
        self.inner.transmit(now, frame);
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.inner.capabilities()
    }
}
