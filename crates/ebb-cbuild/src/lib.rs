//! Ebbflow's C build (host side): Debian source packages, fetched with
//! `apt-get source` and unpacked by `dpkg-source` into a cache
//! ([`debian_source`]), and musl built from one with its system-call entry
//! turned into calls to `__ebb_syscall` by a build-time patch ([`musl`]),
//! whose changed lines against upstream are counted ([`patch`]); C
//! programs built with it for the POSIX personality ([`c_program`]), and
//! SQLite's speedtest1 among them ([`sqlite`]); programs with a build
//! system of their own built by it with a musl compiler command
//! ([`musl_cc`]): Redis ([`redis`]); and the QEMU TCG plugin that counts
//! guest instructions, against the header of QEMU's source package
//! ([`qemu_plugin`]).
#![forbid(unsafe_code)]

pub mod c_program;
pub mod cache_dir;
pub mod command;
pub mod debian_source;
pub mod line_diff;
pub mod musl;
pub mod musl_cc;
pub mod musl_patch;
pub mod patch;
pub mod posix_programs;
pub mod print_uris;
pub mod qemu_plugin;
pub mod redis;
pub mod sqlite;
pub mod stable_hash;
