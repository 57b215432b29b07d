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

static MAP_DROPPED: AtomicUsize = AtomicUsize::new(0);

struct Tracked(u64);

impl Drop for Tracked {
    fn drop(&mut self) {
        MAP_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn rcu_map_frees_a_removed_value_only_after_a_reader_on_another_core_is_done() {
    use ebb_event::rcu_map::{MapUpdate, RcuHashMap};
    let (freed_during_read, read_value, freed_after) = on_node(2, BACKENDS[0], || async {
        let map: &'static RcuHashMap<u64, Tracked> =
            Box::leak(Box::new(RcuHashMap::with_buckets(16)));
        map.update(&7, || 7, |_| MapUpdate::Put(Tracked(70), ()));
        let before = MAP_DROPPED.load(Ordering::SeqCst);
        let reading = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let (inside, go) = (Arc::clone(&reading), Arc::clone(&release));
        // Core 1 holds a reference to the value inside one read section.
        let reader = spawn_task_on(CoreId(1), async move {
            read(|guard| {
                let value = map.get(&7, guard).expect("present");
                inside.store(true, Ordering::SeqCst);
                while !go.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                value.0
            })
        })
        .unwrap();
        let inside = Arc::clone(&reading);
        assert!(wait_until(move || inside.load(Ordering::SeqCst)).await);
        map.update(
            &7,
            || 7,
            |current| {
                assert!(current.is_some());
                MapUpdate::Remove(())
            },
        );
        assert!(
            read(|guard| map.get(&7, guard).is_none()),
            "removed for new readers at once"
        );
        for _ in 0..20 {
            sleep(Duration::from_millis(1)).await;
        }
        let freed_during_read = MAP_DROPPED.load(Ordering::SeqCst) - before;
        release.store(true, Ordering::SeqCst);
        let read_value = reader.await.unwrap();
        assert!(wait_until(|| MAP_DROPPED.load(Ordering::SeqCst) > before).await);
        (
            freed_during_read,
            read_value,
            MAP_DROPPED.load(Ordering::SeqCst) - before,
        )
    });
    assert_eq!(
        freed_during_read, 0,
        "a value was freed while a reader held it"
    );
    assert_eq!(read_value, 70);
    assert_eq!(freed_after, 1);
}

#[test]
fn rcu_map_agrees_with_a_model_under_random_updates() {
    use ebb_event::rcu_map::{MapUpdate, RcuHashMap};
    use std::collections::HashMap;
    let agreed = on_node(1, BACKENDS[0], || async {
        let map: RcuHashMap<u32, u32> = RcuHashMap::with_buckets(8);
        let mut model = HashMap::new();
        let mut state = 12345u32;
        for step in 0..20_000u32 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let key = state % 64;
            match state % 3 {
                0 => {
                    map.update(&key, || key, |_| MapUpdate::Put(step, ()));
                    model.insert(key, step);
                }
                1 => {
                    map.update(&key, || key, |_| MapUpdate::Remove(()));
                    model.remove(&key);
                }
                _ => {}
            }
            if step % 1000 == 0 {
                sleep(Duration::from_micros(10)).await;
            }
        }
        let all_equal = read(|guard| {
            (0..64).all(|key| map.get(&key, guard).copied() == model.get(&key).copied())
        });
        all_equal && map.len() == model.len()
    });
    assert!(agreed);
}
