//! The global id map over the Messenger between two hosted nodes over
//! kernel TCP on 127.0.0.1: node 0 serves an in-process map
//! (`MapService`), node 1 (two cores) uses it through
//! `RemoteGlobalIdMap`: every operation gives what it gives in process, a
//! watch on core 1 sees what core 0 writes, and once node 0 has stopped
//! the map is `Unreachable`, naming node 0's address.

mod hosted_support;
mod map_support;

use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use ebb_core::{Change, CoreId, GlobalIdMap, InProcessGlobalIdMap, NodeId};
use ebb_messenger::map::{MapService, RemoteGlobalIdMap};
use ebb_messenger::{acceptor, create_messenger, MessengerSettings};
use hosted_support::node_config;
use map_support::{assert_unreachable, same_as_in_process};

#[test]
fn a_hosted_node_serves_its_map_to_another_over_kernel_tcp() {
    let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
    let (stop_tx, stop_rx) = ebb_event::oneshot::<()>();
    let hosted = thread::spawn(move || {
        ebb_hosted::run_task(node_config(), move || async move {
            let messenger = create_messenger(MessengerSettings::new(NodeId(0))).unwrap();
            MapService::new(Arc::new(InProcessGlobalIdMap::new()))
                .serve(messenger)
                .unwrap();
            let addr =
                ebb_net::listen_on_all_cores("127.0.0.1:0".parse().unwrap(), acceptor(messenger))
                    .await
                    .unwrap();
            addr_tx.send(addr).unwrap();
            let _ = stop_rx.await;
        })
        .unwrap();
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("node 0 listens");
    let (done_tx, done_rx) = mpsc::channel();
    let node = ebb_hosted::Config {
        cores: Some(2),
        ..node_config()
    };
    thread::spawn(move || {
        let outcome = ebb_hosted::run_task(node, move || async move {
            let messenger = create_messenger(MessengerSettings::new(NodeId(1))).unwrap();
            messenger.get().unwrap().directory().insert(NodeId(0), addr);
            let remote = RemoteGlobalIdMap::new(messenger)
                .with_call_timeout(Duration::from_secs(5))
                .with_poll_wait(Duration::from_millis(200));
            same_as_in_process(&remote).await;
            // A watch on core 1 sees what core 0 writes.
            let watcher = remote.clone();
            let (watching_tx, watching_rx) = ebb_event::oneshot::<()>();
            let seen = ebb_event::spawn_task_on(CoreId(1), async move {
                let mut watch = watcher.watch("nodes/").await.unwrap();
                watching_tx.send(());
                let mut seen = Vec::new();
                for _ in 0..3 {
                    seen.push(watch.changed().await.unwrap());
                }
                seen
            })
            .unwrap();
            watching_rx.await.unwrap();
            ebb_event::sleep(Duration::from_millis(500)).await;
            remote.set("nodes/7", b"a".to_vec(), None).await.unwrap();
            remote.set("ebb/7", b"b".to_vec(), None).await.unwrap();
            remote.delete("nodes/7").await.unwrap();
            remote.set("nodes/8", b"c".to_vec(), None).await.unwrap();
            let seen = seen.await.unwrap();
            assert_eq!(
                seen,
                [
                    Change {
                        key: "nodes/7".into(),
                        value: Some(b"a".to_vec())
                    },
                    Change {
                        key: "nodes/7".into(),
                        value: None
                    },
                    Change {
                        key: "nodes/8".into(),
                        value: Some(b"c".to_vec())
                    },
                ]
            );
            // Node 0 stops: the map is unreachable, and says where.
            stop_tx.send(());
            ebb_event::sleep(Duration::from_millis(500)).await;
            assert_unreachable(remote.get("nodes/8").await, &addr.to_string(), "");
        });
        let _ = done_tx.send(outcome);
    });
    done_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("node 1 finished within 120 s")
        .unwrap();
    hosted.join().unwrap();
}
