//! Ebbflow's execution model: one non-preemptive event loop per core.
//!
//! Events run to completion. Each core has an [`EventManager`] (an Ebb with
//! one representative per core) that runs, in this order on every turn of
//! its loop (DESIGN §2):
//!
//! 1. a quiescent point for [`rcu`];
//! 2. pending interrupts (the platform's [`CoreDriver::dispatch`]);
//! 3. messages from other cores ([`spawn_on`], remote wake-ups);
//! 4. expired timers, in deadline order;
//! 5. a bounded batch of queued events and ready tasks;
//! 6. idle handlers;
//! 7. halt until something arrives, when nothing is queued and no idle
//!    handler is installed.
//!
//! The batch bound means queued events cannot starve idle handlers (which
//! poll devices) and idle handlers cannot starve events.
//!
//! Rust `async`/`await` is the continuation mechanism: [`spawn_task`] runs a
//! future on this core; its wakers may be fired from any thread and always
//! resume it on its home core. Code that must look synchronous runs as a
//! stackful event ([`spawn_stackful`]) and may [`block_on`] a future: its
//! stack and registers are saved and the loop goes on until it is resumed.
//! A stackful event may also run on a stack someone else owns
//! ([`spawn_stackful_on`], a C thread's) and end early ([`end_stackful`],
//! a C thread's `exit`).
#![no_std]

extern crate alloc;

mod blocking;
mod error;
mod foreign_stack;
mod idle;
mod mailbox;
mod manager;
pub mod manual_clock;
mod oneshot;
mod platform;
pub mod rcu;
pub mod rcu_map;
mod root;
mod sync;
mod task;
mod time;
mod timer;

pub use blocking::{
    block_on, end_stackful, spawn_stackful, spawn_stackful_on, DEFAULT_STACK_BYTES,
};
pub use error::EventError;
pub use foreign_stack::{ForeignStack, MIN_FOREIGN_STACK_BYTES};
pub use idle::IdleId;
pub use manager::{
    add_idle_handler, cancel_timer, core_count, cpu_time, current_core, memory_bytes, now,
    process_id, remove_idle_handler, run_core, shutdown, sleep, spawn, spawn_on, timer_after,
    timer_every, yield_now, EventManager, EVENT_BATCH, EVENT_MANAGER,
};
pub use oneshot::{oneshot, Receiver, RecvError, Sender};
pub use platform::{CoreDriver, CpuTime, Platform};
pub use root::{start_node, EventRoot};
pub use task::{spawn_task, spawn_task_on, JoinHandle};
pub use time::Instant;
pub use timer::TimerId;
