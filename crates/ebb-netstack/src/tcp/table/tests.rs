//! The connection table driven by hand, segment by segment, where the
//! order of input and timers matters.

use alloc::boxed::Box;
use core::net::{Ipv4Addr, SocketAddrV4};

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{TcpConnection, TcpHandler};

use super::*;

struct Quiet;

impl TcpHandler for Quiet {
    fn on_data(&mut self, _conn: &TcpConnection, _data: IoChain) {}
}

const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn from_peer(dst_port: u16, seq: u32, ack: Option<u32>, flags: Flags) -> Segment {
    Segment {
        src_port: 80,
        dst_port,
        seq: Seq(seq),
        ack: Seq(ack.unwrap_or(0)),
        flags: Flags {
            ack: ack.is_some(),
            ..flags
        },
        window: 65_535,
        mss: None,
        window_scale: None,
        payload: IoBuf::from_vec(alloc::vec::Vec::new()),
    }
}

#[test]
fn a_syn_after_time_wait_ran_out_finds_no_connection_even_before_the_timer_runs() {
    let mut tcp = TcpLayer::new(TcpConfig::default(), 1500);
    let start = Instant(1_000_000_000);
    let (id, local) = tcp
        .connect(start, LOCAL, SocketAddrV4::new(PEER, 80), Box::new(Quiet))
        .unwrap();
    let port = local.port();
    let iss = tcp.out.pop().expect("the SYN").seq.0;
    let syn = Flags {
        syn: true,
        ..Flags::default()
    };
    let fin = Flags {
        fin: true,
        ..Flags::default()
    };
    let _ = tcp.input(
        start,
        PEER,
        LOCAL,
        from_peer(port, 5000, Some(iss + 1), syn),
    );
    assert_eq!(tcp.state(id), Some(State::Established));
    tcp.close(start, id);
    // The peer acknowledges our FIN and sends its own: TIME-WAIT.
    let _ = tcp.input(
        start,
        PEER,
        LOCAL,
        from_peer(port, 5001, Some(iss + 2), fin),
    );
    assert_eq!(tcp.state(id), Some(State::TimeWait));
    tcp.out.clear();
    // 2·MSL later a new SYN for the same pair arrives before the timers
    // have run: the TIME-WAIT is over, so the SYN meets a closed port (an
    // RST: nobody listens) rather than the old connection (a challenge
    // ACK).
    let over = start + tcp.config.msl.saturating_mul(2);
    let _ = tcp.input(over, PEER, LOCAL, from_peer(port, 90_000, None, syn));
    assert_eq!(tcp.state(id), None);
    let answer = tcp.out.pop().expect("an answer to the SYN");
    assert!(answer.flags.rst, "{:?}", answer.flags);
}
