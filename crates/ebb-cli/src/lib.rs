//! The reusable part of `./ebb`: booting native images under QEMU
//! ([`native`]), their networks ([`native::network_args`]; [`tap`] for
//! `--net tap`), running child processes ([`child`]) and stopping them on
//! SIGTERM or SIGINT ([`stop`]), and clusters of native nodes
//! ([`cluster`], `./ebb cluster`). The `ebb-cli`
//! binary is the command line on top; benchmarks (`bench/`) boot native
//! images with the same QEMU command lines through this library.

pub mod build_profile;
pub mod c_apps;
pub mod child;
pub mod cluster;
pub mod native;
pub mod packed_files;
pub mod stop;
pub mod tap;
