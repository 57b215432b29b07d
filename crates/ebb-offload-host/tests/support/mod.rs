//! What the FileSystem tests share: hosted nodes over kernel TCP on
//! 127.0.0.1 (node 0 serving a directory, node 1 its client), and
//! scratch directories.

// Each test binary uses part of it.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use ebb_core::NodeId;
use ebb_messenger::{acceptor, create_messenger, MessengerSettings, FRONTEND_NODE};
use ebb_offload::RemoteFileSystem;
use ebb_offload_host::FileServer;

/// How long a test waits for a node's answer (every call inside is
/// bounded by [`CALL_BOUND`] as well).
pub const WITHIN: Duration = Duration::from_secs(120);

/// The client's bound on each call.
pub const CALL_BOUND: Duration = Duration::from_secs(30);

/// One core, unpinned, no signal handling: tests run side by side.
pub fn node_config() -> ebb_hosted::Config {
    ebb_hosted::Config::one_core_side_by_side()
}

/// A scratch directory, deleted when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A new empty one.
    pub fn new(what: &str) -> Scratch {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ebb-offload-{what}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// A path inside it.
    pub fn join(&self, path: &str) -> PathBuf {
        self.0.join(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Node 0 on its own thread, serving `root` (or nothing), until dropped.
pub struct ServerNode {
    /// Where its Messenger listens.
    pub addr: SocketAddr,
    /// Its server, to look at open files.
    pub server: Option<Arc<FileServer>>,
    stop: Option<ebb_event::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl ServerNode {
    /// Starts node 0, sharing `root` when given.
    pub fn start(root: Option<&Path>) -> ServerNode {
        let server = root.map(|root| Arc::new(FileServer::new(root).expect("the root is shared")));
        let shared = server.clone();
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = ebb_event::oneshot::<()>();
        let thread = thread::spawn(move || {
            ebb_hosted::run_task(node_config(), move || async move {
                let messenger = create_messenger(MessengerSettings::new(FRONTEND_NODE)).unwrap();
                if let Some(server) = &shared {
                    FileServer::serve(server, messenger).unwrap();
                }
                let addr =
                    ebb_net::listen("127.0.0.1:0".parse().unwrap(), acceptor(messenger)).unwrap();
                addr_tx.send(addr).unwrap();
                let _ = stop_rx.await;
            })
            .unwrap();
        });
        let addr = addr_rx.recv_timeout(WITHIN).expect("node 0 listens");
        ServerNode {
            addr,
            server,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for ServerNode {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs `body` on node 1 (its own thread and runtime), a client of node
/// 0 at `server`; its output, within [`WITHIN`].
pub fn on_client<R, Fut>(
    server: SocketAddr,
    body: impl FnOnce(RemoteFileSystem) -> Fut + Send + 'static,
) -> R
where
    R: Send + 'static,
    Fut: Future<Output = R> + 'static,
{
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let output = ebb_hosted::run_task(node_config(), move || async move {
            let messenger = create_messenger(MessengerSettings::new(NodeId(1))).unwrap();
            messenger
                .get()
                .unwrap()
                .directory()
                .insert(FRONTEND_NODE, server);
            body(RemoteFileSystem::new(messenger).with_call_bound(CALL_BOUND)).await
        });
        let _ = tx.send(output);
    });
    rx.recv_timeout(WITHIN)
        .expect("the client finishes in time")
        .expect("the client node runs")
}
