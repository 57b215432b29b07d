//! The I/O APIC (Intel 82093AA datasheet §3): found in the MADT
//! (`acpi::ioapics`), mapped, and every redirection entry masked, so no
//! legacy (ISA/PCI INTx) interrupt reaches a core unexpectedly: the
//! platform's devices use MSI-X (`msix.rs`), the timers are the LAPICs',
//! and the 8259s are masked (`apic.rs`).
//!
//! Registers are reached indirectly: the index goes to IOREGSEL (offset
//! 0x00), the value through IOWIN (offset 0x10). Register 0x01 (version)
//! holds the highest redirection entry in bits 23:16; entry `n` is
//! registers `0x10 + 2n` (low: vector, mode, bit 16 = mask) and
//! `0x11 + 2n` (high: destination). The masking is platform-neutral and
//! host-tested over a fake register file.

/// An I/O APIC's indirect registers.
pub trait IoApicRegisters {
    /// Reads register `index`.
    fn read(&mut self, index: u8) -> u32;
    /// Writes register `index`.
    fn write(&mut self, index: u8, value: u32);
}

/// The version register.
pub const IOAPICVER: u8 = 0x01;
/// The first redirection entry's low half.
pub const IOREDTBL: u8 = 0x10;
/// Redirection entry bit 16: masked.
pub const MASKED: u32 = 1 << 16;

/// How many pins (redirection entries) the I/O APIC has.
pub fn pins(registers: &mut impl IoApicRegisters) -> u32 {
    ((registers.read(IOAPICVER) >> 16) & 0xff) + 1
}

/// Masks every pin that is not masked yet (vector 0, destination 0:
/// nothing is delivered) and returns how many pins there are and how many
/// it had to mask. Masked entries are left alone: reset masks them all
/// (82093AA §3.2.4), and under TCG each redirection-entry write costs QEMU
/// a routing update, so reading first is the cheap path.
pub fn mask_all(registers: &mut impl IoApicRegisters) -> (u32, u32) {
    // IOREGSEL is 8 bits wide: entries past 119 have no index (0x10 +
    // 2·119 + 1 = 0xff), so a larger version field is clamped.
    let pins = pins(registers).min(120);
    let mut masked = 0;
    for pin in 0..pins {
        let low = (u32::from(IOREDTBL) + 2 * pin) as u8;
        if registers.read(low) & MASKED != 0 {
            continue;
        }
        // Low half first: the entry is masked before anything else moves.
        registers.write(low, MASKED);
        registers.write(low.wrapping_add(1), 0);
        masked += 1;
    }
    (pins, masked)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::collections::BTreeMap;

    /// An I/O APIC with `pins` entries, all unmasked with vector 0x20+pin.
    struct Fake(BTreeMap<u8, u32>);

    impl Fake {
        fn new(pins: u8) -> Fake {
            let mut registers = BTreeMap::new();
            registers.insert(IOAPICVER, (u32::from(pins - 1) << 16) | 0x20);
            for pin in 0..pins {
                registers.insert(IOREDTBL + 2 * pin, 0x20 + u32::from(pin));
                registers.insert(IOREDTBL + 2 * pin + 1, 0xff00_0000);
            }
            Fake(registers)
        }
    }

    impl IoApicRegisters for Fake {
        fn read(&mut self, index: u8) -> u32 {
            self.0.get(&index).copied().unwrap_or(0)
        }
        fn write(&mut self, index: u8, value: u32) {
            assert!(self.0.contains_key(&index), "no register {index:#x}");
            self.0.insert(index, value);
        }
    }

    #[test]
    fn every_pin_is_masked_and_nothing_else_is_written() {
        // QEMU's I/O APIC has 24 pins (version 0x20, max entry 23).
        let mut ioapic = Fake::new(24);
        // Pin 5 is masked already (with its vector): left as it is.
        ioapic.0.insert(IOREDTBL + 10, MASKED | 0x25);
        assert_eq!(mask_all(&mut ioapic), (24, 23));
        for pin in 0..24u8 {
            let low = ioapic.read(IOREDTBL + 2 * pin);
            assert_ne!(low & MASKED, 0, "pin {pin}");
            if pin == 5 {
                assert_eq!(low, MASKED | 0x25);
                assert_eq!(ioapic.read(IOREDTBL + 11), 0xff00_0000);
            } else {
                assert_eq!(low, MASKED, "pin {pin}");
                assert_eq!(ioapic.read(IOREDTBL + 2 * pin + 1), 0, "pin {pin}");
            }
        }
        assert_eq!(ioapic.read(IOAPICVER), (23 << 16) | 0x20);
        // A second pass finds nothing to do.
        assert_eq!(mask_all(&mut ioapic), (24, 0));
        let mut small = Fake::new(1);
        assert_eq!(mask_all(&mut small), (1, 1));
        assert_eq!(small.read(IOREDTBL), MASKED);
    }
}
