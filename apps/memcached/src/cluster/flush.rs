//! `flush_all` on a node of several (`docs/distributed-memcached.md`,
//! "flush_all across nodes"): the node flushes its own store, then asks
//! every other member of the map in force to flush its store with the
//! same delay, one forwarded `Flush` each.
//!
//! The client hears success only once every member said it flushed. A
//! member that does not answer (lost, unreachable, a failed call) makes
//! the reply an error naming how many of the nodes flushed: a cache whose
//! `flush_all` said OK must not serve a value stored before it, so a
//! partial flush is never reported as done. (Stock memcached servers
//! behind a client-side hash give no such answer: the client flushes each
//! server and learns of a lost one only through that server's error.)

use core::fmt;

use ebb_iobuf::IoChain;

use super::forward::{Command, ForwardReply, ForwardRequest};
use super::forwarder::forward;
use super::serve::flush_store;
use super::shard_map::ShardMap;
use super::text_forward::ClusterLink;
use crate::stats::Counters;
use crate::Server;

/// A flush that did not reach every member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushShortfall {
    /// Nodes that flushed, this one included.
    pub flushed: usize,
    /// Nodes in the map (at least this one).
    pub nodes: usize,
}

impl fmt::Display for FlushShortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "flush_all reached {} of {} nodes",
            self.flushed, self.nodes
        )
    }
}

/// Flushes `server`'s store and every other member's with `delay` (as
/// the client gave it), through `link`.
///
/// # Errors
///
/// Some member did not answer that it flushed.
pub async fn flush_everywhere(
    link: &ClusterLink,
    server: &Server,
    delay: i64,
) -> Result<(), FlushShortfall> {
    if let Ok(counters) = server.stats.get() {
        Counters::add(&counters.cmd_flush, 1);
    }
    flush_store(&server.store, delay, server.unix_now());
    let map = link.current.read(ShardMap::clone);
    let me = link.current.me();
    let others: alloc::vec::Vec<_> = map
        .members()
        .iter()
        .copied()
        .filter(|member| member.node != me)
        .collect();
    let request = ForwardRequest {
        epoch: map.epoch(),
        command: Command::Flush { delay },
    };
    let mut flushed = 1;
    for member in &others {
        if let Ok((ForwardReply::Flushed, _)) =
            forward(link.messenger, *member, &request, IoChain::new()).await
        {
            flushed += 1;
        }
    }
    let nodes = others.len() + 1;
    if flushed == nodes {
        Ok(())
    } else {
        Err(FlushShortfall { flushed, nodes })
    }
}

/// The text protocol's reply line to a flush's outcome.
#[must_use]
pub fn text_reply(outcome: Result<(), FlushShortfall>) -> alloc::vec::Vec<u8> {
    match outcome {
        Ok(()) => b"OK\r\n".to_vec(),
        Err(shortfall) => alloc::format!("SERVER_ERROR {shortfall}\r\n").into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_flush_is_an_error_naming_how_many_flushed() {
        assert_eq!(text_reply(Ok(())), b"OK\r\n");
        let shortfall = FlushShortfall {
            flushed: 2,
            nodes: 3,
        };
        assert_eq!(
            text_reply(Err(shortfall)),
            b"SERVER_ERROR flush_all reached 2 of 3 nodes\r\n"
        );
    }
}
