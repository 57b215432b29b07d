//! How the launcher hands a native image a directory of files
//! (`./ebb run APP --native --files DIR`, issue 18): packed as a cpio
//! "newc" archive and passed as a QEMU firmware-configuration file
//! (`-fw_cfg name=NAME,file=PACK`, QEMU's `docs/specs/fw_cfg.rst`), which
//! the guest reads after boot, when its heap can hold it.

/// The fw_cfg file name: QEMU reserves `opt/` for users, and asks for a
/// vendor prefix under it.
pub const PACKED_FILES_NAME: &str = "opt/org.ebbflow/files";

/// The fw_cfg file with 32 random bytes from the host (`/dev/urandom`)
/// that seed a C program's getrandom where the CPU has no RDRAND. A file,
/// not a command-line word: `/proc/PID/cmdline` and printed commands
/// would show it.
pub const SEED_NAME: &str = "opt/org.ebbflow/seed";

/// The seed's length in bytes.
pub const SEED_BYTES: usize = 32;

/// The largest pack the launcher makes. The guest holds the pack and the
/// files loaded from it at once (twice its size) next to the program, in
/// a default guest of 512 MiB.
pub const PACKED_FILES_MAX: u64 = 128 << 20;
