//! Round trips one at a time between two peers over the in-memory pipe
//! (`pipe_support`), each answered with its own 64-byte payload: the
//! workload for counting the Messenger's instructions per round trip
//! under callgrind (both ends, no network stack). `ROUND_TRIPS` sets how
//! many (default 100); the difference between two counts, divided by the
//! difference in round trips, is one round trip's cost (see
//! docs/benchmarks.md, "The Messenger's instructions per round trip").

mod echo_support;
#[allow(dead_code)]
mod pipe_support;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use ebb_core::{EbbId, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Config, LocalNode, Message, Peer};
use echo_support::{Echo, ECHO};
use pipe_support::Pipe;
use std::rc::Rc;

#[test]
fn round_trips_one_at_a_time_each_get_their_payload_back() {
    let round_trips: usize = std::env::var("ROUND_TRIPS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    let echo_id = EbbId::new(40_000).unwrap();
    let node_a = LocalNode::new(NodeId(1), Config::default());
    let node_b = LocalNode::new(NodeId(2), Config::default());
    node_b.register(echo_id, Rc::new(Echo::default()));
    let a = Peer::new(node_a);
    let b = Peer::new(node_b);
    let mut pipe = Pipe::new(a.handler(), b.handler(), 64 << 10, 1460);
    let payload = IoBuf::from_vec(vec![0xa5; 64]);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..round_trips {
        let mut call = a.call(
            echo_id,
            ECHO,
            Message::payload(IoChain::from(payload.clone())),
        );
        pipe.run(16);
        let Poll::Ready(reply) = pin!(&mut call).poll(&mut cx) else {
            panic!("no reply after the pipe went quiet");
        };
        assert_eq!(reply.unwrap().payload.len(), 64);
    }
    assert_eq!(a.pending_calls(), 0);
    drop(b);
}
