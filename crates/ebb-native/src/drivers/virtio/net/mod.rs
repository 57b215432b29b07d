//! The virtio network device (virtio 1.2 §5.1): the driver (`device`:
//! initialisation, multiqueue, receive and transmit, reset), its control
//! queue (`ctrl`: VQ_PAIRS_SET) and the `virtio_net_hdr` for checksum
//! offload (`offload`, host-tested with `ebb-netstack` as a host
//! dev-dependency).

#[cfg(target_os = "none")]
pub mod ctrl;
#[cfg(target_os = "none")]
pub mod device;
#[cfg(any(target_os = "none", test))]
pub mod offload;
