//! Node registrations: each ready node under `nodes/N` in the global id
//! map, set under a lease that a thread of the frontend keeps alive while
//! the node lives. When the node ends the lease is revoked; when the
//! frontend dies without a word, the lease runs out, so a dead node's
//! entry never outlives [`REGISTRATION_TTL`] by much.
//!
//! Nodes are registered independently: the thread keeps each node's map
//! operation (registering, keeping alive, revoking) in flight side by side
//! and polls them all as they wake it, so a slow etcd delays every node by
//! one operation's time, not by the sum over the nodes (done one after
//! another, 3-4 nodes at etcd's 3 s timeout ran past the 10 s time to live
//! and their registrations flapped). One timer starts every node's
//! keep-alive each [`KEEP_ALIVE_EVERY`]; a node whose last operation is
//! still out skips that round. A lease granted for a registration whose
//! `set` then fails is revoked, not left to run out.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ebb_core::{node_key, GlobalIdMap, Lease, MapError, NodeId};

/// How long a registration outlives the last keep-alive.
pub const REGISTRATION_TTL: Duration = Duration::from_secs(10);
/// How often each lease is kept alive: three tries per time to live.
pub const KEEP_ALIVE_EVERY: Duration = Duration::from_millis(3333);
/// How long one node's operation may stay out: every map bounds its own
/// operations (the etcd map by its timeout, 3 s), this only guards against
/// one that does not. Past it the lease is gone anyway.
const OPERATION_BOUND: Duration = REGISTRATION_TTL;
/// How long stopping waits for the last revokes.
const STOP_BOUND: Duration = Duration::from_secs(30);

enum Request {
    Ready(NodeId, Vec<u8>),
    Ended(NodeId),
    /// An operation in flight can make progress (its waker).
    Poll,
    /// The registrar is dropped: revoke everything and end.
    Stop,
}

/// The registering thread; dropping it revokes every registration.
pub struct Registrar {
    requests: mpsc::Sender<Request>,
    thread: Option<JoinHandle<()>>,
}

impl Registrar {
    /// Starts the thread registering nodes in `map`.
    pub fn start(map: Arc<dyn GlobalIdMap>) -> Result<Registrar, String> {
        let (requests, received) = mpsc::channel();
        let wake = Arc::new(WakeRegistrar {
            requests: Mutex::new(requests.clone()),
            pending: AtomicBool::new(false),
        });
        let thread = std::thread::Builder::new()
            .name("node-registrar".to_owned())
            .spawn(move || Registrations::new(map, wake).run(&received))
            .map_err(|e| format!("cannot start the node registrar thread: {e}"))?;
        Ok(Registrar {
            requests,
            thread: Some(thread),
        })
    }

    /// Node `id` is ready: register it with `value`.
    pub fn ready(&self, id: NodeId, value: Vec<u8>) {
        let _ = self.requests.send(Request::Ready(id, value));
    }

    /// Node `id` ended: its registration goes.
    pub fn ended(&self, id: NodeId) {
        let _ = self.requests.send(Request::Ended(id));
    }
}

impl Drop for Registrar {
    fn drop(&mut self) {
        let _ = self.requests.send(Request::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The waker of every operation in flight: asks the thread to poll them,
/// once until it has.
struct WakeRegistrar {
    requests: Mutex<mpsc::Sender<Request>>,
    pending: AtomicBool,
}

impl Wake for WakeRegistrar {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = requests.send(Request::Poll);
        }
    }
}

/// What a node's operation leaves: the lease the node holds after it (if
/// any) and whether it went well.
struct Outcome {
    lease: Option<Lease>,
    result: Result<(), MapError>,
}

type Operation = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// One node's registration.
struct Registration {
    value: Vec<u8>,
    /// `None` until registered (or after its lease was lost): retried at
    /// each round.
    lease: Option<Lease>,
    /// Whether the last try failed (a failure is said once, not each round).
    failing: bool,
    /// Its operation in flight, and when it started.
    in_flight: Option<(Operation, Instant)>,
}

/// What the registering thread keeps.
struct Registrations {
    map: Arc<dyn GlobalIdMap>,
    wake: Arc<WakeRegistrar>,
    waker: Waker,
    nodes: BTreeMap<NodeId, Registration>,
    /// Operations of nodes that ended: each revokes the lease the node
    /// held or was being given.
    closing: Vec<(Operation, Instant)>,
}

impl Registrations {
    fn new(map: Arc<dyn GlobalIdMap>, wake: Arc<WakeRegistrar>) -> Registrations {
        Registrations {
            map,
            waker: Waker::from(Arc::clone(&wake)),
            wake,
            nodes: BTreeMap::new(),
            closing: Vec::new(),
        }
    }

    fn run(mut self, requests: &mpsc::Receiver<Request>) {
        let mut next_round = Instant::now() + KEEP_ALIVE_EVERY;
        loop {
            let wake_at = self
                .earliest_bound()
                .map_or(next_round, |at| at.min(next_round));
            match requests.recv_timeout(wake_at.saturating_duration_since(Instant::now())) {
                Ok(Request::Ready(id, value)) => {
                    let registration = Registration {
                        value,
                        lease: None,
                        failing: false,
                        in_flight: None,
                    };
                    if let Some(old) = self.nodes.insert(id, registration) {
                        self.close(old);
                    }
                    self.start_refresh(id);
                }
                Ok(Request::Ended(id)) => {
                    if let Some(registration) = self.nodes.remove(&id) {
                        self.close(registration);
                    }
                }
                Ok(Request::Poll) => {}
                Ok(Request::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    if Instant::now() >= next_round {
                        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
                        for id in ids {
                            self.start_refresh(id);
                        }
                        next_round = Instant::now() + KEEP_ALIVE_EVERY;
                    }
                }
            }
            self.poll_all();
        }
        self.stop(requests);
    }

    /// Starts node `id`'s keep-alive (or registration, when it has no
    /// lease), unless an operation of it is still out.
    fn start_refresh(&mut self, id: NodeId) {
        let Some(registration) = self.nodes.get_mut(&id) else {
            return;
        };
        if registration.in_flight.is_some() {
            return;
        }
        let operation = refresh(
            Arc::clone(&self.map),
            id,
            registration.value.clone(),
            registration.lease,
        );
        registration.in_flight = Some((Box::pin(operation), Instant::now()));
    }

    /// Node `registration` ended: revoke its lease, after its operation in
    /// flight if one is out (that may be granting it a lease).
    fn close(&mut self, registration: Registration) {
        let map = Arc::clone(&self.map);
        let lease = registration.lease;
        let in_flight = registration.in_flight.map(|(operation, _)| operation);
        let closing = async move {
            let lease = match in_flight {
                Some(operation) => operation.await.lease,
                None => lease,
            };
            let result = match lease {
                // An already ended lease is what was wanted.
                Some(lease) => match map.revoke(lease).await {
                    Err(MapError::LeaseExpired(_)) => Ok(()),
                    other => other,
                },
                None => Ok(()),
            };
            Outcome {
                lease: None,
                result,
            }
        };
        self.closing.push((Box::pin(closing), Instant::now()));
    }

    /// When the oldest operation out passes its bound.
    fn earliest_bound(&self) -> Option<Instant> {
        let nodes = self.nodes.values().filter_map(|r| r.in_flight.as_ref());
        nodes
            .chain(&self.closing)
            .map(|(_, started)| *started + OPERATION_BOUND)
            .min()
    }

    /// Polls every operation out; takes in those that ended (or passed
    /// their bound: given up, tried again next round).
    fn poll_all(&mut self) {
        // Cleared before polling: a wake from now on asks again.
        self.wake.pending.store(false, Ordering::Release);
        let mut context = Context::from_waker(&self.waker);
        let now = Instant::now();
        for (&id, registration) in &mut self.nodes {
            let Some((operation, started)) = &mut registration.in_flight else {
                continue;
            };
            let outcome = match operation.as_mut().poll(&mut context) {
                Poll::Ready(outcome) => outcome,
                Poll::Pending if now >= *started + OPERATION_BOUND => Outcome {
                    lease: registration.lease,
                    result: Err(MapError::Unreachable {
                        endpoint: "the global id map".to_owned(),
                        reason: format!("no answer within {} s", OPERATION_BOUND.as_secs()),
                    }),
                },
                Poll::Pending => continue,
            };
            registration.in_flight = None;
            registration.lease = outcome.lease;
            report(id, registration, outcome.result);
        }
        self.closing.retain_mut(|(operation, started)| {
            operation.as_mut().poll(&mut context).is_pending() && now < *started + OPERATION_BOUND
        });
    }

    /// Revokes every registration (after the operations out), waiting at
    /// most [`STOP_BOUND`].
    fn stop(mut self, requests: &mpsc::Receiver<Request>) {
        let nodes = std::mem::take(&mut self.nodes);
        for registration in nodes.into_values() {
            self.close(registration);
        }
        let deadline = Instant::now() + STOP_BOUND;
        self.poll_all();
        while !self.closing.is_empty() && Instant::now() < deadline {
            let _ = requests.recv_timeout(deadline.saturating_duration_since(Instant::now()));
            self.poll_all();
        }
    }
}

/// Says a failure once, and the recovery after it.
fn report(id: NodeId, registration: &mut Registration, result: Result<(), MapError>) {
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

/// Keeps `lease` alive, or registers node `id` with `value` (again) when
/// there is none or it was lost.
async fn refresh(
    map: Arc<dyn GlobalIdMap>,
    id: NodeId,
    value: Vec<u8>,
    lease: Option<Lease>,
) -> Outcome {
    if let Some(lease) = lease {
        match map.keep_alive(lease).await {
            Ok(()) => {
                return Outcome {
                    lease: Some(lease),
                    result: Ok(()),
                }
            }
            Err(MapError::LeaseExpired(_)) => {}
            // Kept: the next round tries it again.
            Err(error) => {
                return Outcome {
                    lease: Some(lease),
                    result: Err(error),
                }
            }
        }
    }
    match register(&*map, id, value).await {
        Ok(lease) => Outcome {
            lease: Some(lease),
            result: Ok(()),
        },
        Err(error) => Outcome {
            lease: None,
            result: Err(error),
        },
    }
}

/// Grants a lease and sets `nodes/ID` under it; a lease whose `set` failed
/// is revoked (nothing is under it yet, and nobody else knows of it).
async fn register(map: &dyn GlobalIdMap, id: NodeId, value: Vec<u8>) -> Result<Lease, MapError> {
    let lease = map.grant_lease(REGISTRATION_TTL).await?;
    if let Err(error) = map.set(&node_key(id), value, Some(lease)).await {
        // If this fails too, the lease runs out by its time to live.
        let _ = map.revoke(lease).await;
        return Err(error);
    }
    Ok(lease)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_core::{InProcessGlobalIdMap, MapFuture};
    use std::future::{poll_fn, ready};

    use crate::frontend::global_map::wait;

    fn settle() {
        std::thread::sleep(Duration::from_millis(100));
    }

    /// Waits (at most 10 s) until `done` says so.
    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what} within 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
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

    /// The in-process map's operations are done at once: polls once.
    fn at_once(operation: impl Future<Output = Outcome>) -> Outcome {
        match std::pin::pin!(operation).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(outcome) => outcome,
            Poll::Pending => panic!("an in-process map operation was pending"),
        }
    }

    #[test]
    fn a_lost_lease_is_registered_again() {
        let map: Arc<dyn GlobalIdMap> = Arc::new(InProcessGlobalIdMap::new());
        let first = at_once(refresh(Arc::clone(&map), NodeId(3), b"v".to_vec(), None));
        assert_eq!(first.result, Ok(()));
        let first = first.lease.expect("registered");
        wait(map.revoke(first)).unwrap();
        assert_eq!(wait(map.get("nodes/3")), Ok(None));
        let again = at_once(refresh(
            Arc::clone(&map),
            NodeId(3),
            b"v".to_vec(),
            Some(first),
        ));
        assert_eq!(again.result, Ok(()));
        assert!(again.lease.is_some_and(|lease| lease != first));
        assert_eq!(wait(map.get("nodes/3")), Ok(Some(b"v".to_vec())));
    }

    /// What [`TestMap`]'s `set` does.
    enum SetDoes {
        /// Fails, as an etcd that went away between grant and set.
        Fail,
        /// Waits until the gate opens, counting the sets waiting.
        WaitForTheGate,
    }

    #[derive(Default)]
    struct Gate {
        open: bool,
        waiting: usize,
        wakers: Vec<Waker>,
    }

    /// An in-process map whose `set` fails or waits, and that remembers
    /// the leases it granted.
    struct TestMap {
        inner: InProcessGlobalIdMap,
        set_does: SetDoes,
        granted: Mutex<Vec<Lease>>,
        gate: Mutex<Gate>,
    }

    impl TestMap {
        fn new(set_does: SetDoes) -> Arc<TestMap> {
            Arc::new(TestMap {
                inner: InProcessGlobalIdMap::new(),
                set_does,
                granted: Mutex::new(Vec::new()),
                gate: Mutex::new(Gate::default()),
            })
        }

        fn waiting(&self) -> usize {
            self.gate.lock().unwrap().waiting
        }

        fn open_the_gate(&self) {
            let mut gate = self.gate.lock().unwrap();
            gate.open = true;
            for waker in gate.wakers.drain(..) {
                waker.wake();
            }
        }
    }

    // By path, not imported: calls on a TestMap are GlobalIdMap's.
    impl ebb_core::MapInFront for TestMap {
        fn inner(&self) -> &dyn GlobalIdMap {
            &self.inner
        }

        fn set<'a>(
            &'a self,
            key: &'a str,
            value: Vec<u8>,
            lease: Option<Lease>,
        ) -> MapFuture<'a, ()> {
            match self.set_does {
                SetDoes::Fail => Box::pin(ready(Err(MapError::OutcomeUnknown {
                    endpoint: "a test map".to_owned(),
                    reason: "its set fails".to_owned(),
                }))),
                SetDoes::WaitForTheGate => {
                    let mut counted = false;
                    Box::pin(async move {
                        poll_fn(|cx| {
                            let mut gate = self.gate.lock().unwrap();
                            if gate.open {
                                return Poll::Ready(());
                            }
                            if !counted {
                                counted = true;
                                gate.waiting += 1;
                            }
                            gate.wakers.push(cx.waker().clone());
                            Poll::Pending
                        })
                        .await;
                        self.inner.set(key, value, lease).await
                    })
                }
            }
        }

        fn grant_lease(&self, ttl: Duration) -> MapFuture<'_, Lease> {
            let lease = wait(self.inner.grant_lease(ttl));
            if let Ok(lease) = lease {
                self.granted.lock().unwrap().push(lease);
            }
            Box::pin(ready(lease))
        }
    }

    /// A registration whose `set` fails revokes the lease it was granted
    /// (the leak of review finding 12), and says why.
    #[test]
    fn a_lease_whose_set_failed_is_revoked() {
        let map = TestMap::new(SetDoes::Fail);
        let registrar = Registrar::start(map.clone()).unwrap();
        registrar.ready(NodeId(1), b"10.96.0.2:7000 1".to_vec());
        until("a lease is granted", || {
            !map.granted.lock().unwrap().is_empty()
        });
        let lease = map.granted.lock().unwrap()[0];
        until("the lease is revoked", || {
            wait(map.inner.keep_alive(lease)) == Err(MapError::LeaseExpired(lease))
        });
        assert_eq!(wait(map.list("nodes/")), Ok(vec![]));
        drop(registrar);
        // Every lease of every try is gone.
        for lease in map.granted.lock().unwrap().iter() {
            assert_eq!(
                wait(map.inner.keep_alive(*lease)),
                Err(MapError::LeaseExpired(*lease))
            );
        }
    }

    /// Nodes are registered side by side: four nodes' sets are all out at
    /// once while the map holds them (one after another, only one would
    /// ever be), and all four are registered when it lets them through.
    #[test]
    fn nodes_are_registered_side_by_side() {
        let map = TestMap::new(SetDoes::WaitForTheGate);
        let registrar = Registrar::start(map.clone()).unwrap();
        for node in 1..=4 {
            registrar.ready(
                NodeId(node),
                format!("10.96.0.{}:7000 1", node + 1).into_bytes(),
            );
        }
        until("four sets are out at once", || map.waiting() == 4);
        map.open_the_gate();
        until("four nodes are registered", || {
            wait(map.list("nodes/")).is_ok_and(|nodes| nodes.len() == 4)
        });
        registrar.ended(NodeId(2));
        until("node 2's registration goes", || {
            wait(map.get("nodes/2")) == Ok(None)
        });
        drop(registrar);
        assert_eq!(wait(map.list("nodes/")), Ok(vec![]));
    }
}
