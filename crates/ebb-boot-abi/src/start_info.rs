//! What QEMU's PVH loader hands a native image at its 32-bit entry (`%ebx`
//! points at it): the `hvm_start_info` structure of Xen's "PVH boot ABI"
//! (`xen/include/public/arch-x86/hvm/start_info.h`), with the command line,
//! the memory map and the ACPI RSDP. `ebb-native` reads it
//! (`arch/x86_64/start_info.rs`); the layouts are defined here, once.

/// `hvm_start_info.magic`: "xEn3" with the top bit of each byte cleared.
pub const MAGIC: u32 = 0x336e_c578;

/// `hvm_start_info`, version 1 (with the memory map).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawStartInfo {
    /// [`MAGIC`].
    pub magic: u32,
    /// 0, or 1 with the memory-map fields.
    pub version: u32,
    /// `SIF_*` flags.
    pub flags: u32,
    /// Number of modules (none here).
    pub nr_modules: u32,
    /// Physical address of the module list.
    pub modlist_paddr: u64,
    /// Physical address of the NUL-terminated command line (0 if none).
    pub cmdline_paddr: u64,
    /// Physical address of the ACPI RSDP (0 if none).
    pub rsdp_paddr: u64,
    /// Physical address of the memory map ([`MemmapEntry`] array).
    pub memmap_paddr: u64,
    /// Entries in the memory map.
    pub memmap_entries: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// One memory-map entry (`hvm_memmap_table_entry`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MemmapEntry {
    /// Physical start.
    pub addr: u64,
    /// Length in bytes.
    pub size: u64,
    /// E820 type ([`e820`]).
    pub kind: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// E820 / PVH memory-map types.
pub mod e820 {
    /// Usable RAM.
    pub const RAM: u32 = 1;
    /// Reserved by firmware or devices.
    pub const RESERVED: u32 = 2;
    /// ACPI tables (reclaimable).
    pub const ACPI: u32 = 3;
    /// ACPI non-volatile storage.
    pub const NVS: u32 = 4;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_pvh_abi() {
        // start_info.h: 56 bytes for version 1; 24 per memory-map entry.
        assert_eq!(core::mem::size_of::<RawStartInfo>(), 56);
        assert_eq!(core::mem::size_of::<MemmapEntry>(), 24);
        assert_eq!(core::mem::offset_of!(RawStartInfo, rsdp_paddr), 32);
        assert_eq!(core::mem::offset_of!(RawStartInfo, memmap_entries), 48);
    }
}
