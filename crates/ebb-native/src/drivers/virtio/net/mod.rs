//! The virtio network device (virtio 1.2 §5.1), in the file set every
//! virtio device folder has (see the crate README, "Drivers"):
//!
//! * `config`: its PCI device id and device-specific configuration layout
//!   (§5.1.1, §5.1.4);
//! * `features`: its feature bits, the ones asked for, their names
//!   (§5.1.3);
//! * `device`: the driver: initialisation, queues, receive and transmit,
//!   reset (an `ebb-netstack` `Device` per queue pair);
//! * `stats`: its per-queue counters;
//!
//! and what only this device has: the control queue (`ctrl`:
//! VQ_PAIRS_SET), the `virtio_net_hdr` for checksum offload
//! (`offload`, host-tested with `ebb-netstack` as a host dev-dependency)
//! and when a received frame is copied rather than lent (`rx_lending`,
//! host-tested).

#[cfg(target_os = "none")]
pub mod config;
#[cfg(target_os = "none")]
pub mod ctrl;
#[cfg(target_os = "none")]
pub mod device;
#[cfg(target_os = "none")]
pub mod features;
#[cfg(any(target_os = "none", test))]
pub mod offload;
#[cfg(any(target_os = "none", test))]
pub mod rx_lending;
#[cfg(target_os = "none")]
pub mod stats;
