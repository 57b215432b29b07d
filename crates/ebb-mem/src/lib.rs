//! Ebbflow memory allocators (see `README.md` beside this crate and
//! `docs/ARCHITECTURE.md`).
//!
//! - [`page::PageAllocator`]: a power-of-two buddy allocator
//!   ([`buddy`]) per NUMA node.
//! - [`slab::SlabAllocator`]: fixed-size objects; a per-core representative
//!   ([`slab::CoreCache`]) with no atomic operation on its fast paths, remote
//!   frees returned to the owning core through lock-free queues
//!   ([`remote_free`]), per-node depots and a root.
//! - [`GeneralPurposeAllocator`]: `GlobalAlloc` over size classes
//!   ([`size_class`]), each served by a slab allocator, and virtual regions
//!   for large requests.
//! - [`vmem::VMemAllocator`]: virtual regions carrying their owner's
//!   page-fault policy; [`region_cache::RegionCache`] keeps a few freed
//!   large allocations for reuse.
//!
//! The crate is `no_std` and does not use `alloc`: an allocator cannot
//! allocate to run. Platform code sits behind two traits — [`CoreLocal`]
//! (where this core's cache is) and [`page::PageSource`] /
//! [`vmem::AddressSpace`] (where memory comes from) — implemented for Linux
//! in [`hosted`] (feature `hosted`).
#![no_std]

pub mod buddy;
pub mod gpa;
#[cfg(feature = "hosted")]
pub mod hosted;
pub mod page;
pub mod region_cache;
pub mod remote_free;
pub mod size_class;
pub mod slab;
pub mod sync;
pub mod vmem;

pub use gpa::{CoreLocal, GeneralPurposeAllocator, MemoryRoot};
pub use page::PageAllocator;
pub use slab::SlabAllocator;
pub use vmem::VMemAllocator;

/// Size of a page: the granule of the page allocator and of regions.
pub const PAGE_SIZE: usize = 4096;
