//! MSI-X (PCI 3.0 §6.8.2): a function's interrupts as messages to a
//! LAPIC: entry `n` of the table aimed at one core with one vector, then
//! MSI-X enabled (multi-queue virtio-net aims entry `i` at core `i`).

use crate::drivers::pci::{ConfigSpace, Function};

/// PCI capability id of MSI-X.
const CAP_MSIX: u8 = 0x11;
/// Message control bits (in the capability's first dword's upper half).
const ENABLE: u32 = 1 << 31;
const FUNCTION_MASK: u32 = 1 << 30;
/// The x86 MSI address (Intel SDM vol. 3 §11.11.1): 0xFEE, destination
/// APIC id in bits 19:12, physical destination mode.
const MSI_ADDRESS: u64 = 0xfee0_0000;

/// Aims table entry `entry` of `function` at LAPIC `apic_id` with `vector`
/// (fixed delivery, edge), unmasks it, and enables MSI-X. `false` if the
/// function has no MSI-X, the entry does not exist or its table is not in
/// a mapped memory BAR.
pub fn route(
    function: &Function,
    config: &dyn ConfigSpace,
    entry: u16,
    vector: u8,
    apic_id: u32,
) -> bool {
    let Some(&(_, at)) = function.capabilities.iter().find(|(id, _)| *id == CAP_MSIX) else {
        return false;
    };
    let at = u16::from(at);
    let control = config.read32(function.bdf, at);
    let table_size = ((control >> 16) & 0x7ff) + 1;
    if u32::from(entry) >= table_size {
        return false;
    }
    let table = config.read32(function.bdf, at + 4);
    let Some((bar_addr, bar_size)) = function.memory_bar((table & 7) as usize) else {
        return false;
    };
    let offset = u64::from(table & !7) + 16 * u64::from(entry);
    if offset + 16 > bar_size {
        return false;
    }
    let slot = (bar_addr + offset) as *mut u32;
    let address = MSI_ADDRESS | (u64::from(apic_id & 0xff) << 12);
    // The entry's address, upper address, data, and vector control
    // (unmasked) last.
    let words = [address as u32, (address >> 32) as u32, u32::from(vector), 0];
    for (i, word) in words.into_iter().enumerate() {
        // SAFETY: the entry (16 bytes, checked against the BAR's size above)
        // lies inside a memory BAR that `pci_ecam::init` mapped uncached.
        unsafe { slot.wrapping_add(i).write_volatile(word) };
    }
    config.write32(function.bdf, at, (control | ENABLE) & !FUNCTION_MASK);
    true
}
