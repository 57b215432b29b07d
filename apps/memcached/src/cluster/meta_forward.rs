//! Meta commands on a node of several (`docs/distributed-memcached.md`,
//! "The meta protocol"): `mg`, `ms`, `md` and `ma` naming another node's
//! key go to the owner as they are, line and data block, in a `Meta`
//! forward; the owner runs them through its own text handler, as if its
//! client had sent them, and its reply bytes are the client's reply.
//!
//! So every flag means on a node of several exactly what it means on one
//! node (`q`, `O`, `k`, `b`, `N`, `R`, `T`, `I`, the win/stale flags),
//! with no second implementation of the meta commands to drift from the
//! first. The owner finds the key in the line itself with the function
//! the forwarder used (`protocol::meta::acted_on_key`) and serves the
//! command only if its map of the request's epoch gives it that key.
//!
//! The owner checks the whole request before its handler runs, so that a
//! malformed one is refused (`BadRequest`) having changed nothing: one
//! line, a key it serves, and the payload the line calls for
//! ([`payload_fits`]). An `ms` whose value is over `-I` comes without its
//! data block (`route.rs`): the owner's handler refuses it from the line,
//! dropping the old item, as a single memcached's mset does.

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoChain};

use super::current::View;
use super::forward::{Command, ForwardReply, ForwardRequest};
use super::forwarder::forward;
use super::shard_map::ShardMap;
use super::text_forward::ClusterLink;
use crate::protocol::common::parse_i32;
use crate::protocol::meta::acted_on_key;
use crate::protocol::text::{tokenize, Request};
use crate::protocol::{Context, Outcome, Protocol};
use crate::watch::Site;
use crate::Server;

/// The reply when the owner gave no usable answer.
const NO_OWNER: &[u8] = b"SERVER_ERROR the key's owner node did not answer\r\n";
/// The reply when the owner refused because the maps disagree.
const MAP_CHANGING: &[u8] = b"SERVER_ERROR shard map changing, try again\r\n";

/// The key the meta command on `line` (its first line) acts on, if it is
/// one a node forwards (`mg`, `ms`, `md`, `ma`) and well-formed enough
/// for its handler to act.
#[must_use]
pub fn meta_key(line: &[u8]) -> Option<Vec<u8>> {
    let tokens = tokenize(line);
    match tokens.list().first() {
        Some([b'm', which]) => acted_on_key(*which, &tokens),
        _ => None,
    }
}

/// Sends the meta command `line` (with `block`, `ms`'s data block and
/// its CRLF) for `key` to its owner under `map`, through `link`; the
/// bytes to send the client.
pub async fn execute_meta(
    link: &ClusterLink,
    server: &Server,
    map: &ShardMap,
    key: &[u8],
    line: &[u8],
    block: IoChain,
) -> IoChain {
    let line_reply = |line: &'static [u8]| IoChain::from(IoBuf::from_static(line));
    let Some(owner) = map.owner(key) else {
        return line_reply(NO_OWNER);
    };
    let request = ForwardRequest {
        epoch: map.epoch(),
        command: Command::Meta { line },
    };
    let reply = if owner.node == link.current.me() {
        // The map changed since the request was routed: served here.
        let Ok(control) = request.encode() else {
            return line_reply(NO_OWNER);
        };
        Some(
            link.current
                .view(|view| serve_meta(server, view, &control, &block)),
        )
    } else {
        forward(link.messenger, owner, &request, block).await.ok()
    };
    match reply {
        Some((ForwardReply::Meta, bytes)) => bytes,
        Some((ForwardReply::WrongEpoch(_) | ForwardReply::NotOwner(_), _)) => {
            line_reply(MAP_CHANGING)
        }
        _ => line_reply(NO_OWNER),
    }
}

/// The owner's side: serves the forwarded meta command of `control` and
/// `payload` on `server` as the node `view` describes, if it serves the
/// command's key (`serve.rs`'s invariant); the reply and its payload
/// (the reply bytes).
pub fn serve_meta(
    server: &Server,
    view: &View<'_>,
    control: &[u8],
    payload: &IoChain,
) -> (ForwardReply, IoChain) {
    let mut out = IoChain::new();
    let Ok(request) = ForwardRequest::decode(control, payload.len()) else {
        return (ForwardReply::BadRequest, out);
    };
    let Command::Meta { line } = request.command else {
        return (ForwardReply::BadRequest, out);
    };
    let map = view.map();
    if request.epoch != map.epoch() {
        return (ForwardReply::WrongEpoch(map.epoch()), out);
    }
    let mut input = IoChain::from(IoBuf::from_vec(line.to_vec()));
    // The line is one line: the request parser finds exactly it.
    let key = Request::parse(&input)
        .filter(|parsed| parsed.line_end == line.len())
        .and_then(|parsed| meta_key(&parsed.line));
    let Some(key) = key else {
        return (ForwardReply::BadRequest, out);
    };
    if !view.serves(&key) {
        return (ForwardReply::NotOwner(map.epoch()), out);
    }
    if !payload_fits(line, payload.len(), server.settings.item_size_max) {
        return (ForwardReply::BadRequest, out);
    }
    let Ok(counters) = server.stats.get() else {
        return (ForwardReply::BadRequest, out);
    };
    input.append(&mut payload.clone());
    let mut ctx = Context {
        store: &server.store,
        settings: &server.settings,
        counters,
        stats: server.stats,
        now: server.unix_now(),
        started: server.started,
        connections: 0,
        site: Site {
            started: server.started,
            started_mono: server.started_mono,
            // Not a connection of this node's.
            client: 0,
        },
        watch: None,
        expected: 0,
        reserved: 0,
        reserved_in_transit: false,
        gathered: 0,
    };
    match Protocol::Text.handle(&input, &mut ctx, &mut out) {
        Outcome::Consumed(consumed) if consumed == input.len() => (ForwardReply::Meta, out),
        // A refused ms swallows its data block, which is all here, or
        // was not sent (over -I).
        Outcome::Discard { consumed, discard }
            if consumed + discard == input.len() || consumed == input.len() =>
        {
            (ForwardReply::Meta, out)
        }
        // Not reached: `payload_fits` let through only what the handler
        // takes whole.
        _ => {
            ctx.release_value();
            (ForwardReply::BadRequest, IoChain::new())
        }
    }
}

/// Whether a forwarded meta `line` may come with `payload_len` bytes
/// of payload, checked before its handler runs: `ms`'s data block as
/// its datalen says (value and CRLF), or none for an `ms` whose value
/// is over `item_size_max` (`-I`), which the handler then refuses from
/// the line alone; none for `mg`, `md` and `ma`.
fn payload_fits(line: &[u8], payload_len: usize, item_size_max: usize) -> bool {
    let tokens = tokenize(line);
    if tokens.list().first() != Some(&&b"ms"[..]) {
        return payload_len == 0;
    }
    let Some(len) = parse_i32(tokens.get(2)).and_then(|len| usize::try_from(len).ok()) else {
        // The handler answers its bad format from the line alone.
        return payload_len == 0;
    };
    match payload_len {
        0 => len > item_size_max,
        sent => sent == len + 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_one_the_handler_acts_on() {
        assert_eq!(meta_key(b"mg foo v f"), Some(b"foo".to_vec()));
        assert_eq!(meta_key(b"mg foo"), Some(b"foo".to_vec()));
        // `b`: the key is base64 ("Zm9v" is "foo").
        assert_eq!(meta_key(b"md Zm9v b q"), Some(b"foo".to_vec()));
        assert_eq!(meta_key(b"ms foo 2 T0 F5"), Some(b"foo".to_vec()));
        assert_eq!(meta_key(b"ma foo N0 J10 v"), Some(b"foo".to_vec()));
        // What the handler refuses without touching the store stays local.
        assert_eq!(meta_key(b"ms foo"), None);
        assert_eq!(meta_key(b"mg"), None);
        assert_eq!(meta_key(b"mg foo !"), None);
        assert_eq!(meta_key(b"mg foo v v"), None);
        assert_eq!(meta_key(b"mg !!!! b"), None);
        let long = [&b"mg "[..], &[b'k'; 251]].concat();
        assert_eq!(meta_key(&long), None);
        // Not forwarded: mn names no key, me is refused.
        assert_eq!(meta_key(b"mn"), None);
        assert_eq!(meta_key(b"me foo"), None);
        assert_eq!(meta_key(b"get foo"), None);
    }
}
