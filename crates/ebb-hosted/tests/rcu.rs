//! RCU grace periods on real hosted nodes.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{on_node, wait_until, BACKENDS};
use ebb_core::CoreId;
use ebb_event::rcu::{call_rcu, read, RcuCell};
use ebb_event::{sleep, spawn_on, spawn_task_on};

#[test]
fn a_callback_waits_for_a_busy_core_to_pass_a_quiescent_point() {
    for backend in BACKENDS {
        let (early, ran_after_release) = on_node(2, backend, || async {
            let entered = Arc::new(AtomicBool::new(false));
            let release = Arc::new(AtomicBool::new(false));
            let (inside, go) = (Arc::clone(&entered), Arc::clone(&release));
            // Core 1 sits inside one long event: it passes no quiescent
            // point until released.
            spawn_on(CoreId(1), move || {
                inside.store(true, Ordering::SeqCst);
                while !go.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
            let inside = Arc::clone(&entered);
            assert!(wait_until(move || inside.load(Ordering::SeqCst)).await);

            let ran = Rc::new(Cell::new(false));
            let released_first = Rc::new(Cell::new(false));
            let (flag, order, go) = (
                Rc::clone(&ran),
                Rc::clone(&released_first),
                Arc::clone(&release),
            );
            call_rcu(move || {
                flag.set(true);
                order.set(go.load(Ordering::SeqCst));
            })
            .unwrap();
            // Core 0 keeps turning its loop meanwhile.
            for _ in 0..20 {
                sleep(Duration::from_millis(1)).await;
            }
            let early = ran.get();
            release.store(true, Ordering::SeqCst);
            let flag = Rc::clone(&ran);
            assert!(wait_until(move || flag.get()).await);
            (early, released_first.get())
        });
        assert!(
            !early,
            "an RCU callback ran while core 1 was inside an event ({backend:?})"
        );
        assert!(ran_after_release);
    }
}

#[test]
fn an_idle_core_does_not_stall_grace_periods() {
    for backend in BACKENDS {
        let ran = on_node(3, backend, || async {
            // Cores 1 and 2 have nothing to do: they halt, and nothing here
            // wakes them.
            sleep(Duration::from_millis(5)).await;
            let ran = Rc::new(Cell::new(0));
            for _ in 0..3 {
                let counter = Rc::clone(&ran);
                call_rcu(move || counter.set(counter.get() + 1)).unwrap();
            }
            let counter = Rc::clone(&ran);
            wait_until(move || counter.get() == 3).await;
            ran.get()
        });
        assert_eq!(ran, 3, "{backend:?}");
    }
}

static DROPPED: AtomicUsize = AtomicUsize::new(0);

struct Versioned(u64);

impl Drop for Versioned {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn rcu_cell_readers_see_whole_values_and_old_ones_are_freed_after_a_grace_period() {
    let (right_after, later, remote_read) = on_node(2, BACKENDS[0], || async {
        let cell: &'static RcuCell<Versioned> = Box::leak(Box::new(RcuCell::new(Versioned(1))));
        let before = DROPPED.load(Ordering::SeqCst);
        cell.replace(Versioned(2)).unwrap();
        assert_eq!(read(|guard| cell.load(guard).0), 2);
        let right_after = DROPPED.load(Ordering::SeqCst) - before;
        let remote_read = spawn_task_on(CoreId(1), async move { read(|guard| cell.load(guard).0) })
            .unwrap()
            .await
            .unwrap();
        assert!(wait_until(|| DROPPED.load(Ordering::SeqCst) > before).await);
        (
            right_after,
            DROPPED.load(Ordering::SeqCst) - before,
            remote_read,
        )
    });
    assert_eq!(
        right_after, 0,
        "the old value was freed before a grace period"
    );
    assert_eq!(later, 1);
    assert_eq!(remote_read, 2);
}
