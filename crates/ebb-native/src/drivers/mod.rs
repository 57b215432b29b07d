//! Devices: PCI (enumeration over ECAM, BARs, MSI-X) and virtio 1.x
//! devices over it. Drivers use `arch` and `mm`, never the runtime: the
//! runtime asks them for work (interrupt hooks it installs, polls).

pub mod pci;
pub mod virtio;
