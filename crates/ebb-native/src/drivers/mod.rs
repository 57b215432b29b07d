//! Devices: PCI (enumeration over ECAM, BARs, MSI-X) and virtio 1.x
//! devices over it; QEMU's fw_cfg files. Drivers use `arch` and `mm`, never the runtime: the
//! runtime asks them for work (interrupt hooks it installs, polls).

#[cfg(target_os = "none")]
pub mod fw_cfg;
pub mod pci;
pub mod virtio;
