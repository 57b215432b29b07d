//! The global allocator (ebb-mem's general-purpose allocator natively) on
//! every core at once, with each core's objects freed by another core
//! (remote frees).

use alloc::boxed::Box;
use alloc::format;
use alloc::vec::Vec;

use ebb_core::CoreId;
use ebb_event::{core_count, current_core, spawn_task_on};

use crate::{fail, Outcome, Test};

pub const TEST: Test = Test {
    name: "allocators_on_every_core_with_cross_core_frees",
    run: || Box::pin(run()),
};

/// Object sizes: every small size class range, a slab-sized one, and large
/// ones (regions).
const SIZES: &[usize] = &[8, 24, 64, 100, 512, 1500, 4096, 9000, 32 * 1024, 100_000];
const ROUNDS: usize = 40;

/// The byte at `byte` of object `index` made by `core` (mod 251: a u8).
#[allow(clippy::cast_possible_truncation)]
fn pattern(core: usize, index: usize, byte: usize) -> u8 {
    ((core * 31 + index * 7 + byte) % 251) as u8
}

/// Allocates objects of every size on this core, filled with a pattern.
fn allocate(core: usize) -> Vec<Vec<u8>> {
    let mut objects = Vec::new();
    for round in 0..ROUNDS {
        for (i, &size) in SIZES.iter().enumerate() {
            let index = round * SIZES.len() + i;
            objects.push((0..size).map(|b| pattern(core, index, b)).collect());
        }
    }
    objects
}

/// Checks another core's objects, then frees them here.
fn check_and_free(from: usize, objects: Vec<Vec<u8>>) -> Outcome {
    for (index, object) in objects.iter().enumerate() {
        let size = SIZES[index % SIZES.len()];
        if object.len() != size
            || object
                .iter()
                .enumerate()
                .any(|(b, &v)| v != pattern(from, index, b))
        {
            return Err(format!(
                "object {index} ({size} bytes) from core {from} is corrupt on core {}",
                current_core().0
            ));
        }
    }
    drop(objects);
    Ok(())
}

async fn run() -> Outcome {
    let cores = core_count();
    let mut handles = Vec::new();
    for core in 0..cores {
        let handle = spawn_task_on(CoreId(core), async move {
            let mut freed_elsewhere = 0;
            for _ in 0..3 {
                let objects = allocate(core);
                let count = objects.len();
                let next = CoreId((core + 1) % cores);
                let checked = spawn_task_on(next, async move { check_and_free(core, objects) })
                    .map_err(|e| fail("spawn_task_on", e))?;
                checked.await.map_err(|e| fail("the freeing core", e))??;
                // And some freed right here, among the remote frees.
                let local = allocate(core);
                check_and_free(core, local)?;
                freed_elsewhere += count;
            }
            Ok::<usize, alloc::string::String>(freed_elsewhere)
        })
        .map_err(|e| fail("spawn_task_on", e))?;
        handles.push(handle);
    }
    for handle in handles {
        let freed = handle.await.map_err(|e| fail("a core", e))??;
        if freed != 3 * ROUNDS * SIZES.len() {
            return Err(format!("only {freed} objects went across"));
        }
    }
    Ok(())
}
