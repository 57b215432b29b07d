//! The per-core representative table and per-core context.
//!
//! This is the one place in the shared crates that depends on the target:
//! [`crate::EbbRef::get`] must inline to one load, so where the table lives
//! has to be known at compile time, and that is the only thing that differs.
//!
//! * Hosted (any target with an OS): a core is a pinned thread, and the table
//!   is a `thread_local!` array with a `const` initialiser and no destructor,
//!   which compiles to a plain `%fs`-relative access.
//! * Native (`target_os = "none"`): the table sits at one fixed virtual
//!   address that each core's page tables back with different physical pages
//!   (DESIGN §1), so the lookup is `TABLE_VADDR + 8 * id`.
//!
//! Entries hold type-erased representative pointers. They are written only
//! by the owning core (on a miss, or when a platform installs a
//! representative) and are only read by it.

use core::cell::Cell;
use core::ptr;

use crate::id::MAX_EBB_IDS;
use crate::node::Node;

const SLOTS: usize = MAX_EBB_IDS as usize;

/// Who the current thread is: a core of a node, or nobody.
#[derive(Clone, Copy)]
pub(crate) struct Context {
    pub core: usize,
    pub node: *const Node,
}

impl Context {
    /// Not a core. All zeroes, so a freshly mapped (zeroed) native context
    /// page reads as `NONE`.
    pub const NONE: Context = Context {
        core: 0,
        node: ptr::null(),
    };
}

#[cfg(not(target_os = "none"))]
mod imp {
    extern crate std;

    use super::*;

    struct Table([Cell<*const ()>; SLOTS]);

    /// One bit per slot ever stored since the last `clear`, so that leaving
    /// a core clears those slots instead of all 65,536 (which takes Miri
    /// half a minute per node).
    struct Stored([Cell<u64>; SLOTS / 64]);

    std::thread_local! {
        static TABLE: Table = const { Table([const { Cell::new(ptr::null()) }; SLOTS]) };
        static STORED: Stored = const { Stored([const { Cell::new(0) }; SLOTS / 64]) };
        static CONTEXT: Cell<Context> = const { Cell::new(Context::NONE) };
    }

    #[inline(always)]
    pub(crate) fn load(slot: usize) -> *const () {
        TABLE.with(|table| {
            debug_assert!(slot < SLOTS);
            // SAFETY: `slot` comes from `EbbId::slot`, and every `EbbId` is
            // constructed below `MAX_EBB_IDS` (== SLOTS), so it is in bounds.
            unsafe { table.0.get_unchecked(slot) }.get()
        })
    }

    pub(crate) fn store(slot: usize, rep: *const ()) {
        TABLE.with(|table| table.0[slot].set(rep));
        STORED.with(|stored| {
            let word = &stored.0[slot / 64];
            word.set(word.get() | 1 << (slot % 64));
        });
    }

    pub(crate) fn clear() {
        STORED.with(|stored| {
            for (index, word) in stored.0.iter().enumerate() {
                let mut slots = word.replace(0);
                while slots != 0 {
                    let slot = index * 64 + slots.trailing_zeros() as usize;
                    slots &= slots - 1;
                    TABLE.with(|table| table.0[slot].set(ptr::null()));
                }
            }
        });
    }

    pub(crate) fn context() -> Context {
        CONTEXT.with(Cell::get)
    }

    pub(crate) fn set_context(context: Context) {
        CONTEXT.with(|cell| cell.set(context));
    }
}

#[cfg(target_os = "none")]
mod imp {
    use super::*;

    // Where every core finds its own table and context page, and how the
    // context page is shared with ebb-native: `ebb_boot_abi::memory_layout`.
    // The context page holds the context, then one bit per table page that
    // [`store`] wrote (128 pages of 512 entries), so that [`clear`]
    // touches only those. The platform may map table pages on first
    // touch, and a page never stored to holds only nulls; clearing all
    // 65 536 entries would map every page at exit (and need memory then).
    use ebb_boot_abi::{CONTEXT_MAX_BYTES, CONTEXT_VADDR, STORED_PAGES_VADDR, TABLE_VADDR};
    const _: () = assert!(SLOTS == ebb_boot_abi::TABLE_SLOTS);
    const _: () = assert!(core::mem::size_of::<Context>() <= CONTEXT_MAX_BYTES);
    const SLOTS_PER_PAGE: usize = 4096 / core::mem::size_of::<usize>();
    const PAGE_WORDS: usize = SLOTS / SLOTS_PER_PAGE / 64;
    const _: () = assert!(PAGE_WORDS * 8 <= ebb_boot_abi::STORED_PAGES_BYTES);

    /// The stored-pages bitmap of this core.
    fn stored_pages() -> &'static [Cell<u64>; PAGE_WORDS] {
        // Only this core uses its context page (`Cell` is not `Sync`).
        // SAFETY: the context page is mapped (zeroed: no page stored yet)
        // with the table, see `entry`; these bytes are in it, unused else.
        unsafe { &*(STORED_PAGES_VADDR as *const [Cell<u64>; PAGE_WORDS]) }
    }

    /// This core's table entry for `slot`.
    #[inline(always)]
    fn entry(slot: usize) -> &'static Cell<*const ()> {
        let table = TABLE_VADDR as *const Cell<*const ()>;
        // SAFETY: `slot < SLOTS` by the `EbbId` invariant (and checked by
        // `store`), so the address stays inside the table.
        let entry = unsafe { table.add(slot) };
        // The platform maps this core's zeroed table pages at TABLE_VADDR
        // before running code on it (ebb-native: each on its first touch,
        // from the page-fault handler) and never unmaps them.
        // SAFETY: so `entry` is valid; only this core uses it (`Cell` is
        // not `Sync`).
        unsafe { &*entry }
    }

    #[inline(always)]
    pub(crate) fn load(slot: usize) -> *const () {
        entry(slot).get()
    }

    pub(crate) fn store(slot: usize, rep: *const ()) {
        assert!(slot < SLOTS);
        let page = slot / SLOTS_PER_PAGE;
        let word = &stored_pages()[page / 64];
        word.set(word.get() | 1 << (page % 64));
        entry(slot).set(rep);
    }

    pub(crate) fn clear() {
        for (index, word) in stored_pages().iter().enumerate() {
            let mut pages = word.replace(0);
            while pages != 0 {
                let page = index * 64 + pages.trailing_zeros() as usize;
                pages &= pages - 1;
                let first = page * SLOTS_PER_PAGE;
                for slot in first..first + SLOTS_PER_PAGE {
                    entry(slot).set(ptr::null());
                }
            }
        }
    }

    pub(crate) fn context() -> Context {
        // SAFETY: the context page is mapped (zeroed, which reads as
        // `Context::NONE`) with the table, see `load`; only this core uses it.
        unsafe { *(CONTEXT_VADDR as *const Context) }
    }

    pub(crate) fn set_context(context: Context) {
        // SAFETY: the context page is mapped writable with the table (see
        // `load`) and only this core uses it, so the store races with nothing.
        unsafe { *(CONTEXT_VADDR as *mut Context) = context }
    }
}

pub(crate) use imp::{clear, context, load, set_context, store};
