//! QEMU's firmware configuration device (`docs/specs/fw_cfg.rst` in
//! QEMU): named files the launcher passes with `-fw_cfg name=...,file=...`,
//! read through its x86 I/O ports. Used for a C program's packed files
//! (`ebb_boot_abi::PACKED_FILES_NAME`).
//!
//! The selector port takes a 16-bit key; the data port then gives the
//! selected item's bytes one at a time. Key 0 is the signature `QEMU`,
//! key 0x19 the file directory: a big-endian 32-bit count, then per file
//! a big-endian 32-bit size, a big-endian 16-bit key, 2 reserved bytes
//! and a 56-byte NUL-padded name.

use alloc::vec;
use alloc::vec::Vec;
use core::arch::asm;
use core::fmt;

use x86_64::instructions::port::Port;

/// The selector (16-bit writes) and data (8-bit reads) ports on x86.
const SELECTOR_PORT: u16 = 0x510;
const DATA_PORT: u16 = 0x511;
/// The signature's key and the file directory's.
const SIGNATURE: u16 = 0x0000;
const FILE_DIR: u16 = 0x0019;
/// A directory entry's size and its name's.
const ENTRY: usize = 64;
const NAME: usize = 56;

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FwCfgError {
    /// The file is larger than the caller allows.
    TooLarge {
        /// Its size.
        size: u32,
        /// The limit.
        limit: u32,
    },
}

impl fmt::Display for FwCfgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FwCfgError::TooLarge { size, limit } => write!(
                f,
                "the fw_cfg file has {size} bytes, more than the {limit} allowed"
            ),
        }
    }
}

/// Selects the item `key`: reads start at its first byte.
fn select(key: u16) {
    let mut port: Port<u16> = Port::new(SELECTOR_PORT);
    // SAFETY: writing a key to fw_cfg's selector only chooses what the data
    // port reads next; without the device the write goes nowhere.
    unsafe { port.write(key) };
}

/// Fills `buffer` with the selected item's next bytes.
fn read_into(buffer: &mut [u8]) {
    if buffer.is_empty() {
        return;
    }
    // `rep insb` reads the data port `rcx` times into `[rdi]`: one
    // instruction for the whole buffer, where a loop would take a trip
    // through QEMU's translated code per byte as well.
    // SAFETY: `rdi` and `rcx` describe `buffer`, which we own mutably;
    // the direction flag is clear (System V ABI), so it fills upwards;
    // reading fw_cfg's data port has no effect but advancing its offset.
    unsafe {
        asm!(
            "rep insb",
            in("dx") DATA_PORT,
            inout("rdi") buffer.as_mut_ptr() => _,
            inout("rcx") buffer.len() => _,
            options(nostack, preserves_flags)
        );
    }
}

/// Whether a fw_cfg device answers (its signature is `QEMU`).
pub fn present() -> bool {
    select(SIGNATURE);
    let mut signature = [0u8; 4];
    read_into(&mut signature);
    &signature == b"QEMU"
}

/// The fw_cfg file `name`, if the device and the file are there; files
/// larger than `limit` bytes are an error.
pub fn read_file(name: &str, limit: u32) -> Result<Option<Vec<u8>>, FwCfgError> {
    if !present() {
        return Ok(None);
    }
    select(FILE_DIR);
    let mut count = [0u8; 4];
    read_into(&mut count);
    let mut entry = [0u8; ENTRY];
    for _ in 0..u32::from_be_bytes(count) {
        read_into(&mut entry);
        let stored = &entry[8..8 + NAME];
        let length = stored.iter().position(|&b| b == 0).unwrap_or(NAME);
        if &stored[..length] != name.as_bytes() {
            continue;
        }
        let size = u32::from_be_bytes([entry[0], entry[1], entry[2], entry[3]]);
        if size > limit {
            return Err(FwCfgError::TooLarge { size, limit });
        }
        let key = u16::from_be_bytes([entry[4], entry[5]]);
        let mut bytes = vec![0u8; size as usize];
        select(key);
        read_into(&mut bytes);
        return Ok(Some(bytes));
    }
    Ok(None)
}
