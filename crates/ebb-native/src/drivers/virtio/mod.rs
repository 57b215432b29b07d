//! virtio 1.x devices on PCI (virtio 1.2, OASIS): the modern PCI transport
//! (`transport`), split virtqueues (`queue`), the network device (`net`)
//! with its control queue (`ctrl`, multiqueue), checksum offload
//! (`offload`) and adaptive polling (`adaptive`). `queue` and `adaptive`
//! are platform-neutral and tested on the host (the queue against a device
//! model, `queue_tests`); so is `offload`, with `ebb-netstack` as a host
//! dev-dependency.

#[path = "queue/adaptive.rs"]
pub mod adaptive;
#[cfg(target_os = "none")]
#[path = "net/ctrl.rs"]
pub mod ctrl;
#[cfg(target_os = "none")]
#[path = "net/device.rs"]
pub mod net;
#[cfg(any(target_os = "none", test))]
#[path = "net/offload.rs"]
pub mod offload;
#[path = "queue/split.rs"]
pub mod queue;
#[cfg(all(test, not(target_os = "none")))]
#[path = "queue/split_tests.rs"]
mod queue_tests;
#[cfg(target_os = "none")]
#[path = "transport/pci.rs"]
pub mod transport;
