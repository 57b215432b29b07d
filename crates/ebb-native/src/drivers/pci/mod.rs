//! PCI: configuration space and enumeration (`config`, host-tested), the
//! ECAM window and the BARs mapped at boot (`ecam`), MSI-X (`msix`).

pub mod config;
#[cfg(target_os = "none")]
pub mod ecam;
#[cfg(target_os = "none")]
pub(crate) mod msix;

pub use config::*;
