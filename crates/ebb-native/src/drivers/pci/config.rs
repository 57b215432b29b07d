//! PCI: enumerating functions through configuration space, decoding and
//! sizing their BARs as the firmware assigned them, walking capability
//! lists (PCI Local Bus Specification 3.0 §6.1 header, §6.2.5 BARs, §6.7
//! capabilities; PCI Express Base 4.0 §7.2.2 ECAM).
//!
//! Configuration space is read through a [`ConfigSpace`], so the walk is
//! tested on the host with fabricated functions; on the machine it is the
//! ECAM window (`pci_ecam.rs`).

use alloc::vec::Vec;

/// A function's address: bus, device (0..32), function (0..8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bdf {
    /// Bus number.
    pub bus: u8,
    /// Device number, 0..32.
    pub device: u8,
    /// Function number, 0..8.
    pub function: u8,
}

impl core::fmt::Display for Bdf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.device, self.function)
    }
}

/// 32-bit access to configuration space (offsets are dword aligned).
pub trait ConfigSpace {
    /// The dword at `offset` of `bdf`'s configuration space.
    fn read32(&self, bdf: Bdf, offset: u16) -> u32;
    /// Writes the dword at `offset` of `bdf`'s configuration space.
    fn write32(&self, bdf: Bdf, offset: u16, value: u32);

    /// The byte at `offset`.
    fn read8(&self, bdf: Bdf, offset: u16) -> u8 {
        (self.read32(bdf, offset & !3) >> ((offset & 3) * 8)) as u8
    }

    /// The 16-bit word at `offset` (2-byte aligned).
    fn read16(&self, bdf: Bdf, offset: u16) -> u16 {
        (self.read32(bdf, offset & !3) >> ((offset & 2) * 8)) as u16
    }
}

/// Command register (offset 4) bits: I/O space and memory space decoding.
const COMMAND_IO: u32 = 1 << 0;
const COMMAND_MEMORY: u32 = 1 << 1;
/// Bus master: the device may start DMA.
pub const COMMAND_BUS_MASTER: u32 = 1 << 2;
/// Status register bit 4: the capabilities list exists.
const STATUS_CAPABILITIES: u32 = 1 << 20;
/// Capability list walks stop after this many entries (a loop in a broken
/// list must not hang the boot): 256 bytes hold at most 48 capabilities.
const MAX_CAPABILITIES: usize = 48;

/// A decoded Base Address Register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bar {
    /// Memory space: a physical window (above 4 GiB for some 64-bit BARs).
    Memory {
        /// Physical address as the firmware assigned it.
        addr: u64,
        /// Size in bytes (a power of two).
        size: u64,
        /// Prefetchable.
        prefetchable: bool,
        /// A 64-bit BAR (it also uses the next BAR slot).
        wide: bool,
    },
    /// I/O space: a port range.
    Io {
        /// First port.
        port: u32,
        /// Number of ports.
        size: u32,
    },
}

/// One PCI function found by [`enumerate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Where it is.
    pub bdf: Bdf,
    /// Vendor id (0x1af4 for virtio).
    pub vendor: u16,
    /// Device id (0x1041 for a modern virtio-net).
    pub device: u16,
    /// Class, subclass and programming interface.
    pub class: (u8, u8, u8),
    /// BARs 0..6 (type 0 headers); `None` for unimplemented or unassigned
    /// slots and the upper half of a 64-bit BAR.
    pub bars: [Option<Bar>; 6],
    /// Capabilities: (id, offset in configuration space), in list order.
    pub capabilities: Vec<(u8, u8)>,
}

impl Function {
    /// The memory window of BAR `index`, if it is one: (address, size).
    pub fn memory_bar(&self, index: usize) -> Option<(u64, u64)> {
        match self.bars.get(index).copied().flatten() {
            Some(Bar::Memory { addr, size, .. }) => Some((addr, size)),
            _ => None,
        }
    }
}

/// Lists every function reachable from bus `start_bus`: devices answering
/// a vendor id other than 0xffff, all eight functions of multi-function
/// devices (header type bit 7), and the buses behind PCI-to-PCI bridges
/// (header type 1, secondary bus at 0x19) up to `end_bus`, as the firmware
/// numbered them. Following bridges rather than probing all 256 buses
/// keeps the boot fast: each configuration read is a trap under
/// emulation. Bridges are listed, their BARs not decoded. BARs are sized
/// only for functions `has_driver` accepts (vendor, device): sizing turns
/// decoding off and on, and under QEMU each such write makes the emulator
/// rebuild its memory map (about a millisecond a function under TCG), for
/// BARs nobody would use.
pub fn enumerate(
    config: &dyn ConfigSpace,
    start_bus: u8,
    end_bus: u8,
    has_driver: impl Fn(u16, u16) -> bool,
) -> Vec<Function> {
    let mut found = Vec::new();
    let mut buses = alloc::vec![start_bus];
    let mut scanned = [false; 256];
    while let Some(bus) = buses.pop() {
        if scanned[usize::from(bus)] || bus < start_bus || bus > end_bus {
            continue;
        }
        scanned[usize::from(bus)] = true;
        for device in 0..32 {
            let first = Bdf {
                bus,
                device,
                function: 0,
            };
            if config.read16(first, 0) == 0xffff {
                continue;
            }
            let functions = if config.read8(first, 0x0e) & 0x80 != 0 {
                8
            } else {
                1
            };
            for function in 0..functions {
                let bdf = Bdf {
                    bus,
                    device,
                    function,
                };
                if config.read16(bdf, 0) == 0xffff {
                    continue;
                }
                if config.read8(bdf, 0x0e) & 0x7f == 1 {
                    buses.push(config.read8(bdf, 0x19));
                }
                found.push(probe(config, bdf, &has_driver));
            }
        }
    }
    found.sort_by_key(|function| function.bdf);
    found
}

fn probe(config: &dyn ConfigSpace, bdf: Bdf, has_driver: &impl Fn(u16, u16) -> bool) -> Function {
    let id = config.read32(bdf, 0);
    let class = config.read32(bdf, 8);
    let header_type = config.read8(bdf, 0x0e) & 0x7f;
    let size_bars = header_type == 0 && has_driver(id as u16, (id >> 16) as u16);
    Function {
        bdf,
        vendor: id as u16,
        device: (id >> 16) as u16,
        class: ((class >> 24) as u8, (class >> 16) as u8, (class >> 8) as u8),
        bars: if size_bars {
            bars(config, bdf)
        } else {
            [None; 6]
        },
        capabilities: capabilities(config, bdf),
    }
}

/// Decodes and sizes the six BARs of a type 0 header: each is written
/// with all ones and read back (the low bits the device keeps at zero give
/// the size) with decoding off meanwhile, then restored (PCI 3.0 §6.2.5.1).
fn bars(config: &dyn ConfigSpace, bdf: Bdf) -> [Option<Bar>; 6] {
    let command = config.read32(bdf, 4) & 0xffff;
    config.write32(bdf, 4, command & !(COMMAND_IO | COMMAND_MEMORY));
    let mut bars = [None; 6];
    let mut index = 0;
    while index < 6 {
        let offset = 0x10 + 4 * index as u16;
        let low = config.read32(bdf, offset);
        if low == 0 {
            // Not implemented, or a 32-bit memory BAR at address 0 (not
            // assigned): recorded as nothing either way, so not sized
            // (each configuration write costs QEMU tens of µs under TCG).
            index += 1;
            continue;
        }
        config.write32(bdf, offset, !0);
        let low_mask = config.read32(bdf, offset);
        config.write32(bdf, offset, low);
        if low & 1 == 1 {
            let size = (!(low_mask & !3)).wrapping_add(1) & 0xffff;
            if low_mask & !3 != 0 && size != 0 {
                bars[index] = Some(Bar::Io {
                    port: low & !3,
                    size,
                });
            }
            index += 1;
            continue;
        }
        let wide = (low >> 1) & 3 == 2;
        let (addr, mask) = if wide && index < 5 {
            let high_offset = offset + 4;
            let high = config.read32(bdf, high_offset);
            config.write32(bdf, high_offset, !0);
            let high_mask = config.read32(bdf, high_offset);
            config.write32(bdf, high_offset, high);
            (
                u64::from(high) << 32 | u64::from(low & !0xf),
                u64::from(high_mask) << 32 | u64::from(low_mask & !0xf),
            )
        } else {
            (
                u64::from(low & !0xf),
                0xffff_ffff_0000_0000 | u64::from(low_mask & !0xf),
            )
        };
        let size = (!mask).wrapping_add(1);
        if mask & !0xffff_ffff_0000_0000 != 0 && addr != 0 {
            bars[index] = Some(Bar::Memory {
                addr,
                size,
                prefetchable: low & 8 != 0,
                wide,
            });
        }
        index += if wide { 2 } else { 1 };
    }
    config.write32(bdf, 4, command);
    bars
}

/// The capability list: (id, offset) pairs from the pointer at 0x34
/// (PCI 3.0 §6.7), when the status register says there is one.
fn capabilities(config: &dyn ConfigSpace, bdf: Bdf) -> Vec<(u8, u8)> {
    let mut list = Vec::new();
    if config.read32(bdf, 4) & STATUS_CAPABILITIES == 0 {
        return list;
    }
    let mut at = config.read8(bdf, 0x34) & !3;
    while at >= 0x40 && list.len() < MAX_CAPABILITIES {
        let id = config.read8(bdf, u16::from(at));
        list.push((id, at));
        at = config.read8(bdf, u16::from(at) + 1) & !3;
    }
    list
}

#[cfg(test)]
mod tests {
    extern crate std;
    use core::cell::RefCell;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    use super::*;

    /// A fabricated function: its dwords, and for each BAR slot the bits
    /// that stay zero when all ones are written (the size mask).
    #[derive(Default)]
    struct FakeFunction {
        dwords: BTreeMap<u16, u32>,
        bar_masks: BTreeMap<u16, u32>,
    }

    #[derive(Default)]
    struct Fake {
        functions: RefCell<BTreeMap<Bdf, FakeFunction>>,
    }

    impl ConfigSpace for Fake {
        fn read32(&self, bdf: Bdf, offset: u16) -> u32 {
            self.functions
                .borrow()
                .get(&bdf)
                .map_or(!0, |f| f.dwords.get(&offset).copied().unwrap_or(0))
        }

        fn write32(&self, bdf: Bdf, offset: u16, value: u32) {
            let mut functions = self.functions.borrow_mut();
            let Some(f) = functions.get_mut(&bdf) else {
                return;
            };
            let value = match f.bar_masks.get(&offset) {
                // Address bits keep what is written; the low type bits stay.
                Some(&mask) => (value & mask) | (f.dwords[&offset] & !mask),
                // The status half is read-only here (write-1-to-clear bits
                // aside, which the walk never writes as ones).
                None if offset == 4 => {
                    (value & 0xffff) | (f.dwords.get(&4).copied().unwrap_or(0) & !0xffff)
                }
                None => value,
            };
            f.dwords.insert(offset, value);
        }
    }

    fn bdf(bus: u8, device: u8, function: u8) -> Bdf {
        Bdf {
            bus,
            device,
            function,
        }
    }

    /// A virtio-net function (1af4:1041, class 02.00) with `command` in
    /// its command/status dword and BAR1 a 32-bit memory BAR of 4 KiB at
    /// 0xfeb00000.
    fn virtio_net_with_bar1(command: u32) -> FakeFunction {
        let mut net = FakeFunction::default();
        net.dwords.insert(0, 0x1041_1af4);
        net.dwords.insert(4, command);
        net.dwords.insert(8, 0x0200_0001);
        net.dwords.insert(0x14, 0xfeb0_0000);
        net.bar_masks.insert(0x14, 0xffff_f000);
        net
    }

    #[test]
    fn empty_bars_are_not_written() {
        let fake = Fake::default();
        // Memory decoding on, no capabilities; the other BARs read 0.
        let net = virtio_net_with_bar1(0x0000_0002);
        fake.functions.borrow_mut().insert(bdf(0, 1, 0), net);
        let found = enumerate(&fake, 0, 0, |_, _| true);
        assert_eq!(found[0].memory_bar(1), Some((0xfeb0_0000, 0x1000)));
        assert_eq!(found[0].bars.iter().flatten().count(), 1);
        let functions = fake.functions.borrow();
        let dwords = &functions[&bdf(0, 1, 0)].dwords;
        for offset in [0x10, 0x18, 0x1c, 0x20, 0x24] {
            assert!(!dwords.contains_key(&offset), "BAR at {offset:#x} written");
        }
        assert_eq!(dwords[&4], 0x0000_0002, "decoding restored");
    }

    #[test]
    fn finds_functions_sizes_bars_and_walks_capabilities() {
        let fake = Fake::default();
        let mut net = virtio_net_with_bar1(0x0010_0007); // capabilities, decoding on
                                                         // BAR4+5: 64-bit prefetchable, 16 KiB at 0x8_0000_0000.
        net.dwords.insert(0x20, 0x0000_000c);
        net.bar_masks.insert(0x20, 0xffff_c000);
        net.dwords.insert(0x24, 0x8);
        net.bar_masks.insert(0x24, 0xffff_ffff);
        // BAR0: 32 I/O ports at 0xc040.
        net.dwords.insert(0x10, 0xc041);
        net.bar_masks.insert(0x10, 0xffff_ffe0);
        // Capabilities: 0x40 MSI-X → 0x50 vendor (virtio) → end.
        net.dwords.insert(0x34, 0x40);
        net.dwords.insert(0x40, 0x0000_5011);
        net.dwords.insert(0x50, 0x0000_0009);
        fake.functions.borrow_mut().insert(bdf(0, 2, 0), net);
        let mut host = FakeFunction::default();
        host.dwords.insert(0, 0x29c0_8086);
        host.dwords.insert(8, 0x0600_0000);
        fake.functions.borrow_mut().insert(bdf(0, 0, 0), host);

        let found = enumerate(&fake, 0, 0, |_, _| true);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].vendor, 0x8086);
        assert_eq!(found[0].class, (6, 0, 0));
        let net = &found[1];
        assert_eq!(
            (net.bdf, net.vendor, net.device),
            (bdf(0, 2, 0), 0x1af4, 0x1041)
        );
        assert_eq!(
            net.bars[0],
            Some(Bar::Io {
                port: 0xc040,
                size: 32
            })
        );
        assert_eq!(net.memory_bar(1), Some((0xfeb0_0000, 0x1000)));
        assert_eq!(
            net.bars[4],
            Some(Bar::Memory {
                addr: 0x8_0000_0000,
                size: 0x4000,
                prefetchable: true,
                wide: true
            })
        );
        assert_eq!(net.bars[5], None);
        assert_eq!(net.capabilities, [(0x11, 0x40), (0x09, 0x50)]);
        // Probing restored the BARs and the command register.
        let functions = fake.functions.borrow();
        let after = &functions[&bdf(0, 2, 0)];
        assert_eq!(after.dwords[&0x20], 0xc);
        assert_eq!(after.dwords[&0x24], 0x8);
        assert_eq!(after.dwords[&4] & 0xffff, 0x7);
    }

    #[test]
    fn multi_function_devices_and_looping_capability_lists() {
        let fake = Fake::default();
        let mut f0 = FakeFunction::default();
        f0.dwords.insert(0, 0x0001_1234);
        f0.dwords.insert(0x0c, 0x0080_0000); // multi-function
        f0.dwords.insert(4, 0x0010_0000);
        f0.dwords.insert(0x34, 0x40);
        f0.dwords.insert(0x40, 0x0000_4005); // points at itself
        fake.functions.borrow_mut().insert(bdf(1, 3, 0), f0);
        let mut f5 = FakeFunction::default();
        f5.dwords.insert(0, 0x0002_1234);
        fake.functions.borrow_mut().insert(bdf(1, 3, 5), f5);
        // Bus 1 is found behind a bridge on bus 0 (header type 1,
        // secondary bus 1); bus 2 holds a device no bridge leads to.
        let mut bridge = FakeFunction::default();
        bridge.dwords.insert(0, 0x0003_1234);
        bridge.dwords.insert(0x0c, 0x0001_0000);
        bridge.dwords.insert(0x18, 0x0000_0100);
        fake.functions.borrow_mut().insert(bdf(0, 1, 0), bridge);
        let mut hidden = FakeFunction::default();
        hidden.dwords.insert(0, 0x0004_1234);
        fake.functions.borrow_mut().insert(bdf(2, 0, 0), hidden);
        let found = enumerate(&fake, 0, 2, |_, _| true);
        let bdfs: Vec<Bdf> = found.iter().map(|f| f.bdf).collect();
        assert_eq!(bdfs, [bdf(0, 1, 0), bdf(1, 3, 0), bdf(1, 3, 5)]);
        assert_eq!(found[1].capabilities.len(), MAX_CAPABILITIES);
    }
}
