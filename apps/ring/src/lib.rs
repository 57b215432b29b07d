//! Ring, the "hello" of distribution (DESIGN §5): a frontend hands each
//! node a slice of data through the worker Ebb (the data shipped as
//! IoBufs, the Messenger's payload), the nodes pass a token around a ring,
//! each calling the next itself, and the frontend gathers the results and
//! checks them. A node lost mid-run is reported, calls to it fail with an
//! error, and the others finish.
//!
//! * [`node`]: the node role, what the `ring` program does when a launcher
//!   starts it with a boot contract (`./ebb cluster up ring --nodes 3`).
//! * [`Worker`]: the worker Ebb and its messages ([`WORK`], [`TOKEN`]).
//! * [`run_frontend`]: the frontend's logic, written once against the
//!   Messenger; the frontend program calls it with the nodes it started.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod bound;
mod frontend;
pub mod node;
mod wire;
mod work;
mod worker;

pub use bound::{token_bound, work_bound, DEFAULT_CALL_TIMEOUT};
pub use frontend::{
    run_frontend, NodeOutcome, Report, RoundOutcome, EXIT_MISMATCH, EXIT_NO_NODES, EXIT_OK,
};
pub use wire::{
    BadControl, Token, TokenReply, TooManyHops, WorkDone, WorkOrder, WorkerNode, BAD_CONTROL,
    TOKEN, WORK,
};
pub use work::{digest, digest_bytes, slice_data, PlanError, WorkPlan};
pub use worker::{Worker, WorkerRep, WorkerRoot};

use ebb_app::{App, Args, Launch, UsageError};
use ebb_event::spawn_task;

/// The node program.
pub static APP: App = App {
    name: "ring",
    about: "A node of the ring application: works on the slices the frontend sends and passes the token on.",
    options: &[],
    operands: None,
    setup,
};

/// What a node started on its own is told.
pub const NOT_A_NODE: &str =
    "ring runs as a node of a cluster: start it with ./ebb cluster up ring --nodes N";

fn setup(_args: &Args) -> Result<Launch, UsageError> {
    match ebb_app::node_contract() {
        Ok(Some(contract)) => Ok(Launch::new(move || {
            spawn_task(node::join(contract));
        })),
        Ok(None) => Err(UsageError(NOT_A_NODE.into())),
        // The platform refuses a wrong contract before the application
        // sets up; said again here all the same.
        Err(error) => Err(UsageError(alloc::format!("a wrong boot contract: {error}"))),
    }
}
