//! Timers, on a clock the tests move by hand (`ebb_event::manual_clock`):
//! nothing here waits in real time, and every assertion is on the order
//! and count of firings, or on exact virtual times.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use ebb_event::manual_clock::ManualClock;
use ebb_event::{
    cancel_timer, now, oneshot, shutdown, sleep, spawn_task, timer_after, timer_every, Instant,
};

/// Runs `body` as a task on a one-core node on a fresh manual clock (on a
/// thread of its own: a thread is one core of one node at a time) and
/// returns its output.
fn on_manual_clock<F, Fut, R>(body: F) -> R
where
    F: FnOnce(&'static ManualClock) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = R> + 'static,
    R: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let clock: &'static ManualClock = Box::leak(Box::new(ManualClock::new()));
        let code = clock
            .run(move || {
                spawn_task(async move {
                    tx.send(body(clock).await).expect("the test waits");
                    shutdown(0).expect("first shutdown");
                });
            })
            .expect("the node runs");
        assert_eq!(code, 0);
    })
    .join()
    .expect("the node's thread");
    rx.recv().expect("the body finished")
}

const MS: u64 = 1_000_000;

#[test]
fn timers_fire_in_deadline_order_and_cancelled_ones_never_fire() {
    let (fired, at) = on_manual_clock(|_| async {
        let fired = Rc::new(RefCell::new(Vec::new()));
        let mut cancelled = Vec::new();
        for (label, delay_ms, cancel) in [
            ("c", 30, false),
            ("a", 10, false),
            ("x", 15, true),
            ("b", 20, false),
            ("a2", 10, false),
            ("y", 1, true),
            ("d", 40, false),
        ] {
            let log = Rc::clone(&fired);
            let id = timer_after(Duration::from_millis(delay_ms), move || {
                log.borrow_mut().push((label, now()))
            });
            if cancel {
                cancelled.push(id);
            }
        }
        for id in cancelled {
            assert!(cancel_timer(id));
            assert!(!cancel_timer(id), "cancelling twice reports false");
        }
        sleep(Duration::from_millis(80)).await;
        let fired = fired.borrow().clone();
        (fired, now())
    });
    assert_eq!(
        fired,
        [
            ("a", Instant(10 * MS)),
            ("a2", Instant(10 * MS)),
            ("b", Instant(20 * MS)),
            ("c", Instant(30 * MS)),
            ("d", Instant(40 * MS)),
        ],
        "each fires at its own deadline, ties in the order armed"
    );
    assert_eq!(at, Instant(80 * MS));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the executor paths of the other tests, slow under Miri; the timer queue's periods have no unsafe code"
)]
fn periodic_timers_repeat_until_cancelled() {
    let (ticks, at_cancel, after) = on_manual_clock(|_| async {
        let ticks = Rc::new(RefCell::new(Vec::new()));
        let log = Rc::clone(&ticks);
        let id = timer_every(Duration::from_millis(2), move || {
            log.borrow_mut().push(now())
        });
        sleep(Duration::from_millis(11)).await;
        assert!(cancel_timer(id));
        assert!(!cancel_timer(id));
        let at_cancel = ticks.borrow().len();
        sleep(Duration::from_millis(20)).await;
        let ticks = ticks.borrow().clone();
        (ticks, at_cancel, now())
    });
    let expected: Vec<_> = (1..=5).map(|n| Instant(2 * n * MS)).collect();
    assert_eq!(ticks, expected, "one tick per period, on time");
    assert_eq!(at_cancel, 5);
    assert_eq!(after, Instant(31 * MS));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the executor paths of the other tests, slow under Miri; the timer queue's periods have no unsafe code"
)]
fn a_busy_core_skips_missed_periods_instead_of_making_them_up() {
    let ticks = on_manual_clock(|clock| async move {
        let ticks = Rc::new(RefCell::new(Vec::new()));
        let log = Rc::clone(&ticks);
        let id = timer_every(Duration::from_millis(10), move || {
            log.borrow_mut().push(now())
        });
        sleep(Duration::from_millis(15)).await;
        // The core is busy for 43 ms: the periods at 20..50 ms pass unseen.
        clock.advance(Duration::from_millis(43));
        sleep(Duration::from_millis(25)).await;
        cancel_timer(id);
        let ticks = ticks.borrow().clone();
        ticks
    });
    assert_eq!(
        ticks,
        [
            Instant(10 * MS),
            Instant(58 * MS),
            Instant(60 * MS),
            Instant(70 * MS),
            Instant(80 * MS)
        ],
        "one late tick for the missed ones, then back on the 10 ms grid"
    );
}

#[test]
fn an_hour_long_sleep_takes_no_real_time() {
    let (woke, timer_fired) = on_manual_clock(|_| async {
        let fired = Rc::new(Cell::new(None));
        let flag = Rc::clone(&fired);
        timer_after(Duration::from_secs(1800), move || flag.set(Some(now())));
        let (tx, rx) = oneshot();
        timer_after(Duration::from_secs(3600), move || tx.send(now()));
        (rx.await.expect("the timer sends"), fired.get())
    });
    assert_eq!(woke, Instant(3600 * 1_000 * MS));
    assert_eq!(timer_fired, Some(Instant(1800 * 1_000 * MS)));
}

/// Counts its wake-ups.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_sleep_dropped_before_its_time_wakes_nobody() {
    // A waiter that sleeps again after every wake-up (a C thread's
    // epoll_wait with a timeout) spun when each dropped sleep woke it.
    let (woken_by_drop, woken_by_send) = on_manual_clock(|_| async {
        let count = std::sync::Arc::new(CountingWaker(std::sync::atomic::AtomicUsize::new(0)));
        let waker = std::task::Waker::from(std::sync::Arc::clone(&count));
        let mut cx = std::task::Context::from_waker(&waker);
        let mut nap = Box::pin(sleep(Duration::from_millis(5)));
        assert!(nap.as_mut().poll(&mut cx).is_pending());
        drop(nap);
        let woken_by_drop = count.0.load(std::sync::atomic::Ordering::SeqCst);
        // A receiver dropped after a poll is not woken by a later send.
        let (sender, mut receiver) = oneshot::<u8>();
        assert!(std::pin::Pin::new(&mut receiver).poll(&mut cx).is_pending());
        drop(receiver);
        sender.send(1);
        let woken_by_send = count.0.load(std::sync::atomic::Ordering::SeqCst) - woken_by_drop;
        (woken_by_drop, woken_by_send)
    });
    assert_eq!((woken_by_drop, woken_by_send), (0, 0));
}
