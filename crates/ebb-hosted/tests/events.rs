//! The event layer on real hosted nodes: spawning, wakers, idle handlers,
//! stackful blocking, errors. Each behaviour runs on both backends where
//! the backend matters. (The timers' order and periods are tested on a
//! manual clock, in crates/ebb-event/tests/timers.rs.)

mod common;

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use common::{on_node, wait_until, BACKENDS};
use ebb_core::{CoreId, EbbError, EbbRef, Shared};
use ebb_event::{
    add_idle_handler, block_on, core_count, current_core, oneshot, remove_idle_handler, shutdown,
    sleep, spawn, spawn_on, spawn_stackful, spawn_stackful_on, spawn_task, spawn_task_on,
    timer_after, EventError, ForeignStack,
};

#[test]
fn spawn_on_runs_on_the_named_core() {
    for backend in BACKENDS {
        let ran_on = on_node(3, backend, || async {
            let mut seen = Vec::new();
            for core in [2, 0, 1, 2] {
                let (tx, rx) = oneshot();
                spawn_on(CoreId(core), move || tx.send(current_core())).unwrap();
                seen.push(rx.await.unwrap());
            }
            seen
        });
        assert_eq!(
            ran_on,
            [CoreId(2), CoreId(0), CoreId(1), CoreId(2)],
            "{backend:?}"
        );
    }
}

#[test]
fn spawning_on_a_missing_core_is_a_clear_error() {
    let error = on_node(2, BACKENDS[0], || async {
        spawn_on(CoreId(5), || {}).unwrap_err()
    });
    assert_eq!(
        error,
        EventError::NoSuchCore {
            core: CoreId(5),
            cores: 2
        }
    );
    assert_eq!(
        error.to_string(),
        "cannot spawn on core 5: this node has 2 cores (0..2)"
    );
    let error = on_node(2, BACKENDS[0], || async {
        spawn_task_on(CoreId(2), async {}).err().unwrap()
    });
    assert_eq!(
        error,
        EventError::NoSuchCore {
            core: CoreId(2),
            cores: 2
        }
    );
    // Off a core there is nothing to spawn on.
    assert_eq!(spawn_on(CoreId(0), || {}), Err(EventError::NotOnCore));
}

/// Pending until woken; its first poll sends the waker to `waker_core`,
/// which wakes it from there.
struct WokenFrom {
    waker_core: CoreId,
    polled_on: Vec<CoreId>,
}

impl Future for WokenFrom {
    type Output = Vec<CoreId>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<CoreId>> {
        self.polled_on.push(current_core());
        if self.polled_on.len() > 1 {
            return Poll::Ready(std::mem::take(&mut self.polled_on));
        }
        let waker = cx.waker().clone();
        spawn_on(self.waker_core, move || {
            assert_eq!(current_core(), CoreId(1));
            waker.wake();
        })
        .unwrap();
        Poll::Pending
    }
}

#[test]
fn a_waker_fired_on_another_core_resumes_the_task_at_home() {
    for backend in BACKENDS {
        let (polled_on, after) = on_node(2, backend, || async {
            let polled_on = WokenFrom {
                waker_core: CoreId(1),
                polled_on: Vec::new(),
            }
            .await;
            (polled_on, current_core())
        });
        assert_eq!(polled_on, [CoreId(0), CoreId(0)], "{backend:?}");
        assert_eq!(after, CoreId(0));
    }
}

#[test]
fn a_waker_fired_from_a_foreign_thread_resumes_the_task_at_home() {
    let cores = on_node(2, BACKENDS[0], || async {
        let (waker_tx, waker_rx) = std::sync::mpsc::channel::<std::task::Waker>();
        let thread = std::thread::spawn(move || waker_rx.recv().unwrap().wake());
        let mut sent = Some(waker_tx);
        let polled = std::future::poll_fn(move |cx| match sent.take() {
            Some(tx) => {
                tx.send(cx.waker().clone()).unwrap();
                Poll::Pending
            }
            None => Poll::Ready(current_core()),
        });
        let core = spawn_task_on(CoreId(1), polled);
        let result = core.unwrap().await.unwrap();
        thread.join().unwrap();
        result
    });
    assert_eq!(cores, CoreId(1));
}

#[test]
fn queued_events_do_not_starve_idle_handlers() {
    for backend in BACKENDS {
        let (idle_runs, events) = on_node(1, backend, || async {
            let events = Rc::new(Cell::new(0u64));
            let stop = Rc::new(Cell::new(false));
            fn respawn(events: Rc<Cell<u64>>, stop: Rc<Cell<bool>>) {
                if !stop.get() {
                    events.set(events.get() + 1);
                    spawn(move || respawn(events, stop));
                }
            }
            respawn(Rc::clone(&events), Rc::clone(&stop));
            let (tx, rx) = oneshot();
            let mut tx = Some(tx);
            let idle_runs = Rc::new(Cell::new(0u64));
            let runs = Rc::clone(&idle_runs);
            let id = add_idle_handler(move || {
                runs.set(runs.get() + 1);
                if runs.get() == 1000 {
                    tx.take().unwrap().send(());
                }
            });
            rx.await.unwrap();
            remove_idle_handler(id);
            stop.set(true);
            (idle_runs.get(), events.get())
        });
        assert!(idle_runs >= 1000, "{backend:?}");
        assert!(
            events >= 1000,
            "events ran {events} times in 1000 loop turns"
        );
    }
}

#[test]
fn idle_handlers_do_not_starve_events_or_timers() {
    for backend in BACKENDS {
        let (chain, timer_fired, polls) = on_node(2, backend, || async {
            let polls = Rc::new(Cell::new(0u64));
            let counter = Rc::clone(&polls);
            let id = add_idle_handler(move || counter.set(counter.get() + 1));
            // A chain of 10 000 events, each queuing the next, with an idle
            // handler polling all along.
            let (tx, rx) = oneshot();
            fn chain(left: u32, done: ebb_event::Sender<u32>, total: u32) {
                if left == 0 {
                    done.send(total);
                } else {
                    spawn(move || chain(left - 1, done, total + 1));
                }
            }
            chain(10_000, tx, 0);
            let total = rx.await.unwrap();
            let fired = Rc::new(Cell::new(false));
            let flag = Rc::clone(&fired);
            timer_after(Duration::from_millis(3), move || flag.set(true));
            let flag = Rc::clone(&fired);
            assert!(wait_until(move || flag.get()).await);
            // A cross-core message still gets through.
            let answer = spawn_task_on(CoreId(1), async { 7 })
                .unwrap()
                .await
                .unwrap();
            assert!(remove_idle_handler(id));
            assert!(!remove_idle_handler(id));
            (total + answer - 7, fired.get(), polls.get())
        });
        assert_eq!(chain, 10_000, "{backend:?}");
        assert!(timer_fired);
        assert!(polls > 0);
    }
}

#[test]
fn an_idle_handler_can_remove_itself() {
    let runs = on_node(1, BACKENDS[0], || async {
        let runs = Rc::new(Cell::new(0));
        let slot = Rc::new(Cell::new(None));
        let (counter, me) = (Rc::clone(&runs), Rc::clone(&slot));
        let id = add_idle_handler(move || {
            counter.set(counter.get() + 1);
            if counter.get() == 3 {
                assert!(remove_idle_handler(me.get().unwrap()));
            }
        });
        slot.set(Some(id));
        sleep(Duration::from_millis(10)).await;
        runs.get()
    });
    assert_eq!(runs, 3);
}

#[test]
fn a_blocked_stackful_event_resumes_with_its_state_intact() {
    for backend in BACKENDS {
        let (state, others_ran) = on_node(2, backend, || async {
            let others = Rc::new(Cell::new(0));
            let counter = Rc::clone(&others);
            let handle = spawn_stackful(move || {
                // State on this event's own stack, across several yields.
                let mut pattern = [0u8; 4096];
                for (i, byte) in pattern.iter_mut().enumerate() {
                    *byte = u8::try_from(i * 7 % 251).unwrap();
                }
                let mut log = vec![current_core().0 as u64];
                let before = counter.get();
                let slept = block_on(async {
                    sleep(Duration::from_millis(5)).await;
                    40
                })
                .unwrap();
                log.push(slept);
                // Other events ran on this core while it was parked.
                assert!(counter.get() > before);
                let remote = block_on(
                    spawn_task_on(CoreId(1), async { current_core().0 as u64 + 100 }).unwrap(),
                )
                .unwrap()
                .unwrap();
                log.push(remote);
                log.push(current_core().0 as u64);
                let intact = pattern
                    .iter()
                    .enumerate()
                    .all(|(i, &byte)| byte == u8::try_from(i * 7 % 251).unwrap());
                log.push(intact as u64);
                log
            });
            let counter = Rc::clone(&others);
            let id = add_idle_handler(move || counter.set(counter.get() + 1));
            let state = handle.await.unwrap();
            remove_idle_handler(id);
            (state, others.get())
        });
        assert_eq!(state, [0, 40, 101, 0, 1], "{backend:?}");
        assert!(others_ran > 0);
    }
}

#[test]
fn an_event_on_a_borrowed_stack_blocks_runs_on_that_stack_and_ends_early() {
    for backend in BACKENDS {
        let (ended, finished, ran_on_it, after_end) = on_node(1, backend, || async {
            // Two borrowed stacks of 32 KiB: someone else's memory, as a C
            // library's mapping for a thread would be.
            let memory: &'static mut [u128] = Box::leak(vec![0u128; 4096].into_boxed_slice());
            let range = memory.as_mut_ptr_range();
            let (limit, base) = (range.start as usize, range.end as usize);
            let middle = limit + (base - limit) / 2;
            // SAFETY: the upper half of the leaked memory is used by
            // nothing but this event.
            let upper = unsafe { ForeignStack::new(middle, base) }.unwrap();
            // SAFETY: the lower half is used by nothing but the second.
            let lower = unsafe { ForeignStack::new(limit, middle) }.unwrap();
            let on_it = Rc::new(Cell::new(false));
            let reached = Rc::new(Cell::new(false));
            let (seen, after) = (Rc::clone(&on_it), Rc::clone(&reached));
            let ending = spawn_stackful_on(upper, move || {
                let local = 0u8;
                seen.set((middle..base).contains(&(std::ptr::addr_of!(local) as usize)));
                block_on(sleep(Duration::from_millis(2))).unwrap();
                // SAFETY: the frames abandoned here own two `Rc`s (leaked,
                // which is safe) and nothing registered anywhere.
                let error = unsafe { ebb_event::end_stackful() };
                after.set(true);
                error
            });
            let finishing = spawn_stackful_on(lower, || 7);
            let ended = ending.await.unwrap();
            let finished = finishing.await.unwrap();
            (ended.is_none(), finished, on_it.get(), reached.get())
        });
        assert!(
            ended,
            "{backend:?}: the handle of an ended event yields None"
        );
        assert_eq!(finished, Some(7), "{backend:?}");
        assert!(
            ran_on_it,
            "{backend:?}: the event ran on the borrowed stack"
        );
        assert!(!after_end, "{backend:?}: nothing after end_stackful ran");
    }
}

#[test]
fn only_events_on_borrowed_stacks_may_end_early() {
    let (outside, in_heap_event) = on_node(1, BACKENDS[0], || async {
        // SAFETY: refused before it abandons anything.
        let outside = unsafe { ebb_event::end_stackful() };
        // SAFETY: refused before it abandons anything.
        let inside = spawn_stackful(|| unsafe { ebb_event::end_stackful() })
            .await
            .unwrap();
        (outside, inside)
    });
    assert_eq!(outside, EventError::NotStackful);
    assert_eq!(in_heap_event, EventError::NotEndable);
    assert!(in_heap_event.to_string().contains("spawn_stackful_on"));
}

#[test]
fn block_on_refuses_outside_stackful_events_and_inside_rcu_reads() {
    let (outside, inside_read) = on_node(1, BACKENDS[0], || async {
        let outside = block_on(async { 1 }).unwrap_err();
        let inside_read =
            spawn_stackful(|| ebb_event::rcu::read(|_| block_on(async { 1 }).unwrap_err()))
                .await
                .unwrap();
        (outside, inside_read)
    });
    assert_eq!(outside, EventError::NotStackful);
    assert!(outside.to_string().contains("stackful"));
    assert_eq!(inside_read, EventError::InsideRcuRead);
    assert_eq!(block_on(async { 1 }), Err(EventError::NotOnCore));
}

#[test]
fn shutting_down_twice_is_an_error() {
    let config = ebb_hosted::Config {
        cores: Some(2),
        pin: false,
        handle_signals: false,
        ..Default::default()
    };
    let second = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&second);
    let code = ebb_hosted::run(config, move || {
        shutdown(3).unwrap();
        *slot.lock().unwrap() = Some(shutdown(4).unwrap_err());
    })
    .unwrap();
    assert_eq!(code, 3, "the first shutdown's code wins");
    let second = second.lock().unwrap().clone().unwrap();
    assert_eq!(second, EventError::AlreadyStopping);
    assert_eq!(
        second.to_string(),
        "the node is already shutting down; shutdown was called twice"
    );
}

#[test]
fn resolving_an_unregistered_ebb_on_a_core_is_an_error() {
    let error = on_node(1, BACKENDS[0], || async {
        let node = ebb_core::current_node().unwrap();
        let id = node.allocator().allocate_local().unwrap();
        EbbRef::<Shared<AtomicUsize>>::bind(id)
            .unwrap()
            .get()
            .unwrap_err()
    });
    assert!(matches!(error, EbbError::Unregistered(_)));
    assert!(error
        .to_string()
        .ends_with("was never registered on this node"));
}

#[test]
fn tasks_and_handles_work_across_cores() {
    let sum = on_node(3, BACKENDS[0], || async {
        let handles: Vec<_> = (0..core_count())
            .map(|core| spawn_task_on(CoreId(core), async move { current_core().0 * 10 }).unwrap())
            .collect();
        let mut sum = 0;
        for handle in handles {
            sum += handle.await.unwrap();
        }
        let local = spawn_task(async { 5 }).await.unwrap();
        sum + local
    });
    assert_eq!(sum, 35);
}

#[test]
fn many_cores_share_few_cpus() {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    let cores = on_node(8, BACKENDS[1], move || async move {
        let handles: Vec<_> = (0..core_count())
            .map(|core| {
                let seen = Arc::clone(&seen);
                spawn_task_on(CoreId(core), async move {
                    seen.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap()
            })
            .collect();
        for handle in handles {
            handle.await.unwrap();
        }
        core_count()
    });
    assert_eq!(cores, 8);
    assert_eq!(count.load(Ordering::SeqCst), 8);
}

#[test]
fn a_panicking_core_stops_the_node_with_an_error() {
    let config = ebb_hosted::Config {
        cores: Some(2),
        pin: false,
        handle_signals: false,
        ..Default::default()
    };
    let started = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&started);
    let result = ebb_hosted::run(config, move || {
        flag.store(true, Ordering::SeqCst);
        spawn_on(CoreId(1), || panic!("deliberate test panic on core 1")).unwrap();
    });
    assert!(started.load(Ordering::SeqCst));
    let error = result.unwrap_err();
    assert!(
        matches!(error, ebb_hosted::HostedError::CorePanicked(CoreId(1))),
        "{error}"
    );
}
