//! A device wrapper that reports every frame to a callback.

use alloc::string::String;
use core::fmt::Write;

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use smoltcp::wire::{EthernetFrame, PrettyPrinter};

use super::{Device, DeviceCapabilities, Direction};

/// Wraps a device and calls `trace(now, direction, frame)` for every frame
/// received or sent, before passing it on unchanged.
pub struct Tracer<D, F> {
    inner: D,
    trace: F,
}

impl<D: Device, F: FnMut(Instant, Direction, &IoChain)> Tracer<D, F> {
    /// Wraps `inner`.
    pub fn new(inner: D, trace: F) -> Self {
        Tracer { inner, trace }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }
}

impl<D: Device, F: FnMut(Instant, Direction, &IoChain)> Device for Tracer<D, F> {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        let frame = self.inner.receive(now)?;
        (self.trace)(now, Direction::Rx, &IoChain::from(frame.clone()));
        Some(frame)
    }

    fn receive_checked(&mut self, now: Instant) -> Option<(IoBuf, super::RxChecksum)> {
        let (frame, checksum) = self.inner.receive_checked(now)?;
        (self.trace)(now, Direction::Rx, &IoChain::from(frame.clone()));
        Some((frame, checksum))
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        (self.trace)(now, Direction::Tx, &frame);
        self.inner.transmit(now, frame);
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.inner.capabilities()
    }
}

/// A one-line-per-layer human summary of an Ethernet frame (smoltcp's
/// pretty printer), for tracing. Copies the frame if it is in several
/// segments; meant for debugging, not the data path.
#[must_use]
pub fn summarize(frame: &IoChain) -> String {
    let bytes = frame.to_vec();
    let mut out = String::new();
    let _ = write!(
        out,
        "{}",
        PrettyPrinter::<EthernetFrame<&[u8]>>::new("", &bytes.as_slice())
    );
    out
}
