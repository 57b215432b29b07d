//! Reading the PVH start-info structure (its layout:
//! `ebb_boot_abi::start_info`): command line and memory map, copied into
//! this image at once so that the memory they sit in can be reused.

use core::fmt;

use ebb_boot_abi::start_info::{MemmapEntry, RawStartInfo, MAGIC};
use spin::Once;

// The longest command line kept.
use ebb_boot_abi::CMDLINE_MAX;
/// Most memory-map entries kept.
const MEMMAP_MAX: usize = 128;

/// What the platform keeps from the start info.
pub struct StartInfo {
    cmdline: [u8; CMDLINE_MAX],
    cmdline_len: usize,
    memmap: [MemmapEntry; MEMMAP_MAX],
    memmap_len: usize,
    /// Physical address of the ACPI RSDP (0 if the loader gave none).
    pub rsdp: u64,
}

impl StartInfo {
    /// The kernel command line (`-append`); empty if it was not UTF-8.
    pub fn cmdline(&self) -> &str {
        core::str::from_utf8(&self.cmdline[..self.cmdline_len]).unwrap_or("")
    }

    /// The memory map.
    pub fn memmap(&self) -> &[MemmapEntry] {
        &self.memmap[..self.memmap_len]
    }
}

/// Why the start info is unusable.
#[derive(Debug)]
pub enum StartInfoError {
    /// Not the PVH magic number.
    BadMagic(u32),
    /// Version 0 has no memory map.
    NoMemoryMap,
}

impl fmt::Display for StartInfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartInfoError::BadMagic(magic) => {
                write!(
                    f,
                    "magic {magic:#x}, expected {MAGIC:#x} (not booted through PVH?)"
                )
            }
            StartInfoError::NoMemoryMap => write!(f, "no memory map (start info version 0)"),
        }
    }
}

static INFO: Once<StartInfo> = Once::new();

/// Reads and copies the start info at physical address `paddr`. Called once,
/// on the boot identity map (physical = virtual below 4 GiB).
pub fn read(paddr: u32) -> Result<&'static StartInfo, StartInfoError> {
    // SAFETY: PVH passes the start info's address in %ebx; the boot page
    // tables identity-map the first 4 GiB, where the loader put it, and
    // nothing writes it while we read. `read_unaligned` needs no alignment.
    let raw = unsafe { core::ptr::read_unaligned(paddr as usize as *const RawStartInfo) };
    if raw.magic != MAGIC {
        return Err(StartInfoError::BadMagic(raw.magic));
    }
    if raw.version < 1 || raw.memmap_paddr == 0 {
        return Err(StartInfoError::NoMemoryMap);
    }
    let mut info = StartInfo {
        cmdline: [0; CMDLINE_MAX],
        cmdline_len: 0,
        memmap: [MemmapEntry::default(); MEMMAP_MAX],
        memmap_len: 0,
        rsdp: raw.rsdp_paddr,
    };
    if raw.cmdline_paddr != 0 {
        let mut at = raw.cmdline_paddr as usize as *const u8;
        while info.cmdline_len < CMDLINE_MAX {
            // SAFETY: the loader's NUL-terminated command line, identity
            // mapped like the start info; we stop at the NUL.
            let byte = unsafe { at.read() };
            if byte == 0 {
                break;
            }
            info.cmdline[info.cmdline_len] = byte;
            info.cmdline_len += 1;
            at = at.wrapping_add(1);
        }
    }
    let entries = (raw.memmap_entries as usize).min(MEMMAP_MAX);
    let table = raw.memmap_paddr as usize as *const MemmapEntry;
    for i in 0..entries {
        // SAFETY: `memmap_entries` entries lie at `memmap_paddr`, identity
        // mapped; `i` is below that count.
        info.memmap[i] = unsafe { core::ptr::read_unaligned(table.wrapping_add(i)) };
    }
    info.memmap_len = entries;
    Ok(INFO.call_once(|| info))
}

/// The start info [`read`] kept.
pub fn get() -> Option<&'static StartInfo> {
    INFO.get()
}
