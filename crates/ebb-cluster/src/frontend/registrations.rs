//! Node registrations: each ready node under `nodes/N` in the global id
//! map, set under a lease that a thread of the frontend keeps alive while
//! the node lives. When the node ends the lease is revoked; when the
//! frontend dies without a word, the lease runs out, so a dead node's
//! entry never outlives [`REGISTRATION_TTL`] by much.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ebb_core::{node_key, GlobalIdMap, Lease, MapError, NodeId};

use super::global_map::wait;

/// How long a registration outlives the last keep-alive.
pub const REGISTRATION_TTL: Duration = Duration::from_secs(10);
/// How often each lease is kept alive: three tries per time to live.
pub const KEEP_ALIVE_EVERY: Duration = Duration::from_millis(3333);

enum Request {
    Ready(NodeId, Vec<u8>),
    Ended(NodeId),
}

/// The registering thread; dropping it revokes every registration.
pub struct Registrar {
    requests: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl Registrar {
    /// Starts the thread registering nodes in `map`.
    pub fn start(map: Arc<dyn GlobalIdMap>) -> Result<Registrar, String> {
        let (requests, received) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("node-registrar".to_owned())
            .spawn(move || run(&*map, &received))
            .map_err(|e| format!("cannot start the node registrar thread: {e}"))?;
        Ok(Registrar {
            requests: Some(requests),
            thread: Some(thread),
        })
    }

    /// Node `id` is ready: register it with `value`.
    pub fn ready(&self, id: NodeId, value: Vec<u8>) {
        if let Some(requests) = &self.requests {
            let _ = requests.send(Request::Ready(id, value));
        }
    }

    /// Node `id` ended: its registration goes.
    pub fn ended(&self, id: NodeId) {
        if let Some(requests) = &self.requests {
            let _ = requests.send(Request::Ended(id));
        }
    }
}

impl Drop for Registrar {
    fn drop(&mut self) {
        drop(self.requests.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One node's registration.
struct Registration {
    value: Vec<u8>,
    /// `None` until registered (or after its lease was lost): retried at
    /// each round.
    lease: Option<Lease>,
    /// Whether the last try failed (a failure is said once, not each round).
    failing: bool,
}

fn run(map: &dyn GlobalIdMap, requests: &mpsc::Receiver<Request>) {
    let mut nodes: BTreeMap<NodeId, Registration> = BTreeMap::new();
    let mut next_round = Instant::now() + KEEP_ALIVE_EVERY;
    loop {
        match requests.recv_timeout(next_round.saturating_duration_since(Instant::now())) {
            Ok(Request::Ready(id, value)) => {
                let mut registration = Registration {
                    value,
                    lease: None,
                    failing: false,
                };
                refresh(map, id, &mut registration);
                nodes.insert(id, registration);
            }
            Ok(Request::Ended(id)) => {
                if let Some(Registration {
                    lease: Some(lease), ..
                }) = nodes.remove(&id)
                {
                    let _ = wait(map.revoke(lease));
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                for (&id, registration) in &mut nodes {
                    refresh(map, id, registration);
                }
                next_round = Instant::now() + KEEP_ALIVE_EVERY;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    for registration in nodes.into_values() {
        if let Some(lease) = registration.lease {
            let _ = wait(map.revoke(lease));
        }
    }
}

/// Keeps `registration`'s lease alive, or registers it (again) when it
/// has none or lost it.
fn refresh(map: &dyn GlobalIdMap, id: NodeId, registration: &mut Registration) {
    let result = match registration.lease {
        Some(lease) => match wait(map.keep_alive(lease)) {
            Err(MapError::LeaseExpired(_)) => {
                registration.lease = None;
                register(map, id, registration)
            }
            other => other,
        },
        None => register(map, id, registration),
    };
    match result {
        Ok(()) if registration.failing => {
            registration.failing = false;
            eprintln!("ebb: node {id} is registered in the global id map again");
        }
        Ok(()) => {}
        Err(error) if !registration.failing => {
            registration.failing = true;
            eprintln!("ebb: cannot keep node {id}'s registration: {error} (retrying)");
        }
        Err(_) => {}
    }
}

fn register(
    map: &dyn GlobalIdMap,
    id: NodeId,
    registration: &mut Registration,
) -> Result<(), MapError> {
    let lease = wait(map.grant_lease(REGISTRATION_TTL))?;
    wait(map.set(&node_key(id), registration.value.clone(), Some(lease)))?;
    registration.lease = Some(lease);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_core::InProcessGlobalIdMap;

    fn settle() {
        std::thread::sleep(Duration::from_millis(100));
    }

    #[test]
    fn ready_nodes_are_registered_and_ended_ones_are_not() {
        let map = Arc::new(InProcessGlobalIdMap::new());
        let registrar = Registrar::start(map.clone()).unwrap();
        registrar.ready(NodeId(1), b"10.96.0.2:7000 1".to_vec());
        registrar.ready(NodeId(2), b"10.96.0.3:7000 1".to_vec());
        settle();
        assert_eq!(wait(map.list("nodes/")).unwrap().len(), 2);
        registrar.ended(NodeId(1));
        settle();
        assert_eq!(
            wait(map.list("nodes/")),
            Ok(vec![("nodes/2".to_owned(), b"10.96.0.3:7000 1".to_vec())])
        );
        drop(registrar);
        assert_eq!(wait(map.list("nodes/")), Ok(vec![]));
    }

    #[test]
    fn a_lost_lease_is_registered_again() {
        let map = Arc::new(InProcessGlobalIdMap::new());
        let mut registration = Registration {
            value: b"v".to_vec(),
            lease: None,
            failing: false,
        };
        refresh(&*map, NodeId(3), &mut registration);
        let first = registration.lease.expect("registered");
        map.expire(first).unwrap();
        assert_eq!(wait(map.get("nodes/3")), Ok(None));
        refresh(&*map, NodeId(3), &mut registration);
        assert_ne!(registration.lease, Some(first));
        assert_eq!(wait(map.get("nodes/3")), Ok(Some(b"v".to_vec())));
    }
}
