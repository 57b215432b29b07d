//! PCI on the machine: the ECAM window from the ACPI MCFG table, the
//! functions on its buses (enumerated once at boot, on core 0 while the
//! other cores set themselves up, before the application runs), their
//! memory BARs identity-mapped uncached as the firmware assigned them
//! (64-bit BARs above 4 GiB included).

use alloc::vec::Vec;
use spin::Once;

use crate::arch::x86_64::acpi::{self, Ecam};
use crate::arch::x86_64::paging;
use crate::drivers::pci::{enumerate, Bar, Bdf, ConfigSpace, Function};

/// Configuration space through the ECAM window (PCIe 4.0 §7.2.2: bus <<
/// 20 | device << 15 | function << 12 | offset).
pub struct EcamSpace {
    ecam: Ecam,
}

impl EcamSpace {
    fn address(&self, bdf: Bdf, offset: u16) -> *mut u32 {
        let at = u64::from(bdf.bus) << 20
            | u64::from(bdf.device & 31) << 15
            | u64::from(bdf.function & 7) << 12
            | u64::from(offset & 0xffc);
        (self.ecam.base + at) as *mut u32
    }

    fn decodes(&self, bdf: Bdf) -> bool {
        (self.ecam.start_bus..=self.ecam.end_bus).contains(&bdf.bus)
    }
}

impl ConfigSpace for EcamSpace {
    fn read32(&self, bdf: Bdf, offset: u16) -> u32 {
        if !self.decodes(bdf) {
            return !0;
        }
        // SAFETY: the window covers every bus it decodes and is mapped
        // uncached by `init`; configuration reads have no side effects.
        unsafe { self.address(bdf, offset).read_volatile() }
    }

    fn write32(&self, bdf: Bdf, offset: u16, value: u32) {
        if self.decodes(bdf) {
            // SAFETY: the window covers every bus it decodes and is mapped
            // uncached by `init`; only drivers and the BAR sizing write,
            // to registers the PCI specification defines.
            unsafe { self.address(bdf, offset).write_volatile(value) }
        }
    }
}

struct Pci {
    space: EcamSpace,
    functions: Vec<Function>,
}

static PCI: Once<Pci> = Once::new();

/// Finds the ECAM window (MCFG), maps it and every memory BAR, and lists
/// the functions that `has_driver(vendor, device)` accepts (the runtime
/// says which drivers exist). Without an MCFG (microvm) there is no PCI:
/// `Ok(0)`. Returns the number of functions.
pub fn init(rsdp_hint: u64, has_driver: fn(u16, u16) -> bool) -> Result<usize, &'static str> {
    let memory = crate::arch::x86_64::smp::IdentityMapped;
    let ecam = match acpi::ecam(&memory, rsdp_hint) {
        Ok(Some(ecam)) => ecam,
        Ok(None) | Err(_) => return Ok(0),
    };
    paging::map_device(ecam.base, ecam.base + ecam.len())
        .map_err(|_| "no memory to map the PCI ECAM window")?;
    let space = EcamSpace { ecam };
    let functions = enumerate(&space, ecam.start_bus, ecam.end_bus, has_driver);
    for function in &functions {
        for bar in function.bars.iter().flatten() {
            if let Bar::Memory { addr, size, .. } = *bar {
                paging::map_device(addr, addr + size).map_err(|_| "no memory to map a PCI BAR")?;
            }
        }
    }
    let count = functions.len();
    PCI.call_once(|| Pci { space, functions });
    Ok(count)
}

/// The functions found at boot (empty without PCI).
pub fn functions() -> &'static [Function] {
    PCI.get().map_or(&[], |pci| &pci.functions)
}

/// Configuration space, once [`init`] found it.
pub fn config_space() -> Option<&'static dyn ConfigSpace> {
    PCI.get().map(|pci| &pci.space as &dyn ConfigSpace)
}

/// Prints the functions (`verbose`).
pub fn describe() {
    if let Some(pci) = PCI.get() {
        log::debug!(
            "PCI ECAM at {:#x}, buses {}..={}, {} functions",
            pci.space.ecam.base,
            pci.space.ecam.start_bus,
            pci.space.ecam.end_bus,
            pci.functions.len()
        );
    }
    for function in functions() {
        log::debug!(
            "pci {} {:04x}:{:04x} class {:02x}.{:02x} caps {:x?}",
            function.bdf,
            function.vendor,
            function.device,
            function.class.0,
            function.class.1,
            function
                .capabilities
                .iter()
                .map(|c| c.0)
                .collect::<Vec<_>>()
        );
        for (index, bar) in function.bars.iter().enumerate() {
            match bar {
                Some(Bar::Memory {
                    addr, size, wide, ..
                }) => log::debug!(
                    "  BAR{index} memory {addr:#x} +{size:#x}{}",
                    if *wide { " (64-bit)" } else { "" }
                ),
                Some(Bar::Io { port, size }) => {
                    log::debug!("  BAR{index} I/O {port:#x} +{size:#x}");
                }
                None => {}
            }
        }
    }
}
