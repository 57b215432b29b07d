//! The reusable part of `./ebb`: booting native images under QEMU
//! ([`native`]), their networks ([`native::network_args`]; [`tap`] for
//! `--net tap`), and running child processes ([`child`]). The `ebb-cli`
//! binary is the command line on top; benchmarks (`bench/`) boot native
//! images with the same QEMU command lines through this library.

pub mod child;
pub mod native;
pub mod tap;
