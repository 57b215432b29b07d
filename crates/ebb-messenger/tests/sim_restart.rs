//! A node restarted under the same id, over the simulated link, before
//! any loss notice: node 2 dials node 1, then node 2 starts again at
//! another address and dials node 1 too. Node 1 uses the new connection
//! and closes the old one, so a message the old incarnation sends late is
//! not served as node 2's. (The case where node 1 had dialed the old
//! node 2 needs an incarnation on the wire: `docs/messenger.md`, "A node
//! restarted under the same id".)

mod echo_support;
mod sim_support;

use std::rc::Rc;
use std::time::Duration;

use ebb_core::{EbbId, NodeId};
use ebb_event::sleep;
use ebb_messenger::{Message, MessengerError, PeerState};
use echo_support::{Echo, ECHO, NOTE};
use sim_support::nodes::{bytes, learn, sim_node, sim_node_at, simulate};

#[test]
fn a_node_restarted_under_the_same_id_replaces_its_old_connection_and_the_old_one_is_not_heard() {
    simulate(|sim| async move {
        let ebb = EbbId::new(40_601).unwrap();
        let one = sim_node(&sim, 1);
        let echo = Rc::new(Echo::default());
        one.rep.local().register(ebb, echo.clone());
        // Node 2's first incarnation calls node 1 (and so dials it).
        let old = sim_node(&sim, 2);
        learn(&old, &one);
        old.rep
            .call(NodeId(1), ebb, ECHO, bytes(b"old"))
            .await
            .unwrap();
        let old_connection = old.rep.peer(NodeId(1)).unwrap();

        // Node 2 restarted elsewhere: it serves the Ebb, the old one does
        // not, so a call that reaches the old one gets an error reply.
        let new = sim_node_at(&sim, 2, 7);
        new.rep.local().register(ebb, Rc::new(Echo::default()));
        learn(&new, &one);
        new.rep
            .call(NodeId(1), ebb, ECHO, bytes(b"new"))
            .await
            .unwrap();
        let reply = one.rep.call(NodeId(2), ebb, ECHO, bytes(b"to 2")).await;
        assert_eq!(
            reply.map(|r| r.payload.to_vec()),
            Ok(b"to 2".to_vec()),
            "node 1's call reached the restarted node 2"
        );

        // The old incarnation speaks late on its connection: not heard.
        let late = old_connection.send(ebb, NOTE, Message::payload(bytes(b"late")));
        sleep(Duration::from_millis(200)).await;
        assert_eq!(echo.notes.get(), 0, "the old node 2's message was served");
        match late {
            Err(MessengerError::ConnectionLost) | Ok(()) => {}
            Err(other) => panic!("the late send failed with {other:?}"),
        }
        assert!(
            matches!(old_connection.state(), PeerState::Closed(_)),
            "node 1 closed the old connection: {:?}",
            old_connection.state()
        );
    });
}
