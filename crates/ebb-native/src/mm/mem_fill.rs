//! `memset`, replacing `compiler_builtins`' weak one in native images.
//!
//! Why: the builtin fills with `rep stosq`/`rep stosb`, and QEMU's TCG runs a
//! `rep`-prefixed string instruction one iteration per trip through its
//! execution loop, about 50× slower than a loop of ordinary stores, which it
//! translates once and chains. Zeroing page tables, per-core EbbRef tables,
//! stacks and allocator metadata at boot is megabytes, so this is most of
//! the boot time under TCG (measured: `./ebb bench boot`). With hardware
//! virtualization both are fast.

/// Fills `n` bytes at `dest` with the byte `value` (C's `memset`).
///
/// # Safety
/// `dest` must be valid for `n` bytes of writes (C's contract).
#[no_mangle]
pub unsafe extern "C" fn memset(dest: *mut u8, value: i32, n: usize) -> *mut u8 {
    // C passes the byte as an int; only its low 8 bits count.
    let byte = value.to_le_bytes()[0];
    let mut at = 0;
    // Bytes up to 8-byte alignment, then words, then the tail. Volatile
    // stores keep the compiler from turning the loops back into `memset`.
    while at < n && !(dest as usize + at).is_multiple_of(8) {
        // SAFETY: `at < n`, inside the caller's range.
        unsafe { dest.wrapping_add(at).write_volatile(byte) };
        at += 1;
    }
    let word = u64::from_ne_bytes([byte; 8]);
    while at + 8 <= n {
        // SAFETY: `at + 8 <= n`, inside the caller's range, 8-aligned.
        unsafe { dest.wrapping_add(at).cast::<u64>().write_volatile(word) };
        at += 8;
    }
    while at < n {
        // SAFETY: `at < n`, inside the caller's range.
        unsafe { dest.wrapping_add(at).write_volatile(byte) };
        at += 1;
    }
    dest
}
