//! Fixed virtual addresses of a native image that more than one crate
//! relies on: `ebb-core` reads and writes the per-core EbbRef table and
//! context (`ebb-core/src/table.rs`), `ebb-native` maps them
//! (`arch/x86_64/paging.rs`) and keeps its per-core allocator cache in
//! the context page.
//!
//! Every core's page tables map the table and the context page at the
//! same addresses, each to its own physical pages (DESIGN §1), so
//! `EbbRef::get` is one load from `TABLE_VADDR + 8 * id`:
//!
//! ```text
//! TABLE_VADDR          TABLE_SLOTS entries of 8 bytes (128 pages)
//! CONTEXT_VADDR        the context page:
//!   + 0                  ebb-core's Context (core, node), at most CONTEXT_MAX_BYTES
//!   + CONTEXT_MAX_BYTES  ebb-core's stored-pages bitmap (one bit per table page)
//!   + PAGE_SIZE - 8      ebb-native's core cache pointer (CORE_CACHE_SLOT)
//! ```

/// The page size of the table's mapping.
pub const PAGE_SIZE: usize = 4096;

/// Where every core finds its own EbbRef table: inside the top 2 GiB, so
/// that the address fits the kernel code model's sign-extended 32-bit
/// displacement (one `mov` with no extra register).
pub const TABLE_VADDR: usize = 0xFFFF_FFFF_F000_0000;

/// Entries in the table: one per Ebb id (`ebb_core::MAX_EBB_IDS`).
pub const TABLE_SLOTS: usize = 1 << 16;

/// Pages the table and the context page take together.
pub const TABLE_PAGES: usize = TABLE_SLOTS * 8 / PAGE_SIZE + 1;

/// The per-core context page, right after the table.
pub const CONTEXT_VADDR: usize = TABLE_VADDR + TABLE_SLOTS * 8;

/// Room for `ebb-core`'s `Context` at the start of the context page.
pub const CONTEXT_MAX_BYTES: usize = 64;

/// `ebb-core`'s bitmap of the table pages it stored to (so that clearing
/// the table touches only those), after the context.
pub const STORED_PAGES_VADDR: usize = CONTEXT_VADDR + CONTEXT_MAX_BYTES;

/// Bytes of the stored-pages bitmap: one bit per table page.
pub const STORED_PAGES_BYTES: usize = TABLE_SLOTS * 8 / PAGE_SIZE / 8;

/// `ebb-native`'s pointer to this core's allocator cache: the context
/// page's last 8 bytes.
pub const CORE_CACHE_SLOT: usize = CONTEXT_VADDR + PAGE_SIZE - 8;

// The context page's users do not overlap, and the table plus context
// page end below the top of the address space.
const _: () = assert!(STORED_PAGES_VADDR + STORED_PAGES_BYTES <= CORE_CACHE_SLOT);
const _: () = assert!(TABLE_VADDR
    .checked_add(TABLE_PAGES * PAGE_SIZE - 1)
    .is_some());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_page_follows_the_table_and_ends_with_the_core_cache() {
        assert_eq!(CONTEXT_VADDR, TABLE_VADDR + (TABLE_PAGES - 1) * PAGE_SIZE);
        assert_eq!(CORE_CACHE_SLOT + 8, TABLE_VADDR + TABLE_PAGES * PAGE_SIZE);
        assert_eq!(STORED_PAGES_BYTES * 8, TABLE_PAGES - 1);
    }
}
