//! How a virtio device is found and spoken to: the modern PCI transport
//! (virtio 1.2 §4.1). Another transport (MMIO, §4.2) would sit beside it.

pub mod pci;
