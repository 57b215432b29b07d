//! virtio 1.x devices on PCI (virtio 1.2, OASIS): the modern PCI transport
//! (`transport`), split virtqueues (`queue`) and the network device
//! (`net`) with its control queue (`ctrl`).

pub mod ctrl;
pub mod net;
pub mod queue;
pub mod transport;
