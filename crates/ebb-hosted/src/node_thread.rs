//! A hosted node on a thread of this process, as the in-process cluster
//! tests start theirs (apps/ring, apps/memcached): the node's boot
//! contract as a launcher would write it, its own runtime on a new
//! thread, and a stop signal. Only the node's body differs between them,
//! so it is the one argument that is code.
//!
//! It lives here rather than in `ebb_testbed` because this crate depends
//! on `ebb_testbed` (CPU pinning), which therefore cannot run a hosted node.

use std::future::Future;
use std::net::SocketAddrV4;
use std::ops::Range;
use std::thread;

use ebb_boot_abi::NodeContract;
use ebb_event::Sender;

use crate::{run_task, Config};

/// Starts node `node` of the cluster whose frontend listens at `frontend`,
/// with global ids `ids`, on its own thread under `config`: runs
/// `body(contract)`, then keeps the node (its Ebbs, sockets, tasks) up
/// until the returned sender is sent to or dropped. The contract's
/// Messenger port is 0: the node listens where the kernel puts it (on
/// loopback, in tests) and says so when it announces itself.
///
/// # Panics
/// On the node's thread (failing the test that joins it or waits on what
/// the body sends), if the runtime cannot start.
pub fn start_node<B, Fut>(
    config: Config,
    node: u32,
    frontend: SocketAddrV4,
    ids: Range<u32>,
    body: B,
) -> Sender<()>
where
    B: FnOnce(NodeContract) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let contract = NodeContract {
        node,
        frontend,
        ebb_ids_start: ids.start,
        ebb_ids_end: ids.end,
        messenger_port: 0,
    };
    let (stop_tx, stop_rx) = ebb_event::oneshot::<()>();
    thread::spawn(move || {
        run_task(config, move || async move {
            body(contract).await;
            let _ = stop_rx.await;
        })
        .expect("the node's runtime starts");
    });
    stop_tx
}
