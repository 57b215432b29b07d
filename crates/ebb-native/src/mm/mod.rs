//! Memory management over the page tables of `arch`: the heap (ebb-mem's
//! allocators as the `#[global_allocator]`), large allocations in their
//! own window, demand-paged virtual regions, and `memset`.

pub mod large;
mod mem_fill;
pub(crate) mod memory;
pub(crate) mod page_fault;
pub mod regions;
