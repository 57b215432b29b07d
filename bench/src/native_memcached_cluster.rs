//! The Ebbflow side of `./ebb bench cluster-memcached`: memcached as one
//! cache on N native nodes, booted by the frontend runtime exactly as
//! `./ebb cluster up memcached --nodes N` boots them (one namespace, a
//! TAP device per node, node k at 10.96.0.(k+1), a private etcd as the
//! global id map), with this process as the frontend.
//!
//! A client asks every node for every key ([`owner_targets`]); which node
//! owns a key is read from the shard map the nodes agreed on, so each
//! node's requests split into its own keys (local) and forwarded ones
//! (remote).

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use ebb_cluster::frontend::{run_frontend, FrontendHandle, FrontendOptions, MapChoice};
use ebb_loadgen::workload::KeySpace;
use ebb_loadgen::{Config, Summary};
use memcached_app::cluster::membership::adopted_key;
use memcached_app::cluster::{ShardMap, SHARD_MAP_KEY};

use crate::cluster_memcached::{drive, owner_targets, Target};

/// memcached's port on every node.
pub const PORT: u16 = 11211;
/// The Messenger's port: apart from the tests' clusters, so that a
/// benchmark and a test never share one.
const MESSENGER_PORT: u16 = 7700;
/// How long the nodes may take to boot, agree on a map and serve.
const READY_WITHIN: Duration = Duration::from_secs(240);
/// How long the frontend may take to stop its nodes and its etcd.
const TEARDOWN_WITHIN: Duration = Duration::from_secs(60);

/// How each native node runs: the same memcached settings as the Linux
/// guests' stock memcached (`-m 64 -c 1024`), one vCPU each.
pub struct NodeSettings {
    /// `-m`, MiB.
    pub memory_mb: u32,
    /// `-c`.
    pub connections: u32,
    /// The VM's memory, QEMU's `-m` syntax.
    pub vm_memory: String,
}

/// A booted cluster and the client's targets.
pub struct NativeCluster {
    namespace: String,
    /// The client's targets: per node, its own keys and the others'.
    pub targets: Vec<Target>,
    /// The map the nodes agreed on.
    pub map: ShardMap,
    /// The nodes' QEMU command (for the report).
    pub command: String,
    stop: Option<ebb_event::Sender<()>>,
    done: mpsc::Receiver<Result<i32, String>>,
}

/// What the frontend's program tells the bench.
enum Booted {
    Up {
        namespace: String,
        map: ShardMap,
        command: String,
    },
    Failed(String),
}

/// Node `node`'s memcached, inside the cluster's namespace.
pub fn node_address(node: u32) -> SocketAddr {
    let last = u8::try_from(node + 1).unwrap_or(u8::MAX);
    SocketAddr::from(([10, 96, 0, last], PORT))
}

impl NativeCluster {
    /// Boots `nodes` native memcached nodes of `image` and waits until
    /// they agree on a map of all of them and each serves.
    pub fn boot(
        image: &Path,
        nodes: u32,
        settings: &NodeSettings,
        keys: &KeySpace,
        log_dir: &Path,
    ) -> Result<NativeCluster, String> {
        let mut options = FrontendOptions::new(image);
        options.app = "memcached".to_owned();
        options.map = MapChoice::StartEtcd;
        options.log_dir = log_dir.to_owned();
        options.messenger_port = MESSENGER_PORT;
        options.ready_timeout = READY_WITHIN;
        options.memory.clone_from(&settings.vm_memory);
        options.network_tag = "cmbench".to_owned();
        options.args = vec![
            "-m".to_owned(),
            settings.memory_mb.to_string(),
            "-c".to_owned(),
            settings.connections.to_string(),
        ];
        options.check()?;
        let count = usize::try_from(nodes).map_err(|e| e.to_string())?;
        let (booted_tx, booted_rx) = mpsc::channel();
        let (stop, stop_rx) = ebb_event::oneshot::<()>();
        let (done_tx, done) = mpsc::channel();
        thread::spawn(move || {
            let code = run_frontend(options, move |frontend| async move {
                let booted = boot_and_agree(&frontend, count).await;
                let ok = matches!(booted, Booted::Up { .. });
                let _ = booted_tx.send(booted);
                if ok {
                    let _ = stop_rx.await;
                    0
                } else {
                    1
                }
            });
            let _ = done_tx.send(code);
        });
        // On a failure the frontend still tears its cluster down (nodes,
        // namespace, etcd) once its program returns: wait for that
        // (bounded) before saying so.
        let torn_down = |stop: ebb_event::Sender<()>, why: String| {
            drop(stop);
            let _ = done.recv_timeout(READY_WITHIN + TEARDOWN_WITHIN);
            why
        };
        let booted = match booted_rx.recv_timeout(READY_WITHIN * 2) {
            Ok(booted) => booted,
            Err(_) => {
                let why = format!(
                    "the {nodes} native nodes did not boot within {:?}",
                    READY_WITHIN * 2
                );
                return Err(torn_down(stop, why));
            }
        };
        let (namespace, map, command) = match booted {
            Booted::Up {
                namespace,
                map,
                command,
            } => (namespace, map, command),
            Booted::Failed(why) => return Err(torn_down(stop, why)),
        };
        let mut cluster = NativeCluster {
            namespace,
            targets: Vec::new(),
            map,
            command,
            stop: Some(stop),
            done,
        };
        let addresses: Vec<SocketAddr> = (1..=nodes).map(node_address).collect();
        let members = cluster.map.clone();
        cluster.targets = owner_targets(&addresses, keys, |key| {
            members
                .owner(key)
                .and_then(|owner| usize::try_from(owner.node.0).ok())
                .map_or(usize::MAX, |node| node - 1)
        })?;
        cluster.wait_until_serving(&addresses)?;
        Ok(cluster)
    }

    /// Waits until each node answers `version` (it joins the cache before
    /// it serves clients).
    fn wait_until_serving(&self, addresses: &[SocketAddr]) -> Result<(), String> {
        let addresses = addresses.to_vec();
        ebb_testbed::netns::run_inside_named(&self.namespace, move || {
            for addr in addresses {
                let deadline = Instant::now() + READY_WITHIN;
                while !answers_version(addr) {
                    if Instant::now() > deadline {
                        return Err(format!("{addr} does not serve memcached"));
                    }
                    thread::sleep(Duration::from_millis(200));
                }
            }
            Ok(())
        })?
    }

    /// Drives every target at `rate` (or preloads their keys) from inside
    /// the cluster's namespace. A preload must have stored every key: a
    /// cluster measured on misses would be measured on cheaper requests.
    pub fn drive(&self, cfg: &Config, rate: f64, preload: bool) -> Result<Vec<Summary>, String> {
        let targets = &self.targets;
        let summaries = ebb_testbed::netns::run_inside_named(&self.namespace, move || {
            drive(targets, cfg, rate, preload)
        })??;
        if preload {
            for summary in &summaries {
                if summary.preload_errors > 0 || summary.preload_replies < summary.preload_keys {
                    return Err(format!(
                        "the preload through {} stored {} of {} keys ({} errors)",
                        summary.server,
                        summary.preload_replies
                            - summary.preload_errors.min(summary.preload_replies),
                        summary.preload_keys,
                        summary.preload_errors
                    ));
                }
            }
        }
        Ok(summaries)
    }

    /// Stops the nodes and the etcd; the frontend's exit code.
    pub fn stop(mut self) -> Result<(), String> {
        self.stop_now()
    }

    fn stop_now(&mut self) -> Result<(), String> {
        let Some(stop) = self.stop.take() else {
            return Ok(());
        };
        stop.send(());
        match self.done.recv_timeout(TEARDOWN_WITHIN) {
            Ok(Ok(0)) => Ok(()),
            Ok(Ok(code)) => Err(format!("the frontend ended with exit code {code}")),
            Ok(Err(why)) => Err(why),
            Err(_) => Err(format!(
                "the frontend did not stop its nodes within {TEARDOWN_WITHIN:?}"
            )),
        }
    }
}

impl Drop for NativeCluster {
    fn drop(&mut self) {
        if let Err(why) = self.stop_now() {
            eprintln!("cluster-memcached: {why}");
        }
    }
}

/// One `version` round trip within a second.
fn answers_version(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = [0u8; 64];
    stream.write_all(b"version\r\n").is_ok()
        && stream
            .read(&mut reply)
            .is_ok_and(|n| reply[..n].starts_with(b"VERSION"))
}

/// The command line of process `pid` (a node's QEMU), for the report.
fn command_of(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|words| {
            words
                .split(|&b| b == 0)
                .filter(|word| !word.is_empty())
                .map(|word| String::from_utf8_lossy(word).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Whether every member of `map` has published that it adopted it
/// (`memcached/adopted/N`): until then a node holds back the keys it
/// gained (the handover fence) and refuses writes to them.
async fn all_adopted(frontend: &FrontendHandle, map: &ShardMap) -> bool {
    for member in map.members() {
        let promise = frontend.map().get(&adopted_key(member.node)).await;
        let adopted = promise.ok().flatten().and_then(|bytes| {
            core::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| text.parse::<u64>().ok())
        });
        if adopted.is_none_or(|epoch| epoch < map.epoch()) {
            return false;
        }
    }
    true
}

/// Boots `count` nodes and waits until the stored shard map names them
/// all and each has adopted it.
async fn boot_and_agree(frontend: &FrontendHandle, count: usize) -> Booted {
    let booted: Result<Vec<_>, _> = frontend.allocate(count).await.into_iter().collect();
    if let Err(error) = booted {
        return Booted::Failed(format!("a node did not boot: {error}"));
    }
    let deadline = Instant::now() + READY_WITHIN;
    while Instant::now() < deadline {
        if let Ok(Some(bytes)) = frontend.map().get(SHARD_MAP_KEY).await {
            if let Ok(map) = ShardMap::decode(&bytes) {
                if map.members().len() == count && all_adopted(frontend, &map).await {
                    return Booted::Up {
                        namespace: frontend.namespace().to_owned(),
                        map,
                        command: frontend
                            .nodes()
                            .first()
                            .map(|node| command_of(node.pid()))
                            .unwrap_or_default(),
                    };
                }
            }
        }
        ebb_event::sleep(Duration::from_millis(200)).await;
    }
    Booted::Failed(format!(
        "the nodes' shard map did not name all {count} nodes within {READY_WITHIN:?}"
    ))
}
