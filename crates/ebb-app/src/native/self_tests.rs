//! The native platform's own in-guest tests (moved here from
//! `apps/native-tests`, which runs them through
//! [`crate::self_test::platform_tests`]): demand paging, interrupt-stack
//! guard pages and the large-allocation window.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::ToString;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use ebb_core::CoreId;
use ebb_event::{core_count, spawn_task_on};
use ebb_native::regions::{pages_filled, DemandZeroRegion};

use crate::self_test::{Outcome, SelfTest as Test};

/// The tests, in the order they run.
pub const NATIVE_TESTS: &[Test] = &[
    Test {
        name: "demand_zero_region_is_filled_on_first_touch",
        run: || Box::pin(demand_zero_region()),
    },
    Test {
        name: "interrupt_stacks_have_guard_pages_on_every_core",
        run: || Box::pin(interrupt_stack_guards()),
    },
    Test {
        name: "large_allocations_are_mapped_in_their_window_and_returned",
        run: || Box::pin(large_allocation()),
    },
];

/// Every core's five interrupt stacks (core 0's included, which start as
/// statics) lie in the stacks' region, mapped, with an unmapped guard page
/// below each: an overflow faults instead of corrupting memory.
async fn interrupt_stack_guards() -> Outcome {
    for core in 0..core_count() {
        let seen = spawn_task_on(CoreId(core), async move {
            let stacks = ebb_native::interrupt_stacks(core)
                .ok_or(format!("core {core}: no guarded interrupt stacks"))?;
            for (slot, (bottom, top)) in stacks.into_iter().enumerate() {
                if !ebb_native::is_mapped(bottom) || !ebb_native::is_mapped(top - 8) {
                    return Err(format!("core {core}: stack {slot} is not mapped"));
                }
                if ebb_native::is_mapped(bottom - 1) {
                    return Err(format!(
                        "core {core}: stack {slot} at {bottom:#x} has no guard page below"
                    ));
                }
            }
            Ok(())
        })
        .map_err(|e| format!("spawn_task_on: {e}"))?
        .await
        .map_err(|e| format!("core {core}: {e}"))?;
        seen?;
    }
    Ok(())
}

/// A 288 MiB `Vec` — larger than ebb-mem's 256 MiB arenas, so no
/// physically contiguous block could ever hold it — lands in the large
/// allocations' window, page by page from the page allocator, reads back
/// what was written on every page, and gives its memory back when freed.
async fn large_allocation() -> Outcome {
    const LEN: usize = 288 << 20;
    let (free_before, _) = ebb_native::page_allocator_bytes();
    let mut big: Vec<u8> = Vec::with_capacity(LEN);
    let addr = big.as_ptr() as u64;
    if !ebb_native::large::contains(addr) {
        return Err(format!("288 MiB at {addr:#x}, outside the window"));
    }
    let (free_during, _) = ebb_native::page_allocator_bytes();
    if free_before - free_during < LEN {
        return Err(format!(
            "288 MiB mapped but the page allocator gave {} bytes",
            free_before - free_during
        ));
    }
    big.resize(LEN, 0);
    for page in (0..LEN).step_by(4096) {
        big[page] = mark(page / 4096);
        big[page + 4095] = !mark(page / 4096);
    }
    for page in (0..LEN).step_by(4096) {
        if big[page] != mark(page / 4096) || big[page + 4095] != !mark(page / 4096) {
            return Err(format!("page {} does not read back", page / 4096));
        }
    }
    drop(big);
    let (free_after, _) = ebb_native::page_allocator_bytes();
    // The window's page tables (one 4 KiB table per 2 MiB, and a
    // directory) stay: addresses are not reused.
    let tables = ((LEN >> 21) + 4) * 4096;
    if free_after + tables < free_before {
        return Err(format!(
            "freed, but {} bytes did not come back",
            free_before - free_after
        ));
    }
    Ok(())
}

/// A 64 MiB demand-zero region: only the pages touched get memory (one
/// page-fault fill each, reads included), untouched bytes read zero, and
/// another core sees the same pages without faulting again (the regions'
/// page tables are shared).
async fn demand_zero_region() -> Outcome {
    const LEN: usize = 64 << 20;
    let before = pages_filled();
    let filled = move || pages_filled() - before;
    let mut region = DemandZeroRegion::new(LEN).ok_or("no region")?;
    let offsets = [0, 20 << 20, LEN - 1];
    for (value, &offset) in (1u8..).zip(&offsets) {
        region.as_mut_slice()[offset] = value;
    }
    if filled() != 3 {
        return Err(format!("3 pages touched, {} filled", filled()));
    }
    if region.as_slice()[40 << 20] != 0 || region.as_slice()[1] != 0 {
        return Err("untouched bytes are not zero".to_string());
    }
    if filled() != 4 {
        return Err(format!("4 pages touched, {} filled", filled()));
    }
    let other = CoreId(1 % core_count());
    let (region, seen) = spawn_task_on(other, async move {
        let seen: Vec<u8> = offsets.iter().map(|&o| region.as_slice()[o]).collect();
        (region, seen)
    })
    .map_err(|e| format!("spawn_task_on: {e}"))?
    .await
    .map_err(|e| format!("core {}: {e}", other.0))?;
    if seen != [1, 2, 3] {
        return Err(format!(
            "core {} read {seen:?}, expected [1, 2, 3]",
            other.0
        ));
    }
    if filled() != 4 {
        return Err(format!("the other core faulted again: {} filled", filled()));
    }
    drop(region);
    every_core_touches_the_same_fresh_pages().await
}

/// Core `core`'s byte (cores are fewer than 255).
#[allow(clippy::cast_possible_truncation)]
fn mark(core: usize) -> u8 {
    (core % 255) as u8 + 1
}

/// Every core writes its own byte into each of 16 fresh pages at once:
/// however the faults race, each page is filled once and no write is lost.
async fn every_core_touches_the_same_fresh_pages() -> Outcome {
    const PAGES: usize = 16;
    let cores = core_count();
    let before = pages_filled();
    let region = Arc::new(
        DemandZeroRegion::new(PAGES * 4096)
            .ok_or("no region")?
            .into_atomic(),
    );
    let mut handles = Vec::new();
    for core in 0..cores {
        let region = region.clone();
        let handle = spawn_task_on(CoreId(core), async move {
            let bytes = region.bytes();
            for page in 0..PAGES {
                bytes[page * 4096 + core].store(mark(core), Ordering::Relaxed);
            }
        })
        .map_err(|e| format!("spawn_task_on: {e}"))?;
        handles.push(handle);
    }
    for handle in handles {
        handle.await.map_err(|e| format!("a core: {e}"))?;
    }
    for page in 0..PAGES {
        for core in 0..cores {
            let byte = region.bytes()[page * 4096 + core].load(Ordering::Relaxed);
            if byte != mark(core) {
                return Err(format!(
                    "page {page}: core {core}'s write was lost ({byte})"
                ));
            }
        }
    }
    let filled = pages_filled() - before;
    if filled != PAGES as u64 {
        return Err(format!(
            "{PAGES} pages touched by {cores} cores, {filled} filled"
        ));
    }
    Ok(())
}
