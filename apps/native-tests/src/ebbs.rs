//! Per-core representatives: a multicore Ebb's fault handler runs once on
//! each core that uses it, and each core then finds its own representative.

use alloc::boxed::Box;
use alloc::format;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

use ebb_core::{CoreId, EbbError, EbbRef, Multicore, MulticoreEbb, MulticoreRoot};
use ebb_event::{core_count, current_core, spawn_task_on};

use crate::{fail, Outcome, Test};

/// The test, for [`crate::TESTS`].
pub const TEST: Test = Test {
    name: "per_core_representatives_fault_once_per_core",
    run: || Box::pin(run()),
};

/// The test's Ebb: remembers the core it was made for.
pub struct Counted {
    core: CoreId,
}

impl MulticoreEbb for Counted {
    /// How many times the fault handler made a representative.
    type Root = AtomicUsize;

    fn create_rep(root: &'static MulticoreRoot<Self>, core: CoreId) -> Result<Self, EbbError> {
        root.shared().fetch_add(1, Ordering::Relaxed);
        Ok(Counted { core })
    }
}

/// The EbbRef fast path, kept out of line so that a host-side test
/// (`crates/ebb-cli/tests/native_guest.rs`) finds it in the image and checks
/// its machine code: one load from the per-core table, one test-and-branch.
#[inline(never)]
pub fn ebb_ref_fast_path_probe(ebb: EbbRef<Multicore<Counted>>) -> Option<&'static Counted> {
    ebb.get().ok()
}

async fn run() -> Outcome {
    let ebb = Multicore::<Counted>::create(AtomicUsize::new(0)).map_err(|e| fail("create", e))?;
    let cores = core_count();
    let mut handles = Vec::new();
    for core in 0..cores {
        let handle = spawn_task_on(CoreId(core), async move {
            let first: *const Counted = ebb.rep();
            for _ in 0..3 {
                let rep = ebb_ref_fast_path_probe(ebb).ok_or("get failed")?;
                if rep.core != current_core() || !core::ptr::eq(rep, first) {
                    return Err(format!(
                        "core {core} got core {}'s representative",
                        rep.core.0
                    ));
                }
            }
            Ok::<usize, alloc::string::String>(first as usize)
        })
        .map_err(|e| fail("spawn_task_on", e))?;
        handles.push(handle);
    }
    let mut reps = Vec::new();
    for handle in handles {
        reps.push(handle.await.map_err(|e| fail("a core", e))??);
    }
    reps.sort_unstable();
    reps.dedup();
    if reps.len() != cores {
        return Err(format!(
            "{} distinct representatives for {cores} cores",
            reps.len()
        ));
    }
    let made = Multicore::root(ebb)
        .map_err(|e| fail("root", e))?
        .shared()
        .load(Ordering::Relaxed);
    if made != cores {
        return Err(format!(
            "the fault handler ran {made} times for {cores} cores"
        ));
    }
    Ok(())
}
