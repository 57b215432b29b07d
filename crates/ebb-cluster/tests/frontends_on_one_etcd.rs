//! Many frontends of one application on one etcd (`--etcd HOST:PORT`,
//! each `./ebb cluster up` its own frontend), review finding 11: a
//! frontend used to reserve ids_per_node × 253 = 16,192 of the 32,768
//! global ids when it started, for ever, so the third one failed. Now a
//! frontend reserves nothing when it starts, and each node's ids as the
//! node is allocated:
//! - five frontends in a row, on one etcd, for the same application, all
//!   start (needs root, /dev/net/tun, `ip`, QEMU and etcd; no node boots);
//! - five frontends' contracts, each with its own client of that etcd,
//!   give three nodes each (what `cluster up --nodes 3` allocates) ids
//!   that never overlap (needs etcd).

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use ebb_cluster::frontend::global_map::wait;
use ebb_cluster::frontend::{run_frontend, FrontendOptions, MapChoice};
use ebb_cluster::{BootContract, MessengerContract};
use ebb_core::{GlobalIdMap, NodeId, FIRST_GLOBAL_ID, NEXT_GLOBAL_ID};
use ebb_etcd::{EtcdGlobalIdMap, EtcdOptions};
use ebb_messenger::Frontend;
use ebb_testbed::cluster_net::{AddressPlan, NodeLink};
use ebb_testbed::{skip_unless, Etcd, Need};

/// The frontends started in a row.
const FRONTENDS: u32 = 5;
/// The nodes each frontend allocates (`cluster up --nodes 3`).
const NODES: u32 = 3;
/// The application they all serve.
const APP: &str = "echo";
/// A frontend's bound: setting up and deleting its namespace on a busy
/// machine.
const FRONTEND_LIMIT: Duration = Duration::from_secs(120);

fn link(id: u32) -> NodeLink {
    AddressPlan::default_plan().link(id).expect("a node's link")
}

/// The id counter in etcd, as a number (`None`: nothing reserved yet).
fn counter(etcd: &Etcd) -> Option<u32> {
    let map = EtcdGlobalIdMap::open(&EtcdOptions::new(etcd.endpoint(), APP)).expect("map opens");
    wait(map.get(NEXT_GLOBAL_ID))
        .expect("etcd answers")
        .map(|value| String::from_utf8(value).unwrap().parse().unwrap())
}

#[test]
fn five_frontends_in_a_row_on_one_etcd_all_start() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    let etcd = Etcd::start().expect("etcd");
    // Never booted: no node is allocated.
    let image = tempfile_image();
    for turn in 1..=FRONTENDS {
        let mut options = FrontendOptions::new(image.clone());
        options.map = MapChoice::Etcd(etcd.endpoint());
        options.app = APP.to_owned();
        options.network_tag = format!("idblk{turn}");
        options.messenger_port = 7300;
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let code = run_frontend(options, |frontend| async move {
                // The frontend's registry has no ids of its own to give.
                i32::from(!frontend.nodes().is_empty())
            });
            let _ = done_tx.send(code);
        });
        let code = done_rx
            .recv_timeout(FRONTEND_LIMIT)
            .expect("the frontend finished in time");
        assert_eq!(code, Ok(0), "frontend {turn} of {FRONTENDS}");
        // Starting took no ids.
        assert_eq!(counter(&etcd), None, "after frontend {turn}");
    }
    let _ = std::fs::remove_file(&image);
}

/// A file standing for the nodes' image, which no test here boots.
fn tempfile_image() -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("ebb-idblk-image-{}", std::process::id()));
    std::fs::write(&path, b"never booted").expect("a temporary file");
    path
}

#[test]
fn five_frontends_sharing_one_etcd_give_their_nodes_ids_that_never_overlap() {
    skip_unless!(Need::Etcd);
    let etcd = Etcd::start().expect("etcd");
    let ids_per_node = FrontendOptions::new("/unused").ids_per_node;
    let mut given: Vec<Range<u32>> = Vec::new();
    for turn in 1..=FRONTENDS {
        // Each frontend has its own client, as its own process would.
        let map: Arc<dyn GlobalIdMap> = Arc::new(
            EtcdGlobalIdMap::open(&EtcdOptions::new(etcd.endpoint(), APP)).expect("map opens"),
        );
        let registry = Frontend::new(FIRST_GLOBAL_ID..FIRST_GLOBAL_ID);
        let contract = MessengerContract::new(registry, ids_per_node, 7300).with_map(map);
        for node in 1..=NODES {
            let words = contract
                .boot_args(NodeId(node), &link(node))
                .unwrap_or_else(|e| panic!("frontend {turn}'s node {node}: {e}"));
            let range = contract.range(NodeId(node)).expect("given");
            assert_eq!(range.len(), ids_per_node as usize);
            assert!(
                words.contains(&format!("ebb_ids={}-{}", range.start, range.end)),
                "{words:?}"
            );
            given.push(range);
        }
    }
    given.sort_by_key(|range| range.start);
    for pair in given.windows(2) {
        assert!(pair[0].end <= pair[1].start, "{pair:?} overlap");
    }
    let used = FRONTENDS * NODES * ids_per_node;
    assert_eq!(counter(&etcd), Some(FIRST_GLOBAL_ID + used));
}
