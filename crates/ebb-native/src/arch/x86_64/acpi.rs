//! Finding the CPUs: the ACPI RSDP → RSDT/XSDT → MADT walk (ACPI 6.5
//! §5.2.5 RSDP, §5.2.7 RSDT, §5.2.8 XSDT, §5.2.12 MADT), reading physical
//! memory through a caller's function so that it is tested on the host with
//! fabricated tables.
//!
//! Only what the platform needs is read: the LAPIC ids of enabled (or
//! online-capable) processors, from Processor Local APIC (type 0) and
//! Processor Local x2APIC (type 9) entries, and the I/O APICs (type 1). Checksums are verified for the
//! RSDP and each table used.

/// Most CPUs recorded.
pub const MAX_CPUS: usize = 64;

/// The processors the MADT lists, in table order (the boot processor is
/// usually first, but callers find it by its own LAPIC id), and its I/O
/// APICs (one walk for both: under TCG a walk costs about a millisecond).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpus {
    ids: [u32; MAX_CPUS],
    len: usize,
    ioapics: [IoApic; MAX_IOAPICS],
    ioapic_count: usize,
}

impl Cpus {
    /// The LAPIC ids.
    pub fn apic_ids(&self) -> &[u32] {
        &self.ids[..self.len]
    }

    /// The I/O APICs, in table order (at most [`MAX_IOAPICS`]).
    pub fn ioapics(&self) -> &[IoApic] {
        &self.ioapics[..self.ioapic_count]
    }

    fn push(&mut self, id: u32) {
        if self.len < MAX_CPUS && !self.apic_ids().contains(&id) {
            self.ids[self.len] = id;
            self.len += 1;
        }
    }
}

/// Why the CPUs could not be found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcpiError {
    /// No "RSD PTR " with a valid checksum at the given address or in the
    /// BIOS area.
    NoRsdp,
    /// A table's checksum or length is wrong.
    BadTable([u8; 4]),
    /// The RSDT/XSDT lists no MADT ("APIC").
    NoMadt,
}

impl core::fmt::Display for AcpiError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AcpiError::NoRsdp => write!(f, "no ACPI RSDP"),
            AcpiError::BadTable(signature) => write!(
                f,
                "ACPI table {} has a bad length or checksum",
                core::str::from_utf8(signature).unwrap_or("????")
            ),
            AcpiError::NoMadt => write!(f, "no MADT (APIC) table"),
        }
    }
}

/// Reads physical memory: fills the buffer from the given address.
pub trait PhysicalMemory {
    /// Copies `buffer.len()` bytes at physical address `addr` into `buffer`.
    fn read(&self, addr: u64, buffer: &mut [u8]);

    /// A little-endian u8/u16/u32/u64 at `addr`.
    fn u64_at(&self, addr: u64, width: usize) -> u64 {
        let mut bytes = [0u8; 8];
        self.read(addr, &mut bytes[..width]);
        u64::from_le_bytes(bytes)
    }
}

const RSDP_SIGNATURE: &[u8; 8] = b"RSD PTR ";
/// Length of a system description table header (ACPI §5.2.6).
const HEADER: u64 = 36;

fn checksum_ok(memory: &dyn PhysicalMemory, addr: u64, len: u64) -> bool {
    let mut sum = 0u8;
    let mut chunk = [0u8; 64];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(64) as usize;
        memory.read(addr + at, &mut chunk[..n]);
        sum = chunk[..n].iter().fold(sum, |s, b| s.wrapping_add(*b));
        at += n as u64;
    }
    sum == 0
}

fn is_rsdp(memory: &dyn PhysicalMemory, addr: u64) -> bool {
    let mut signature = [0u8; 8];
    memory.read(addr, &mut signature);
    &signature == RSDP_SIGNATURE && checksum_ok(memory, addr, 20)
}

/// The RSDP: at `hint` (the PVH start info's `rsdp_paddr`) when it is
/// one, else searched on 16-byte boundaries in the BIOS read-only area
/// 0xE0000–0xFFFFF (ACPI §5.2.5.1).
pub fn find_rsdp(memory: &dyn PhysicalMemory, hint: u64) -> Result<u64, AcpiError> {
    if hint != 0 && is_rsdp(memory, hint) {
        return Ok(hint);
    }
    (0xe_0000..0x10_0000)
        .step_by(16)
        .find(|&addr| is_rsdp(memory, addr))
        .ok_or(AcpiError::NoRsdp)
}

/// A checked table at `addr`: its signature and length.
fn table(memory: &dyn PhysicalMemory, addr: u64) -> Result<([u8; 4], u64), AcpiError> {
    let mut signature = [0u8; 4];
    memory.read(addr, &mut signature);
    let len = memory.u64_at(addr + 4, 4);
    if !(HEADER..=1 << 20).contains(&len) || !checksum_ok(memory, addr, len) {
        return Err(AcpiError::BadTable(signature));
    }
    Ok((signature, len))
}

/// The address of the table with `signature` listed by the XSDT (ACPI
/// 2.0+, else the RSDT), if any.
fn find_table(
    memory: &dyn PhysicalMemory,
    rsdp_hint: u64,
    wanted: &[u8; 4],
) -> Result<Option<u64>, AcpiError> {
    let rsdp = find_rsdp(memory, rsdp_hint)?;
    let revision = memory.u64_at(rsdp + 15, 1);
    let (root, entry_size) = if revision >= 2 && memory.u64_at(rsdp + 24, 8) != 0 {
        (memory.u64_at(rsdp + 24, 8), 8)
    } else {
        (memory.u64_at(rsdp + 16, 4), 4)
    };
    let (_, root_len) = table(memory, root)?;
    Ok((0..(root_len - HEADER) / entry_size)
        .map(|i| memory.u64_at(root + HEADER + i * entry_size, entry_size as usize))
        .find(|&addr| {
            let mut signature = [0u8; 4];
            memory.read(addr, &mut signature);
            &signature == wanted
        }))
}

/// One PCI segment's ECAM window, from the MCFG table (PCI Firmware
/// Specification 3.3 §4.1.2: after the header and 8 reserved bytes,
/// 16-byte entries of base address, segment group, start and end bus).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ecam {
    /// Physical address of bus 0's configuration space (even when
    /// `start_bus` is not 0: the window is addressed from bus 0).
    pub base: u64,
    /// PCI segment group.
    pub segment: u16,
    /// First bus decoded.
    pub start_bus: u8,
    /// Last bus decoded.
    pub end_bus: u8,
}

impl Ecam {
    /// Bytes of configuration space from `base` to the end of `end_bus`
    /// (1 MiB per bus: 32 devices × 8 functions × 4 KiB).
    pub fn len(&self) -> u64 {
        (u64::from(self.end_bus) + 1) << 20
    }

    /// Never: a window decodes at least one bus.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Segment group 0's ECAM window from the MCFG table, or `None` when the
/// firmware has no MCFG (microvm's qboot).
pub fn ecam(memory: &dyn PhysicalMemory, rsdp_hint: u64) -> Result<Option<Ecam>, AcpiError> {
    let Some(mcfg) = find_table(memory, rsdp_hint, b"MCFG")? else {
        return Ok(None);
    };
    let (_, len) = table(memory, mcfg)?;
    let mut at = mcfg + HEADER + 8;
    while at + 16 <= mcfg + len {
        let entry = Ecam {
            base: memory.u64_at(at, 8),
            segment: memory.u64_at(at + 8, 2) as u16,
            start_bus: memory.u64_at(at + 10, 1) as u8,
            end_bus: memory.u64_at(at + 11, 1) as u8,
        };
        if entry.segment == 0 && entry.start_bus <= entry.end_bus {
            return Ok(Some(entry));
        }
        at += 16;
    }
    Ok(None)
}

/// Calls `entry(kind, len, at)` for each interrupt controller structure
/// of the MADT (found through RSDP → XSDT (ACPI 2.0+, else RSDT)).
fn madt_entries(
    memory: &dyn PhysicalMemory,
    rsdp_hint: u64,
    mut entry: impl FnMut(u64, u64, u64),
) -> Result<(), AcpiError> {
    let madt = find_table(memory, rsdp_hint, b"APIC")?.ok_or(AcpiError::NoMadt)?;
    let (_, madt_len) = table(memory, madt)?;
    // Interrupt controller structures follow the header, the local APIC
    // address (4 bytes) and the flags (4 bytes).
    let mut at = madt + HEADER + 8;
    let end = madt + madt_len;
    while at + 2 <= end {
        let kind = memory.u64_at(at, 1);
        let len = memory.u64_at(at + 1, 1);
        if len < 2 || at + len > end {
            break;
        }
        entry(kind, len, at);
        at += len;
    }
    Ok(())
}

/// Walks RSDP → XSDT (ACPI 2.0+, else RSDT) → MADT and lists the CPUs
/// and the I/O APICs.
pub fn cpus(memory: &dyn PhysicalMemory, rsdp_hint: u64) -> Result<Cpus, AcpiError> {
    let mut cpus = Cpus {
        ids: [0; MAX_CPUS],
        len: 0,
        ioapics: [IoApic::default(); MAX_IOAPICS],
        ioapic_count: 0,
    };
    madt_entries(memory, rsdp_hint, |kind, len, at| {
        // Flags bit 0: enabled; bit 1: online capable (ACPI §5.2.12.2).
        match (kind, len) {
            (0, 8..) if memory.u64_at(at + 4, 4) & 0b11 != 0 => {
                cpus.push(memory.u64_at(at + 3, 1) as u32);
            }
            (9, 16..) if memory.u64_at(at + 8, 4) & 0b11 != 0 => {
                cpus.push(memory.u64_at(at + 4, 4) as u32);
            }
            (1, 12..) if cpus.ioapic_count < MAX_IOAPICS => {
                cpus.ioapics[cpus.ioapic_count] = IoApic {
                    id: memory.u64_at(at + 2, 1) as u8,
                    address: memory.u64_at(at + 4, 4) as u32,
                    gsi_base: memory.u64_at(at + 8, 4) as u32,
                };
                cpus.ioapic_count += 1;
            }
            _ => {}
        }
    })?;
    Ok(cpus)
}

/// One I/O APIC of the MADT (type 1, ACPI 6.5 §5.2.12.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoApic {
    /// Its I/O APIC id.
    pub id: u8,
    /// The physical address of its register window.
    pub address: u32,
    /// The global system interrupt of its pin 0.
    pub gsi_base: u32,
}

/// Most I/O APICs recorded.
pub const MAX_IOAPICS: usize = 8;

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    /// Fake physical memory: one buffer at `base`, zero elsewhere.
    struct Fake {
        base: u64,
        bytes: Vec<u8>,
    }

    impl PhysicalMemory for Fake {
        fn read(&self, addr: u64, buffer: &mut [u8]) {
            for (i, byte) in buffer.iter_mut().enumerate() {
                let at = (addr + i as u64).wrapping_sub(self.base) as usize;
                *byte = self.bytes.get(at).copied().unwrap_or(0);
            }
        }
    }

    fn fix_checksum(bytes: &mut [u8], at: usize) {
        let sum = bytes.iter().fold(0u8, |s, b| s.wrapping_add(*b));
        bytes[at] = bytes[at].wrapping_sub(sum);
    }

    fn sdt(signature: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(signature);
        t.extend_from_slice(&((36 + body.len()) as u32).to_le_bytes());
        t.resize(36, 0);
        t.extend_from_slice(body);
        fix_checksum(&mut t, 9);
        t
    }

    /// Memory at 0xe0000: RSDP (rev 0) at +0x10, RSDT at +0x100 listing a
    /// FACP at +0x200 and the MADT at +0x300.
    fn machine(madt_entries: &[u8]) -> Fake {
        let base = 0xe_0000u64;
        let mut bytes = std::vec![0u8; 0x1000];
        let mut rsdp = Vec::from(&RSDP_SIGNATURE[..]);
        rsdp.extend_from_slice(&[0; 7]); // checksum, OEM id
        rsdp.push(0); // revision 0: RSDT only
        rsdp.extend_from_slice(&((base + 0x100) as u32).to_le_bytes());
        fix_checksum(&mut rsdp, 8);
        bytes[0x10..0x10 + rsdp.len()].copy_from_slice(&rsdp);
        let mut list = Vec::new();
        list.extend_from_slice(&((base + 0x200) as u32).to_le_bytes());
        list.extend_from_slice(&((base + 0x300) as u32).to_le_bytes());
        let rsdt = sdt(b"RSDT", &list);
        bytes[0x100..0x100 + rsdt.len()].copy_from_slice(&rsdt);
        let facp = sdt(b"FACP", &[0; 8]);
        bytes[0x200..0x200 + facp.len()].copy_from_slice(&facp);
        let mut body = std::vec![0, 0, 0xe0, 0xfe, 1, 0, 0, 0];
        body.extend_from_slice(madt_entries);
        let madt = sdt(b"APIC", &body);
        bytes[0x300..0x300 + madt.len()].copy_from_slice(&madt);
        Fake { base, bytes }
    }

    fn local_apic(uid: u8, id: u8, flags: u32) -> Vec<u8> {
        let mut e = std::vec![0, 8, uid, id];
        e.extend_from_slice(&flags.to_le_bytes());
        e
    }

    #[test]
    fn lists_enabled_local_apics_in_order() {
        let mut entries = local_apic(0, 0, 1);
        entries.extend(local_apic(1, 2, 1));
        entries.extend([1, 12, 2, 0, 0, 0, 0xc0, 0xfe, 24, 0, 0, 0]); // an IOAPIC
        entries.extend(local_apic(2, 5, 0)); // disabled, not online capable
        entries.extend(local_apic(3, 7, 2)); // online capable
        let mut x2 = std::vec![9, 16, 0, 0];
        x2.extend_from_slice(&300u32.to_le_bytes());
        x2.extend_from_slice(&1u32.to_le_bytes());
        x2.extend_from_slice(&9u32.to_le_bytes());
        entries.extend(x2);
        let memory = machine(&entries);
        // No hint: found by the BIOS-area scan.
        let cpus = cpus(&memory, 0).unwrap();
        assert_eq!(cpus.apic_ids(), &[0, 2, 7, 300]);
        assert_eq!(
            cpus.ioapics(),
            [IoApic {
                id: 2,
                address: 0xfec0_0000,
                gsi_base: 24
            }]
        );
    }

    #[test]
    fn finds_the_ecam_window_in_the_mcfg() {
        let mut memory = machine(&local_apic(0, 0, 1));
        assert_eq!(ecam(&memory, 0), Ok(None));
        // Make the FACP slot (+0x200) an MCFG with one entry.
        let mut body = std::vec![0u8; 8];
        body.extend_from_slice(&0xb000_0000u64.to_le_bytes());
        body.extend_from_slice(&[0, 0, 0, 0xff, 0, 0, 0, 0]);
        let mcfg = sdt(b"MCFG", &body);
        memory.bytes[0x200..0x200 + mcfg.len()].copy_from_slice(&mcfg);
        let found = ecam(&memory, 0).unwrap().unwrap();
        assert_eq!(
            found,
            Ecam {
                base: 0xb000_0000,
                segment: 0,
                start_bus: 0,
                end_bus: 0xff
            }
        );
        assert_eq!(found.len(), 0x1000_0000);
        // The MADT is still found after the MCFG.
        assert_eq!(cpus(&memory, 0).unwrap().apic_ids(), &[0]);
    }

    #[test]
    fn a_hint_is_used_and_bad_tables_are_refused() {
        let memory = machine(&local_apic(0, 4, 1));
        assert_eq!(find_rsdp(&memory, 0xe_0010), Ok(0xe_0010));
        assert_eq!(cpus(&memory, 0xe_0010).unwrap().apic_ids(), &[4]);

        let mut broken = machine(&local_apic(0, 4, 1));
        broken.bytes[0x300 + 40] ^= 1; // MADT flags: checksum now wrong
        assert_eq!(cpus(&broken, 0), Err(AcpiError::BadTable(*b"APIC")));

        let empty = Fake {
            base: 0,
            bytes: Vec::new(),
        };
        assert_eq!(cpus(&empty, 0).unwrap_err(), AcpiError::NoRsdp);
    }
}
