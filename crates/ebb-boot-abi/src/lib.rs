//! The contract between a native Ebbflow image and what starts it, defined
//! once for both sides: the launcher (`ebb-cli`, `./ebb run APP --native`)
//! and the guest (`ebb-native`, with `ebb-core` for the EbbRef table).
//!
//! * [`cmdline`]: the kernel command line (`-append`): platform options
//!   `key=value` ([`PlatformOptions`]), then `--` and the application's
//!   arguments, each one word ([`app_args`]: percent-encoded, so that
//!   empty arguments and spaces pass).
//! * [`node_contract`]: a node's id, the frontend's address, its global
//!   Ebb ids and its Messenger port ([`NodeContract`]), four of those
//!   platform options.
//! * [`exit`]: how the guest's exit code leaves QEMU (`isa-debug-exit`)
//!   and how the launcher decodes QEMU's status.
//! * [`start_info`]: what the loader (QEMU's PVH boot) hands the guest:
//!   the `hvm_start_info` structure and its memory-map entries.
//! * [`memory_layout`]: fixed virtual addresses both `ebb-core` and
//!   `ebb-native` rely on: the per-core EbbRef table and context page.
//!
//! Platform-neutral and free of `unsafe`, so both sides use this very
//! code and it is unit-tested on the host.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod app_args;
pub mod cmdline;
pub mod exit;
#[cfg(target_pointer_width = "64")]
pub mod memory_layout;
pub mod node_contract;
pub mod packed_files;
pub mod start_info;

pub use cmdline::*;
pub use exit::*;
#[cfg(target_pointer_width = "64")]
pub use memory_layout::*;
pub use node_contract::{NodeContract, NodeContractError, NODE_KEYS};
pub use packed_files::{PACKED_FILES_MAX, PACKED_FILES_NAME, SEED_BYTES, SEED_NAME};
pub use start_info::e820;
