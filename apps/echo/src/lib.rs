//! Echo over Ebbflow's network interface: every byte received on a TCP
//! connection or in a UDP datagram goes back to its sender. Replies are the
//! received buffers themselves, chained unchanged (no copy).
//!
//! Written once against `ebb-app`: the same options and behaviour hosted,
//! on our stack over TAP (`--tap`, `./ebb run echo --userstack`) and
//! native (`./ebb run echo --native`).
//!
//! Started as a node of a distributed application (a boot contract:
//! `node= frontend= ebb_ids= messenger_port=`), echo also serves a
//! Messenger echo Ebb and announces itself to the frontend ([`node`]).
//! Given `--ping-node` as well, once announced it times round trips to
//! another node's echo, Messenger and plain TCP, and prints them for
//! `./ebb bench messenger` ([`ping`]).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod node;
pub mod ping;

use alloc::boxed::Box;
use alloc::format;
use alloc::sync::Arc;
use core::net::SocketAddr;
use core::sync::atomic::{AtomicU64, Ordering};

use ebb_app::net::api::{
    AcceptFn, IoBuf, IoChain, NetError, TcpConnection, TcpHandler, UdpHandler, UdpSocket,
};
use ebb_app::{exit, App, Args, Launch, Opt, UsageError};
use ebb_event::{spawn, spawn_task};

/// Echo's port unless told otherwise, TCP and UDP.
pub const DEFAULT_PORT: u16 = 7007;

const OPTIONS: &[Opt] = &[
    Opt::long_value(
        "listen",
        "ADDR",
        "Address to listen on (default 127.0.0.1 on kernel sockets, 0.0.0.0 on our stack)",
    ),
    Opt::long_value("tcp-port", "PORT", "TCP port (default 7007; 0 picks one)"),
    Opt::long_value(
        "udp-port",
        "PORT",
        "UDP port (default 7007; 0 picks one), served on core 0",
    ),
    Opt::long_value(
        "exit-after",
        "N",
        "Exit (code 0) once N TCP connections have ended",
    ),
    Opt::long_value(
        "ping-node",
        "ID",
        "As a node: once announced, time round trips to node ID's echo (./ebb bench messenger)",
    ),
    Opt::long_value(
        "ping-ebb",
        "ID",
        "With --ping-node: the global id of that node's Messenger echo Ebb",
    ),
    Opt::long_value(
        "ping-tcp",
        "ADDR:PORT",
        "With --ping-node: that node's TCP echo, for the plain ping-pong",
    ),
    Opt::long_value(
        "ping-count",
        "N",
        "With --ping-node: 64-byte round trips of each kind (default 1000)",
    ),
];

/// The application.
pub static APP: App = App {
    name: "echo",
    about: "Echoes TCP connections and UDP datagrams on every core.",
    options: OPTIONS,
    operands: None,
    setup,
};

fn setup(args: &Args) -> Result<Launch, UsageError> {
    let listen = args.parse_or("listen", ebb_app::net::default_listen_ip(), "an IP address")?;
    let tcp = SocketAddr::new(
        listen,
        args.parse_or("tcp-port", DEFAULT_PORT, "a port number")?,
    );
    let udp = SocketAddr::new(
        listen,
        args.parse_or("udp-port", DEFAULT_PORT, "a port number")?,
    );
    let exit_after = match args.value("exit-after") {
        None => None,
        Some(text) => Some(
            text.parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| args.invalid("exit-after", text, "a number above 0"))?,
        ),
    };
    let ping = ping_order(args)?;
    Ok(Launch::new(move || serve(tcp, udp, exit_after, ping)))
}

/// `--ping-node ID --ping-ebb ID --ping-tcp ADDR:PORT [--ping-count N]`,
/// all or none (but the count).
fn ping_order(args: &Args) -> Result<Option<node::PingOrder>, UsageError> {
    let Some(node) = args.value("ping-node") else {
        for needs_node in ["ping-ebb", "ping-tcp", "ping-count"] {
            if let Some(text) = args.value(needs_node) {
                return Err(args.invalid(needs_node, text, "an option of --ping-node"));
            }
        }
        return Ok(None);
    };
    let node = node
        .parse::<u32>()
        .map_err(|_| args.invalid("ping-node", node, "a node id"))?;
    let required = |id: &str| {
        args.value(id)
            .ok_or_else(|| UsageError(format!("--ping-node needs --{id} too")))
    };
    let ebb = required("ping-ebb")?;
    let ebb = ebb
        .parse::<u32>()
        .map_err(|_| args.invalid("ping-ebb", ebb, "a global Ebb id"))?;
    let tcp = required("ping-tcp")?;
    let tcp = tcp
        .parse::<SocketAddr>()
        .map_err(|_| args.invalid("ping-tcp", tcp, "an address and port"))?;
    let count = match args.value("ping-count") {
        None => 1000,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|&n| (2..=100_000).contains(&n))
            .ok_or_else(|| args.invalid("ping-count", text, "a number from 2 to 100000"))?,
    };
    Ok(Some(node::PingOrder {
        node,
        ebb,
        tcp,
        count,
    }))
}

/// Core 0's first event: listens, binds, says it is ready.
fn serve(tcp: SocketAddr, udp: SocketAddr, exit_after: Option<u64>, ping: Option<node::PingOrder>) {
    // A wrong contract stopped the node before it started.
    match ebb_app::node_contract() {
        Ok(Some(contract)) => {
            spawn_task(node::join(contract, tcp.ip(), ping));
        }
        _ if ping.is_some() => {
            ebb_app::error!("--ping-node needs a node's boot contract (node= frontend= ...)");
            exit::stop(exit::USAGE);
            return;
        }
        _ => {}
    }
    spawn_task(async move {
        let accept = exit_after.map_or_else(tcp_echo, counted_echo);
        let tcp = match ebb_app::net::listen(tcp, accept).await {
            Ok(listening) => listening.addr,
            Err(error) => {
                ebb_app::error!("cannot listen on TCP {tcp}: {error}");
                exit::stop(exit::OS_ERROR);
                return;
            }
        };
        match ebb_app::net::udp_bind(udp, || Box::new(UdpEcho)).await {
            Ok(udp) => ebb_app::ready(format_args!("TCP {tcp}, UDP {udp}")),
            Err(error) => {
                ebb_app::error!("cannot bind UDP {udp}: {error}");
                exit::stop(exit::OS_ERROR);
            }
        }
    });
}

/// Echoes a TCP connection; buffers what the peer's window does not take.
pub struct TcpEcho;

impl TcpHandler for TcpEcho {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        if conn.send_or_buffer(data).is_err() {
            conn.abort();
        }
    }
}

/// Handler factory for listeners.
pub fn tcp_echo() -> AcceptFn {
    Arc::new(|_conn: &TcpConnection| Box::new(TcpEcho) as Box<dyn TcpHandler>)
}

/// TCP connections ended so far, for `--exit-after`.
static ENDED: AtomicU64 = AtomicU64::new(0);

/// Echoes, and ends the node after `limit` connections (e.g. for the
/// native platform's counter dump at exit, `verbose`).
struct Counted(TcpEcho, u64);

impl Counted {
    fn ended(&self) {
        if ENDED.fetch_add(1, Ordering::Relaxed) + 1 >= self.1 {
            // After this event, so that our FIN goes out first.
            spawn(|| exit::stop(exit::SUCCESS));
        }
    }
}

impl TcpHandler for Counted {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        self.0.on_data(conn, data);
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        conn.close();
        self.ended();
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, _error: NetError) {
        self.ended();
    }
}

fn counted_echo(limit: u64) -> AcceptFn {
    Arc::new(move |_conn: &TcpConnection| Box::new(Counted(TcpEcho, limit)) as Box<dyn TcpHandler>)
}

/// Echoes UDP datagrams to their source.
pub struct UdpEcho;

impl UdpHandler for UdpEcho {
    fn on_datagram(&mut self, socket: &UdpSocket, from: SocketAddr, data: IoBuf) {
        // A datagram that cannot be sent is lost, as UDP allows.
        let _ = socket.send_to(from, IoChain::from(data));
    }
}
