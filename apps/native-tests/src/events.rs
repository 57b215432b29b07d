//! Events across cores (`spawn_on`, which natively is a wake-up IPI) and
//! timers (deadline order, cancellation) on every core.

use alloc::boxed::Box;
use alloc::format;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::time::Duration;

use ebb_core::CoreId;
use ebb_event::{
    cancel_timer, core_count, current_core, now, oneshot, spawn_on, timer_after, Sender,
};

use crate::{fail, Outcome, Test};

pub const SPAWN_ON_TEST: Test = Test {
    name: "spawn_on_hops_across_every_core_in_order",
    run: || Box::pin(spawn_on_hops()),
};

pub const TIMERS_TEST: Test = Test {
    name: "timers_fire_in_deadline_order_and_cancelled_ones_never",
    run: || Box::pin(timers_on_every_core()),
};

/// One hop: records this core, then sends the rest of the trip to the next
/// core, or the path back when the trip is over.
fn hop(mut path: Vec<usize>, hops_left: usize, done: Sender<Vec<usize>>) {
    path.push(current_core().0);
    if hops_left == 0 {
        done.send(path);
        return;
    }
    let next = CoreId((current_core().0 + 1) % core_count());
    spawn_on(next, move || hop(path, hops_left - 1, done)).expect("the next core exists");
}

async fn spawn_on_hops() -> Outcome {
    let cores = core_count();
    let hops = 2 * cores + 1;
    let (done, path) = oneshot();
    spawn_on(CoreId(1 % cores), move || hop(Vec::new(), hops, done))
        .map_err(|e| fail("spawn_on", e))?;
    let path = path.await.map_err(|e| fail("the trip", e))?;
    let expected: Vec<usize> = (0..=hops).map(|i| (1 + i) % cores).collect();
    if path != expected {
        return Err(format!("went {path:?}, expected {expected:?}"));
    }
    Ok(())
}

/// On this core: timers due in 30, 10, 20 ms and a cancelled one due in
/// 15 ms; reports the order they fired in once the last is due.
fn timers_here(done: Sender<(usize, bool, Vec<u64>)>) {
    let fired = Rc::new(RefCell::new(Vec::new()));
    // Deadlines from one start, not from each call: on a loaded host a
    // guest can lose 10 ms between two calls, which would reorder
    // deadlines set "30 ms from now" and then "20 ms from now".
    let start = now();
    for ms in [30u64, 10, 20] {
        let fired = fired.clone();
        let delay = Duration::from_millis(ms).saturating_sub(now() - start);
        timer_after(delay, move || fired.borrow_mut().push(ms));
    }
    let doomed = {
        let fired = fired.clone();
        timer_after(Duration::from_millis(15), move || {
            fired.borrow_mut().push(15)
        })
    };
    let cancelled = cancel_timer(doomed);
    let cancelled_again = cancel_timer(doomed);
    timer_after(Duration::from_millis(45), move || {
        let order = fired.borrow().clone();
        done.send((current_core().0, cancelled && !cancelled_again, order));
    });
}

async fn timers_on_every_core() -> Outcome {
    let mut results = Vec::new();
    for core in 0..core_count() {
        let (done, result) = oneshot();
        spawn_on(CoreId(core), move || timers_here(done)).map_err(|e| fail("spawn_on", e))?;
        results.push(result);
    }
    for (core, result) in results.into_iter().enumerate() {
        let (ran_on, cancelled, order) = result.await.map_err(|e| fail("a core", e))?;
        if ran_on != core {
            return Err(format!("core {core}'s timers ran on core {ran_on}"));
        }
        if !cancelled {
            return Err(format!(
                "core {core}: cancel_timer did not report one cancellation"
            ));
        }
        if order != [10, 20, 30] {
            return Err(format!(
                "core {core}: timers fired as {order:?}, expected [10, 20, 30]"
            ));
        }
    }
    Ok(())
}
