//! The frontend runtime on a real etcd (needs root, /dev/net/tun, `ip`,
//! QEMU and etcd; skipped otherwise): with `MapChoice::StartEtcd`,
//! `run_frontend` starts a private etcd inside the cluster's namespace,
//! reserves its registry's block of global ids there, and registers each
//! of two native echo nodes under `nodes/N` with a lease; a node killed
//! with `kill -9` loses its registration while the other keeps it; the
//! program's map calls run on the frontend's own event loop. Afterwards no
//! etcd, data directory, namespace or QEMU of the test is left.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ebb_cluster::frontend::{run_frontend, FrontendOptions, MapChoice};
use ebb_cluster::NodeState;
use ebb_core::{NodeId, NEXT_GLOBAL_ID};
use ebb_testbed::{skip_unless, Need};

/// The whole test's bound: two TCG boots side by side on a loaded
/// machine, and the teardown.
const TEST_LIMIT: Duration = Duration::from_secs(600);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// What the frontend program saw.
#[derive(Debug, Default)]
struct Seen {
    namespace: String,
    allocated: Vec<Result<(NodeId, String, u32), String>>,
    counter: Option<Result<Option<Vec<u8>>, String>>,
    registered: Vec<(String, Vec<u8>)>,
    after_loss: Vec<(String, Vec<u8>)>,
}

/// Polls `map.list("nodes/")` on the event loop until `done` says so or
/// 30 s passed; the last list.
async fn nodes_until(
    map: &dyn ebb_core::GlobalIdMap,
    done: impl Fn(&[(String, Vec<u8>)]) -> bool,
) -> Vec<(String, Vec<u8>)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let nodes = map.list("nodes/").await.unwrap_or_default();
        if done(&nodes) || Instant::now() >= deadline {
            return nodes;
        }
        ebb_event::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_frontend_on_etcd_registers_its_nodes_and_a_lost_ones_entry_goes() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    let image = ebb_testbed::native_image::build(&workspace_root(), "echo")
        .expect("echo's native image builds");
    let log_dir = std::env::temp_dir().join(format!("ebb-frontend-etcd-{}", std::process::id()));
    let mut options = FrontendOptions::new(image);
    options.ready_timeout = Duration::from_secs(300);
    options.log_dir = log_dir.clone();
    options.messenger_port = 7300;
    options.map = MapChoice::StartEtcd;
    let ids_per_node = options.ids_per_node;

    let (seen_tx, seen_rx) = mpsc::channel::<Seen>();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let code = run_frontend(options, move |frontend| async move {
            let mut seen = Seen {
                namespace: frontend.namespace().to_owned(),
                ..Seen::default()
            };
            let map = std::sync::Arc::clone(frontend.map());
            seen.counter = Some(map.get(NEXT_GLOBAL_ID).await.map_err(|e| e.to_string()));
            let nodes = frontend.allocate(2).await;
            seen.allocated = nodes
                .iter()
                .map(|node| {
                    node.as_ref()
                        .map(|n| (n.id, format!("{} {}", n.entry.addr, n.entry.cores), n.pid))
                        .map_err(ToString::to_string)
                })
                .collect();
            let Ok(nodes) = nodes.into_iter().collect::<Result<Vec<_>, _>>() else {
                let _ = seen_tx.send(seen);
                return 1;
            };
            seen.registered = nodes_until(&*map, |nodes| nodes.len() == 2).await;
            let lost = nodes[0].id;
            let _ = frontend.kill(lost);
            let deadline = Instant::now() + Duration::from_secs(30);
            let state = |id| {
                frontend
                    .nodes()
                    .into_iter()
                    .find(|n| n.id() == id)
                    .map(|n| n.state())
            };
            while !state(lost).is_some_and(NodeState::is_over) && Instant::now() < deadline {
                ebb_event::sleep(Duration::from_millis(50)).await;
            }
            seen.after_loss = nodes_until(&*map, |nodes| nodes.len() == 1).await;
            let _ = seen_tx.send(seen);
            0
        });
        let _ = done_tx.send(code);
    });
    let code = done_rx
        .recv_timeout(TEST_LIMIT)
        .expect("the frontend finished in time");
    let seen = seen_rx.try_recv().expect("the frontend program ran");
    assert_eq!(code, Ok(0), "{seen:?}");

    // The registry's block came from etcd's counter.
    let block_end = ebb_core::FIRST_GLOBAL_ID + ids_per_node * 253;
    assert_eq!(
        seen.counter,
        Some(Ok(Some(block_end.to_string().into_bytes()))),
        "{seen:?}"
    );
    let allocated: Vec<_> = seen
        .allocated
        .iter()
        .map(|node| node.clone().expect("allocated"))
        .collect();
    let expected: Vec<(String, Vec<u8>)> = allocated
        .iter()
        .map(|(id, value, _)| (format!("nodes/{}", id.0), value.clone().into_bytes()))
        .collect();
    assert_eq!(seen.registered, expected);
    assert_eq!(seen.after_loss, expected[1..].to_vec());

    // Nothing left: etcd and its data, the namespace, the QEMUs.
    let ours = format!("ebb-etcd-{}-", std::process::id());
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&cmdline).contains(&ours),
            "etcd {} is still running",
            entry.file_name().to_string_lossy()
        );
    }
    for entry in std::fs::read_dir(std::env::temp_dir())
        .expect("tmp")
        .flatten()
    {
        assert!(
            !entry.file_name().to_string_lossy().starts_with(&ours),
            "{} is left",
            entry.path().display()
        );
    }
    assert!(
        !ebb_testbed::netns::exists(&seen.namespace),
        "{} is left",
        seen.namespace
    );
    for (_, _, pid) in &allocated {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert!(!comm.contains("qemu"), "QEMU {pid} is still running");
    }
    let _ = std::fs::remove_dir_all(&log_dir);
}
