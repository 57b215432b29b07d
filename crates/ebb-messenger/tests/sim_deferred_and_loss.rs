//! Calls whose callee makes them wait, over the simulated link: a service
//! that answers later (its reply comes when its future ends, and the
//! connection serves other calls meanwhile), and the frontend's loss
//! notice (the frontend, told a node is lost, tells the other nodes, and
//! their calls pending on it fail at once with `NodeLost` instead of
//! waiting for TCP to give up; a notice from anyone but the frontend is
//! refused).

mod sim_support;

use std::time::Duration;

use ebb_core::{EbbId, NodeId};
use ebb_event::{sleep, spawn_task};
use ebb_iobuf::IoChain;
use ebb_messenger::{
    Answer, LostNotice, Message, MessageNumber, MessengerError, Request, Service, ServiceError,
    NODE_EBB, NODE_LOST, NOTICE_MALFORMED, NOTICE_NOT_FROM_FRONTEND,
};
use sim_support::nodes::{bytes, learn, sim_node, sim_node_at, simulate};
use std::rc::Rc;

/// Answered with the request's body after [`SLOW_BY`].
const SLOW: MessageNumber = MessageNumber(1);
/// Answered with the request's body at once.
const FAST: MessageNumber = MessageNumber(2);
/// Refused with code 5, later.
const REFUSED_LATER: MessageNumber = MessageNumber(3);
/// Never answered: a node that froze while handling it.
const NEVER: MessageNumber = MessageNumber(4);

const SLOW_BY: Duration = Duration::from_millis(100);

struct Deferring;

impl Service for Deferring {
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        match request.message {
            FAST => Ok(request.body),
            _ => Err(ServiceError::UnknownMessage),
        }
    }

    fn answer(&self, request: Request) -> Answer {
        match request.message {
            SLOW => Answer::Later(Box::pin(async move {
                sleep(SLOW_BY).await;
                Ok(request.body)
            })),
            REFUSED_LATER => Answer::Later(Box::pin(async {
                sleep(SLOW_BY).await;
                Err(ServiceError::Refused(5))
            })),
            NEVER => Answer::Later(Box::pin(std::future::pending())),
            _ => Answer::Now(self.handle(request)),
        }
    }
}

fn notice(node: u32) -> Message {
    Message {
        control: IoChain::from(ebb_iobuf::IoBuf::copy_from_slice(
            &LostNotice(NodeId(node)).encode(),
        )),
        payload: IoChain::new(),
    }
}

#[test]
fn a_deferred_answer_comes_when_its_future_ends_and_others_pass_it() {
    simulate(|sim| async move {
        let a = sim_node(&sim, 1);
        let b = sim_node(&sim, 2);
        let ebb = EbbId::new(40_500).unwrap();
        b.rep.local().register(ebb, Rc::new(Deferring));
        learn(&a, &b);
        let started = ebb_event::now();
        let slow = spawn_task(a.rep.call(NodeId(2), ebb, SLOW, bytes(b"slow")));
        let fast = a.rep.call(NodeId(2), ebb, FAST, bytes(b"fast")).await;
        assert_eq!(fast.unwrap().payload, *b"fast".as_slice());
        assert!(
            ebb_event::now().saturating_since(started) < SLOW_BY,
            "the fast call was answered while the slow one waited"
        );
        let slow = slow.await.unwrap().unwrap();
        assert_eq!(slow.payload, *b"slow".as_slice());
        assert!(ebb_event::now().saturating_since(started) >= SLOW_BY);
        assert_eq!(
            a.rep
                .call(NodeId(2), ebb, REFUSED_LATER, IoChain::new())
                .await
                .unwrap_err(),
            MessengerError::Refused {
                node: NodeId(2),
                code: 5
            }
        );
    });
}

#[test]
fn the_frontend_tells_the_nodes_a_lost_node_is_lost_and_their_calls_to_it_fail() {
    simulate(|sim| async move {
        let front = sim_node(&sim, 0);
        let a = sim_node(&sim, 1);
        let b = sim_node(&sim, 2);
        let ebb = EbbId::new(40_501).unwrap();
        b.rep.local().register(ebb, Rc::new(Deferring));
        learn(&a, &b);
        learn(&a, &front);
        learn(&front, &a);
        learn(&front, &b);
        // Node 1's call waits on node 2, which never answers it (frozen).
        let pending = spawn_task(a.rep.call(NodeId(2), ebb, NEVER, bytes(b"x")));
        sleep(Duration::from_millis(50)).await;
        assert_eq!(a.rep.peer(NodeId(2)).unwrap().pending_calls(), 1);
        let started = ebb_event::now();
        // The frontend's launcher says node 2 is gone.
        front.rep.lose_node(NodeId(2));
        assert_eq!(
            pending.await.unwrap().unwrap_err(),
            MessengerError::NodeLost { node: NodeId(2) }
        );
        assert!(
            ebb_event::now().saturating_since(started) < Duration::from_millis(100),
            "node 1's call ended with the notice's round trip"
        );
        assert_eq!(a.rep.directory().address(NodeId(2)), None);
        // Only the frontend says a node is lost, and says it in 4 bytes.
        assert_eq!(
            a.rep
                .call_with(NodeId(0), None, NODE_EBB, NODE_LOST, notice(1))
                .await
                .unwrap_err(),
            MessengerError::Refused {
                node: NodeId(0),
                code: NOTICE_NOT_FROM_FRONTEND
            }
        );
        let mut short = notice(3);
        short.control = bytes(b"abc");
        for malformed in [short, notice(0)] {
            assert_eq!(
                front
                    .rep
                    .call_with(NodeId(1), None, NODE_EBB, NODE_LOST, malformed)
                    .await
                    .unwrap_err(),
                MessengerError::Refused {
                    node: NodeId(1),
                    code: NOTICE_MALFORMED
                }
            );
        }
        assert_eq!(
            front
                .rep
                .call_with(NodeId(1), None, NODE_EBB, MessageNumber(9), notice(3))
                .await
                .unwrap_err(),
            MessengerError::UnknownMessage {
                node: NodeId(1),
                ebb: NODE_EBB.raw(),
                message: MessageNumber(9)
            }
        );
        // A process elsewhere that says hello as node 0 is not the
        // frontend (node 1 knows the frontend's address), and the frontend
        // itself takes no notice (its launcher tells it of losses).
        let impostor = sim_node_at(&sim, 0, 5);
        learn(&impostor, &a);
        learn(&impostor, &front);
        for (target, node) in [(NodeId(1), &a), (NodeId(0), &front)] {
            assert_eq!(
                impostor
                    .rep
                    .call_with(target, None, NODE_EBB, NODE_LOST, notice(3))
                    .await
                    .unwrap_err(),
                MessengerError::Refused {
                    node: target,
                    code: NOTICE_NOT_FROM_FRONTEND
                }
            );
            assert!(node.rep.directory().address(NodeId(3)).is_none());
        }
    });
}
