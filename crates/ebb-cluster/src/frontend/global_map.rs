//! The cluster's [`GlobalIdMap`]: which one a frontend uses
//! ([`MapChoice`]), and waiting for its futures from a plain thread.
//!
//! Each node's global ids are reserved from the map by `reserve_range` as
//! the node is allocated (`MessengerContract::with_map`: two frontends
//! sharing an etcd never hand out the same ids, and a frontend takes none
//! when it starts), and every ready node is registered under `nodes/N`
//! with a lease ([`super::registrations`]).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use ebb_core::{GlobalIdMap, InProcessGlobalIdMap, MapError};
use ebb_etcd::{EtcdGlobalIdMap, EtcdOptions};
use ebb_testbed::{netns, Etcd};

/// Where the frontend keeps the application's global id map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapChoice {
    /// In the frontend's process (`InProcessGlobalIdMap`): the default,
    /// and all a single frontend needs.
    InProcess,
    /// A private etcd the frontend starts on 127.0.0.1:2379 inside the
    /// cluster's namespace, its data in a temporary directory deleted when
    /// the frontend ends (`./ebb cluster up`'s default).
    StartEtcd,
    /// An etcd that is already running, `HOST:PORT` as this host reaches
    /// it (`--etcd HOST:PORT`; the map's client runs outside the
    /// cluster's namespace).
    Etcd(String),
}

impl MapChoice {
    /// The choice a `--etcd` value names: `start`, `none` (in-process) or
    /// `HOST:PORT`.
    pub fn parse(value: &str) -> MapChoice {
        match value {
            "start" => MapChoice::StartEtcd,
            "none" => MapChoice::InProcess,
            endpoint => MapChoice::Etcd(endpoint.to_owned()),
        }
    }
}

/// The map a frontend opened, and the etcd it started for it, if any
/// (stopped and its data deleted on drop, after the map).
pub struct ClusterMap {
    /// The map.
    pub map: Arc<dyn GlobalIdMap>,
    /// `in process` or `etcd at HOST:PORT`, for messages.
    pub describe: String,
    etcd: Option<Etcd>,
}

impl ClusterMap {
    /// Opens the map `choice` names for application `app`; an etcd map's
    /// client runs inside `namespace` (where the frontend runs), and so
    /// does a started etcd. An etcd started here dies with the calling
    /// thread at the latest.
    pub fn open(choice: &MapChoice, namespace: &str, app: &str) -> Result<ClusterMap, String> {
        let (endpoint, etcd) = match choice {
            MapChoice::InProcess => {
                return Ok(ClusterMap {
                    map: Arc::new(InProcessGlobalIdMap::new()),
                    describe: "in process".to_owned(),
                    etcd: None,
                })
            }
            MapChoice::StartEtcd => {
                let etcd = Etcd::start_in_namespace(namespace, std::net::Ipv4Addr::LOCALHOST)
                    .map_err(|e| format!("cannot start the cluster's etcd: {e}"))?;
                (etcd.endpoint(), Some(etcd))
            }
            MapChoice::Etcd(endpoint) => (endpoint.clone(), None),
        };
        let options = EtcdOptions::new(endpoint, app);
        // The client of a started etcd runs inside the namespace (threads
        // inherit their creator's namespace, so the map's client thread is
        // started there); an existing etcd's endpoint means what it means
        // on this host.
        let map = if etcd.is_some() {
            netns::run_inside_named(namespace, || EtcdGlobalIdMap::open(&options))?
        } else {
            EtcdGlobalIdMap::open(&options)
        }
        .map_err(|e| format!("cannot open the global id map: {e}"))?;
        Ok(ClusterMap {
            describe: map.endpoint().to_owned(),
            map: Arc::new(map),
            etcd,
        })
    }

    /// A map the frontend program gave (`run_frontend_with_map`).
    pub fn given(map: Arc<dyn GlobalIdMap>) -> ClusterMap {
        ClusterMap {
            map,
            describe: "given by the frontend program".to_owned(),
            etcd: None,
        }
    }

    /// The etcd this frontend started, if it did.
    pub fn started_etcd(&self) -> Option<&Etcd> {
        self.etcd.as_ref()
    }
}

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// How long [`wait`] waits at most: every map bounds its own operations
/// (the etcd map by its timeout), this only guards against one that does
/// not.
pub const WAIT_BOUND: Duration = Duration::from_secs(30);

/// Polls a map operation on this (non-event-loop) thread until it is done
/// or [`WAIT_BOUND`] passed.
pub fn wait<T>(future: impl Future<Output = Result<T, MapError>>) -> Result<T, MapError> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    let deadline = Instant::now() + WAIT_BOUND;
    loop {
        if let Poll::Ready(result) = future.as_mut().poll(&mut context) {
            return result;
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(MapError::Unreachable {
                endpoint: "the global id map".to_owned(),
                reason: format!("no answer within {} s", WAIT_BOUND.as_secs()),
            });
        }
        std::thread::park_timeout(deadline - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_values_name_the_choice() {
        assert_eq!(MapChoice::parse("start"), MapChoice::StartEtcd);
        assert_eq!(MapChoice::parse("none"), MapChoice::InProcess);
        assert_eq!(
            MapChoice::parse("10.0.0.1:2379"),
            MapChoice::Etcd("10.0.0.1:2379".to_owned())
        );
    }

    #[test]
    fn waiting_on_the_in_process_map_returns_its_answer() {
        let map = InProcessGlobalIdMap::new();
        wait(map.set("nodes/1", b"x".to_vec(), None)).unwrap();
        assert_eq!(wait(map.get("nodes/1")), Ok(Some(b"x".to_vec())));
    }
}
