//! The `ebb-net` interface contract on Ebbflow's TCP, exercised the way
//! `apps/memcached` uses it: `send_or_buffer` replies, pause receiving when
//! the send credit is used up, resume on `on_send_credit`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use ebb_iobuf::IoChain;
use ebb_net::{NetStack, TcpConnection, TcpHandler};
use ebb_netstack::device::FaultConfig;
use ebb_netstack::sim::LinkConfig;

/// Pauses taken by the servers (shared by the Send + Sync accept function).
static PAUSES: AtomicUsize = AtomicUsize::new(0);

/// An echo server written like memcached's `Connection::process`.
struct CreditAwareEcho {
    paused: bool,
}

impl TcpHandler for CreditAwareEcho {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        // Echo the received views themselves: no copy on either side.
        if conn.send_or_buffer(data).is_err() {
            conn.abort();
            return;
        }
        if conn.send_credit() == 0 && !self.paused {
            self.paused = true;
            PAUSES.fetch_add(1, Ordering::Relaxed);
            conn.pause_receive();
        }
    }

    fn on_send_credit(&mut self, conn: &TcpConnection) {
        if self.paused {
            self.paused = false;
            conn.resume_receive();
        }
    }
}

#[test]
fn a_server_that_pauses_on_zero_credit_echoes_everything() {
    for loss_pct in [0, 2] {
        let link = LinkConfig {
            faults: FaultConfig {
                seed: 3,
                loss_pct,
                ..FaultConfig::default()
            },
            latency: Duration::from_millis(2),
            bandwidth_bps: 1_000_000_000,
        };
        // The client's small receive buffer limits the echo's send window,
        // so the server runs out of credit while requests keep coming.
        let mut client_tcp = test_tcp();
        client_tcp.recv_buffer = 64 << 10;
        let (mut sim, a, b) = two_stacks(link, client_tcp, test_tcp());
        let pauses_before = PAUSES.load(Ordering::Relaxed);
        b.listen(
            sock(IP_B, 7),
            std::sync::Arc::new(|_conn: &TcpConnection| {
                Box::new(CreditAwareEcho { paused: false }) as Box<dyn TcpHandler>
            }),
        )
        .unwrap();
        let data = pattern(4 << 20, 5);
        let log = Log::default();
        a.connect(
            sock(IP_B, 7),
            Box::new(Recorder {
                to_send: Some(chunks(&data, 1000)),
                ..Recorder::new(log.clone())
            }),
        )
        .unwrap();
        sim.run_for(Duration::from_secs(60));
        assert_eq!(log.borrow().data.len(), data.len(), "loss {loss_pct} %");
        assert!(log.borrow().data == data);
        assert!(
            PAUSES.load(Ordering::Relaxed) > pauses_before,
            "the credit ran out and receiving paused"
        );
    }
}
