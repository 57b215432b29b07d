//! virtio 1.x devices on PCI (virtio 1.2, OASIS). One folder per part:
//! `transport` (how a device is found and configured), `queue`
//! (virtqueues and adaptive polling, shared by every device), and one per
//! device (`net`), each with the same files (see the crate README,
//! "Drivers"), so that the next device (block, console, memory) has an
//! obvious home.

pub mod net;
pub mod queue;
#[cfg(target_os = "none")]
pub mod transport;
