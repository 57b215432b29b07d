//! `hello`: the smallest complete Ebbflow application.
//!
//! It creates a multicore Ebb (one representative per core, made lazily by
//! its fault handler), sends work to every core, waits on each core's
//! timer, awaits on core 0 the results computed on the other cores, prints
//! one line per core and exits 0.
//!
//! This library is the application, written once against Ebbflow's
//! interfaces (`no_std` + `alloc`, `ebb-app`); `main.rs` runs it on every
//! platform.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use core::cell::Cell;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;

use ebb_core::{CoreId, EbbError, Multicore, MulticoreEbb, MulticoreRoot};
use ebb_event::{core_count, current_core, now, sleep, spawn_task, spawn_task_on, timer_after};

use ebb_app::{App, Args, Launch, UsageError};

/// The application: no options of its own.
pub static APP: App = App {
    name: "hello",
    about: "Says hello from every core: a multicore Ebb, work sent to each core, a timer on each core and an async result awaited across cores. Exits 0.",
    options: &[],
    operands: None,
    setup,
};

fn setup(_args: &Args) -> Result<Launch, UsageError> {
    Ok(Launch::new(say_hello))
}

/// Per-core representative: counts the greetings made on its core.
struct Greeter {
    core: CoreId,
    greetings: Cell<u64>,
}

impl MulticoreEbb for Greeter {
    /// How many representatives the fault handler made, node-wide.
    type Root = AtomicUsize;

    fn create_rep(root: &'static MulticoreRoot<Self>, core: CoreId) -> Result<Self, EbbError> {
        root.shared().fetch_add(1, Ordering::Relaxed);
        Ok(Greeter {
            core,
            greetings: Cell::new(0),
        })
    }
}

impl Greeter {
    fn greet(&self) -> u64 {
        self.greetings.set(self.greetings.get() + 1);
        self.greetings.get()
    }
}

/// Core 0's first event: greets from every core, then shuts the node down
/// with exit code 0.
pub fn say_hello() {
    let greeter =
        Multicore::<Greeter>::create(AtomicUsize::new(0)).expect("creating the greeter Ebb");
    spawn_task(async move {
        let cores = core_count();
        let handles: Vec<_> = (0..cores)
            .map(|core| {
                spawn_task_on(CoreId(core), async move {
                    let started = now();
                    sleep(Duration::from_millis(5)).await;
                    let waited = now() - started;
                    let rep = greeter.rep();
                    assert_eq!(rep.core, current_core(), "a representative is per core");
                    format!(
                        "hello from core {core} of {cores}: greeting #{} by this core's representative, after a {:.1} ms timer",
                        rep.greet(),
                        waited.as_secs_f64() * 1e3
                    )
                })
                .expect("every core below core_count exists")
            })
            .collect();
        for handle in handles {
            match handle.await {
                Ok(line) => ebb_app::println!("{line}"),
                Err(error) => ebb_app::error!("a core did not answer: {error}"),
            }
        }
        let root = Multicore::root(greeter).expect("the greeter's root");
        ebb_app::println!(
            "{} representatives made, one per core; stopping",
            root.shared().load(Ordering::Relaxed)
        );
        timer_after(Duration::from_millis(1), || {
            ebb_app::exit::stop(ebb_app::exit::SUCCESS);
        });
    });
}
