//! [`EtcdGlobalIdMap`]: the [`GlobalIdMap`] on etcd.

use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ebb_core::{
    check_writable_key, GlobalIdMap, Lease, MapError, MapFuture, NodeId, Swap, Watch,
    NEXT_GLOBAL_ID,
};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
    WatchOptions,
};

use crate::classify::{map_error, needs_reconnect, Effect};
use crate::counter::{decode_next, encode_next, range_from};
use crate::prefix::{AppPrefix, BadAppName};
use crate::runtime::Bridge;
use crate::watch::forward_watch;

/// How long one operation may take, connecting included, unless
/// [`EtcdOptions::timeout`] says otherwise: etcd answers in milliseconds
/// on a host, so 3 s only passes when it is down or the host is stalled.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// How many times [`GlobalIdMap::reserve_range`] retries its transaction
/// when other reservations won the race (each lost round means another
/// reservation succeeded, so this bounds only extreme contention).
pub const RESERVE_ATTEMPTS: u32 = 1000;

/// Where the map finds etcd and whose keys it keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdOptions {
    /// etcd's client endpoint, `HOST:PORT` (plain HTTP/2, as a private
    /// etcd serves on a host or inside a cluster's namespace).
    pub endpoint: String,
    /// The application: its keys live under `/ebbflow/APP/`.
    pub app: String,
    /// The bound on each operation.
    pub timeout: Duration,
}

impl EtcdOptions {
    /// Options for `app`'s keys on etcd at `endpoint`, with the default
    /// timeout.
    pub fn new(endpoint: impl Into<String>, app: impl Into<String>) -> EtcdOptions {
        EtcdOptions {
            endpoint: endpoint.into(),
            app: app.into(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Why an [`EtcdGlobalIdMap`] could not be made.
#[derive(Debug)]
pub enum OpenError {
    /// The application name cannot name a key prefix.
    BadAppName(BadAppName),
    /// The endpoint is not `HOST:PORT`.
    BadEndpoint(String),
    /// The map's client thread could not be started.
    Thread(std::io::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::BadAppName(bad) => bad.fmt(f),
            OpenError::BadEndpoint(why) => f.write_str(why),
            OpenError::Thread(e) => write!(f, "cannot start the etcd client thread: {e}"),
        }
    }
}

impl std::error::Error for OpenError {}

/// The application's [`GlobalIdMap`] kept in etcd.
///
/// Every operation runs on the map's own tokio thread (see
/// [`crate::runtime`]) and is bounded by the options' timeout; when etcd
/// cannot be reached it fails with [`MapError::Unreachable`] naming `etcd
/// at HOST:PORT` (nothing was written), and when an operation that writes
/// went out but got no answer (timed out, the connection broke) with
/// [`MapError::OutcomeUnknown`] (it may have been applied); either way the
/// next operation connects afresh, so the same map serves again once etcd
/// is back. Opening the map does not connect: the first operation does.
pub struct EtcdGlobalIdMap {
    shared: Arc<Shared>,
    bridge: Bridge,
}

/// What the operations running on the bridge share.
struct Shared {
    url: String,
    /// `etcd at HOST:PORT`, as errors name it.
    endpoint: String,
    prefix: AppPrefix,
    timeout: Duration,
    /// The connected client; `None` before the first operation and after
    /// one found etcd unreachable.
    client: Mutex<Option<Client>>,
}

impl EtcdGlobalIdMap {
    /// A map of `options.app`'s keys on etcd at `options.endpoint`.
    ///
    /// # Errors
    ///
    /// [`OpenError`]: a bad application name or endpoint, or no thread.
    pub fn open(options: &EtcdOptions) -> Result<EtcdGlobalIdMap, OpenError> {
        let prefix = AppPrefix::new(&options.app).map_err(OpenError::BadAppName)?;
        check_endpoint(&options.endpoint).map_err(OpenError::BadEndpoint)?;
        let bridge = Bridge::start().map_err(OpenError::Thread)?;
        Ok(EtcdGlobalIdMap {
            shared: Arc::new(Shared {
                url: format!("http://{}", options.endpoint),
                endpoint: format!("etcd at {}", options.endpoint),
                prefix,
                timeout: options.timeout,
                client: Mutex::new(None),
            }),
            bridge,
        })
    }

    /// `etcd at HOST:PORT`, as errors name it.
    pub fn endpoint(&self) -> &str {
        &self.shared.endpoint
    }

    /// The etcd prefix of the application's keys, `/ebbflow/APP/`.
    pub fn prefix(&self) -> &str {
        self.shared.prefix.as_str()
    }

    /// Runs `operation` with a connected client on the bridge, connecting
    /// and operating together bounded by the timeout; an unreachable etcd
    /// or an unanswered request drops the client so the next operation
    /// connects again.
    ///
    /// `effect` says whether the operation writes: a failure to connect
    /// is [`MapError::Unreachable`] (nothing was sent), but once its
    /// request is handed to the client, no answer in time (or a broken
    /// connection, see [`map_error`]) is [`MapError::OutcomeUnknown`] for
    /// a write. `lease` is the lease the operation concerns, if any:
    /// etcd's "lease not found" then means [`MapError::LeaseExpired`] of
    /// it.
    fn run<'a, T, F, Fut>(
        &self,
        effect: Effect,
        lease: Option<Lease>,
        operation: F,
    ) -> MapFuture<'a, T>
    where
        T: Send + 'static,
        F: FnOnce(Client, Arc<Shared>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        let work = async move {
            let deadline = tokio::time::Instant::now() + shared.timeout;
            let result = async {
                let client = match tokio::time::timeout_at(deadline, shared.connected()).await {
                    Ok(client) => client?,
                    // Still connecting: nothing was sent.
                    Err(_) => return Err(shared.no_answer(Effect::Reads).await),
                };
                let operated = operation(client, Arc::clone(&shared));
                match tokio::time::timeout_at(deadline, operated).await {
                    Ok(result) => result.map_err(|failure| match failure {
                        Failure::Etcd(error) => map_error(&error, &shared.endpoint, lease, effect),
                        Failure::EtcdRead(error) => {
                            map_error(&error, &shared.endpoint, lease, Effect::Reads)
                        }
                        Failure::Map(error) => error,
                    }),
                    Err(_) => Err(shared.no_answer(effect).await),
                }
            }
            .await;
            if let Err(error) = &result {
                if needs_reconnect(error) {
                    shared.forget_client();
                }
            }
            result
        };
        Box::pin(self.bridge.run(self.shared.endpoint.clone(), effect, work))
    }

    /// [`Self::run`] for an operation that changes `lease` (a write).
    fn change_lease<'a, F, Fut>(&self, lease: Lease, operation: F) -> MapFuture<'a, ()>
    where
        F: FnOnce(Client) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), Failure>> + Send + 'static,
    {
        self.run(Effect::Writes, Some(lease), move |client, _| {
            operation(client)
        })
    }

    /// [`Self::run`] for an operation on map key (or, with `prefix`, key
    /// prefix) `key`, given to `operation` as its etcd key; a bad key is
    /// an error at once, without asking etcd, and so is a write of the
    /// map's own keys (the id counter, [`check_writable_key`]): only
    /// `reserve_range`, which does not come through here, moves it.
    fn run_on_key<'a, T, F, Fut>(
        &self,
        key: &str,
        prefix: bool,
        effect: Effect,
        lease: Option<Lease>,
        operation: F,
    ) -> MapFuture<'a, T>
    where
        T: Send + 'static,
        F: FnOnce(Vec<u8>, Client, Arc<Shared>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        let writable = match effect {
            Effect::Writes => check_writable_key(key),
            Effect::Reads => Ok(()),
        };
        match writable.and_then(|()| self.shared.prefix.etcd_key(key, prefix)) {
            Ok(key) => self.run(effect, lease, move |client, shared| {
                operation(key, client, shared)
            }),
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }
}

impl Shared {
    /// The client, connecting first if there is none.
    async fn connected(&self) -> Result<Client, MapError> {
        if let Some(client) = self
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Ok(client);
        }
        let options = ConnectOptions::new()
            .with_connect_timeout(self.timeout)
            .with_timeout(self.timeout)
            // HTTP/2 pings notice a vanished etcd on an idle connection
            // (a watch waiting for changes).
            .with_keep_alive(Duration::from_secs(5), self.timeout)
            .with_keep_alive_while_idle(true);
        let client = Client::connect([self.url.as_str()], Some(options))
            .await
            // Nothing of the operation was sent yet.
            .map_err(|e| map_error(&e, &self.endpoint, None, Effect::Reads))?;
        *self.client.lock().unwrap_or_else(PoisonError::into_inner) = Some(client.clone());
        Ok(client)
    }

    fn forget_client(&self) {
        *self.client.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The error for an operation that timed out (as `effect` makes it,
    /// see [`Effect::unanswered`]): why, if a TCP connection says more
    /// (refused, no route), else that nothing answered in time.
    async fn no_answer(&self, effect: Effect) -> MapError {
        let address = self.url.trim_start_matches("http://");
        let probe = tokio::time::timeout(
            Duration::from_millis(500),
            tokio::net::TcpStream::connect(address),
        )
        .await;
        let reason = match probe {
            Ok(Err(e)) => format!("cannot connect: {e}"),
            _ => format!("no answer within {} ms", self.timeout.as_millis()),
        };
        effect.unanswered(&self.endpoint, reason)
    }
}

/// Why an operation failed, before [`EtcdGlobalIdMap::run`] tells its
/// caller: etcd-client's error (classified there, knowing the operation's
/// lease and whether it writes), the error of a request that only read
/// (a write's first step), or already the map's own.
enum Failure {
    Etcd(etcd_client::Error),
    EtcdRead(etcd_client::Error),
    Map(MapError),
}

impl From<etcd_client::Error> for Failure {
    fn from(error: etcd_client::Error) -> Failure {
        Failure::Etcd(error)
    }
}

impl From<MapError> for Failure {
    fn from(error: MapError) -> Failure {
        Failure::Map(error)
    }
}

/// Checks that `endpoint` is `HOST:PORT` with a port number.
fn check_endpoint(endpoint: &str) -> Result<(), String> {
    let bad = |why: &str| format!("invalid etcd endpoint {endpoint:?}: {why} (want HOST:PORT)");
    let (host, port) = endpoint.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b))
    {
        return Err(bad("not a host name or address"));
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok(()),
        _ => Err(bad("the port is not a number from 1 to 65535")),
    }
}

/// Whole seconds for a lease's time to live: etcd counts in seconds, so
/// parts round up (a lease never lives shorter than asked), at least 1.
fn ttl_seconds(ttl: Duration) -> i64 {
    let seconds = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(seconds.max(1)).unwrap_or(i64::MAX)
}

impl GlobalIdMap for EtcdGlobalIdMap {
    fn get<'a>(&'a self, key: &'a str) -> MapFuture<'a, Option<Vec<u8>>> {
        self.run_on_key(
            key,
            false,
            Effect::Reads,
            None,
            move |key, mut client, _| async move {
                let answer = client.get(key, None).await?;
                Ok(answer.kvs().first().map(|kv| kv.value().to_vec()))
            },
        )
    }

    fn set<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<Lease>) -> MapFuture<'a, ()> {
        self.run_on_key(
            key,
            false,
            Effect::Writes,
            lease,
            move |key, mut client, _| async move {
                let options = lease.map(|lease| PutOptions::new().with_lease(lease.0));
                client.put(key, value, options).await?;
                Ok(())
            },
        )
    }

    fn delete<'a>(&'a self, key: &'a str) -> MapFuture<'a, bool> {
        self.run_on_key(
            key,
            false,
            Effect::Writes,
            None,
            move |key, mut client, _| async move {
                let answer = client.delete(key, None).await?;
                Ok(answer.deleted() > 0)
            },
        )
    }

    fn compare_and_swap<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Vec<u8>>,
        new: Vec<u8>,
    ) -> MapFuture<'a, Swap> {
        self.run_on_key(
            key,
            false,
            Effect::Writes,
            None,
            move |key, mut client, _| async move {
                // Absent: version 0. Present: the value compares equal (etcd
                // fails a value comparison on a missing key; see its
                // rpc.proto, Compare).
                let compare = match expected {
                    None => Compare::version(key.clone(), CompareOp::Equal, 0),
                    Some(expected) => Compare::value(key.clone(), CompareOp::Equal, expected),
                };
                let txn = Txn::new()
                    .when([compare])
                    .and_then([TxnOp::put(key.clone(), new, None)])
                    .or_else([TxnOp::get(key, None)]);
                let answer = client.txn(txn).await?;
                if answer.succeeded() {
                    return Ok(Swap::Done);
                }
                Ok(Swap::Conflict(first_value(&answer.op_responses())))
            },
        )
    }

    fn list<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Vec<(String, Vec<u8>)>> {
        self.run_on_key(
            prefix,
            true,
            Effect::Reads,
            None,
            move |etcd_prefix, mut client, shared| async move {
                // etcd returns a range in key (byte) order.
                let answer = client
                    .get(etcd_prefix, Some(GetOptions::new().with_prefix()))
                    .await?;
                Ok(answer
                    .kvs()
                    .iter()
                    .filter_map(|kv| Some((shared.prefix.map_key(kv.key())?, kv.value().to_vec())))
                    .collect())
            },
        )
    }

    fn reserve_range(&self, _node: NodeId, len: u32) -> MapFuture<'_, Range<u32>> {
        // The map's own key, which run_on_key refuses to write.
        let key = format!("{}{NEXT_GLOBAL_ID}", self.prefix()).into_bytes();
        self.run(Effect::Writes, None, move |mut client, shared| async move {
            // Read the counter and its revision, then write the advanced
            // counter only if nobody wrote it since (mod revision 0: still
            // absent); a lost race reads the winner's value from the same
            // transaction and tries again.
            let answer = client
                .get(key.clone(), None)
                .await
                .map_err(Failure::EtcdRead)?;
            let mut seen = answer
                .kvs()
                .first()
                .map(|kv| (kv.value().to_vec(), kv.mod_revision()));
            for _ in 0..RESERVE_ATTEMPTS {
                let (value, revision) = match &seen {
                    Some((value, revision)) => (Some(value.as_slice()), *revision),
                    None => (None, 0),
                };
                let range = range_from(decode_next(value)?, len)?;
                let txn = Txn::new()
                    .when([Compare::mod_revision(
                        key.clone(),
                        CompareOp::Equal,
                        revision,
                    )])
                    .and_then([TxnOp::put(key.clone(), encode_next(range.end), None)])
                    .or_else([TxnOp::get(key.clone(), None)]);
                let answer = client.txn(txn).await?;
                if answer.succeeded() {
                    return Ok(range);
                }
                seen = first_kv(&answer.op_responses());
            }
            Err(MapError::Refused(format!(
                "{}: {RESERVE_ATTEMPTS} reservations in a row lost the race for {NEXT_GLOBAL_ID}",
                shared.endpoint
            ))
            .into())
        })
    }

    fn grant_lease(&self, ttl: Duration) -> MapFuture<'_, Lease> {
        let seconds = ttl_seconds(ttl);
        // Writes: an unanswered grant may have made a lease nobody knows
        // of (it expires by its TTL).
        self.run(Effect::Writes, None, move |mut client, _| async move {
            let answer = client.lease_grant(seconds, None).await?;
            Ok(Lease(answer.id()))
        })
    }

    fn keep_alive(&self, lease: Lease) -> MapFuture<'_, ()> {
        // Writes (as for the remote map): an unanswered keep-alive may or
        // may not have renewed the lease's time to live.
        self.change_lease(lease, move |mut client| async move {
            // etcd-client sends one keep-alive and reads its answer before
            // returning (a TTL of 0: the lease is gone); dropping the
            // stream then ends it.
            client.lease_keep_alive(lease.0).await?;
            Ok(())
        })
    }

    fn revoke(&self, lease: Lease) -> MapFuture<'_, ()> {
        // Writes: an unanswered revoke may have deleted the lease's keys.
        self.change_lease(lease, move |mut client| async move {
            client.lease_revoke(lease.0).await?;
            Ok(())
        })
    }

    fn watch<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Watch> {
        let watched = prefix.to_owned();
        self.run_on_key(
            prefix,
            true,
            Effect::Reads,
            None,
            move |etcd_prefix, mut client, shared| async move {
                // The watch is created (etcd answered) when this returns: every
                // later change is delivered.
                let (watcher, stream) = client
                    .watch(etcd_prefix, Some(WatchOptions::new().with_prefix()))
                    .await?;
                Ok(forward_watch(
                    watcher,
                    stream,
                    shared.prefix.clone(),
                    watched,
                    shared.endpoint.clone(),
                ))
            },
        )
    }
}

/// The key-value pair a transaction's failure branch read, if any.
fn first_kv(responses: &[TxnOpResponse]) -> Option<(Vec<u8>, i64)> {
    responses.iter().find_map(|response| match response {
        TxnOpResponse::Get(get) => get
            .kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), kv.mod_revision())),
        _ => None,
    })
}

/// The value a transaction's failure branch read, if any.
fn first_value(responses: &[TxnOpResponse]) -> Option<Vec<u8>> {
    first_kv(responses).map(|(value, _)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked() {
        assert_eq!(check_endpoint("127.0.0.1:2379"), Ok(()));
        assert_eq!(check_endpoint("etcd.local:2379"), Ok(()));
        assert_eq!(check_endpoint("[::1]:2379"), Ok(()));
        for (endpoint, why) in [
            ("127.0.0.1", "no port"),
            (":2379", "not a host"),
            ("127.0.0.1:0", "the port"),
            ("127.0.0.1:http", "the port"),
            ("127.0.0.1:70000", "the port"),
            ("http://x:1", "not a host"),
            ("a b:1", "not a host"),
        ] {
            let error = check_endpoint(endpoint).unwrap_err();
            assert!(error.contains(why), "{endpoint}: {error}");
        }
    }

    #[test]
    fn a_bad_application_or_endpoint_is_refused_when_opening() {
        match EtcdGlobalIdMap::open(&EtcdOptions::new("127.0.0.1:2379", "a/b")) {
            Err(OpenError::BadAppName(bad)) => assert_eq!(bad.name, "a/b"),
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("opened"),
        }
        match EtcdGlobalIdMap::open(&EtcdOptions::new("localhost", "ring")) {
            Err(OpenError::BadEndpoint(why)) => assert!(why.contains("no port"), "{why}"),
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("opened"),
        }
    }

    #[test]
    fn lease_times_round_up_to_whole_seconds() {
        assert_eq!(ttl_seconds(Duration::from_millis(1)), 1);
        assert_eq!(ttl_seconds(Duration::ZERO), 1);
        assert_eq!(ttl_seconds(Duration::from_secs(2)), 2);
        assert_eq!(ttl_seconds(Duration::from_millis(2001)), 3);
    }
}
