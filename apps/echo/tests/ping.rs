//! `echo::ping`, what `./ebb bench messenger` measures with, on hosted
//! nodes over 127.0.0.1 (no timing asserts): a frontend (this test) times
//! round trips of every kind to an echo node, and a second echo node
//! started with `--ping-node` times them to the first and prints its
//! samples. And `--ping-*` options without the rest are refused.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use ebb_core::{EbbId, NodeId};
use ebb_messenger::LocalFrontend;
use ebb_testbed::{free_port, KilledOnDrop};
use echo::ping::{measure, Target, LARGE, LARGE_COUNT, SMALL};

const ECHO_BIN: &str = env!("CARGO_BIN_EXE_echo");
const LIMIT: Duration = Duration::from_secs(60);

/// The frontend listens on 127.0.0.1, any port.
const LOOPBACK: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// Echo as node `node` with the frontend at `frontend`, TCP echo on
/// `tcp_port`, and `args`; its standard error piped.
fn echo_node(
    node: u32,
    frontend: SocketAddr,
    ids: u32,
    tcp_port: u16,
    args: &[String],
) -> KilledOnDrop {
    let words = format!(
        "node={node} frontend={frontend} ebb_ids={ids}-{} messenger_port={}",
        ids + 64,
        free_port().expect("a free port")
    );
    KilledOnDrop(
        Command::new(ECHO_BIN)
            .args(["--cores", "1", "--no-pin", "--udp-port", "0"])
            .arg(format!("--tcp-port={tcp_port}"))
            .args(args)
            .env("EBB_NODE", words)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run echo"),
    )
}

#[test]
fn the_frontend_and_a_pinging_node_time_every_kind_of_round_trip() {
    let (addr_tx, addr_rx) = mpsc::channel::<(SocketAddr, u32)>();
    let (tcp_tx, tcp_rx) = mpsc::channel::<u16>();
    let (result_tx, result_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let (measured_tx, measured_rx) = mpsc::channel::<()>();
    thread::spawn(move || {
        let result = ebb_hosted::run_task(
            ebb_hosted::Config::one_core_side_by_side(),
            move || async move {
                let frontend = LocalFrontend::start(LOOPBACK, 2, 64).unwrap();
                let echo_ebb = frontend.ranges[0].start;
                addr_tx.send((frontend.addr, echo_ebb)).unwrap();
                let tcp_port = tcp_rx.recv().unwrap();
                frontend.registry.when_announced(NodeId(1)).await.unwrap();
                let target = Target {
                    node: NodeId(1),
                    ebb: EbbId::new(echo_ebb).unwrap(),
                    tcp: SocketAddr::from(([127, 0, 0, 1], tcp_port)),
                };
                let measured = measure(frontend.messenger.get().unwrap(), target, 6).await;
                // Node 1 has announced itself: node 2 can find it.
                measured_tx.send(()).unwrap();
                // Serves node 2's announcement and look-up until told.
                while stop_rx.try_recv().is_err() {
                    ebb_event::sleep(Duration::from_millis(5)).await;
                }
                measured
            },
        );
        let _ = result_tx.send(result);
    });
    let (frontend, ids) = addr_rx.recv_timeout(LIMIT).expect("the frontend listens");
    let tcp_port = free_port().expect("a free port");
    tcp_tx.send(tcp_port).unwrap();
    let _target = echo_node(1, frontend, ids, tcp_port, &[]);
    measured_rx
        .recv_timeout(LIMIT)
        .expect("node 1 announced itself and the frontend measured");

    let mut pinger = echo_node(
        2,
        frontend,
        ids + 64,
        0,
        &[
            "--ping-node=1".to_owned(),
            format!("--ping-ebb={ids}"),
            format!("--ping-tcp=127.0.0.1:{tcp_port}"),
            "--ping-count=4".to_owned(),
        ],
    );
    let stderr = pinger.0.stderr.take().expect("piped");
    let (line_tx, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = line_tx.send(line);
        }
    });
    let deadline = Instant::now() + LIMIT;
    let mut printed = Vec::new();
    while !printed.iter().any(|line| line == "echo: ping done") {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => printed.push(line),
            Err(_) => panic!("node 2 did not finish:\n{}", printed.join("\n")),
        }
    }
    let _ = stop_tx.send(());
    let (samples, pipelined_ns) = result_rx
        .recv_timeout(LIMIT)
        .expect("the frontend finished")
        .expect("the frontend node ran")
        .expect("every round trip succeeded");

    let kinds: Vec<(&str, usize, usize)> = samples
        .iter()
        .map(|s| (s.kind, s.size, s.ns.len()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("messenger", SMALL, 6),
            ("tcp", SMALL, 6),
            ("messenger", LARGE, LARGE_COUNT),
            ("tcp", LARGE, LARGE_COUNT),
        ]
    );
    assert!(samples.iter().all(|s| s.ns.iter().all(|&ns| ns > 0)));
    assert!(pipelined_ns > 0);

    let numbers = |prefix: &str| -> usize {
        printed
            .iter()
            .filter_map(|line| line.strip_prefix(prefix))
            .map(|rest| rest.split_whitespace().count())
            .sum()
    };
    let text = printed.join("\n");
    assert_eq!(numbers("echo: ping messenger 64 ns:"), 4, "{text}");
    assert_eq!(numbers("echo: ping tcp 64 ns:"), 4, "{text}");
    assert_eq!(
        numbers("echo: ping messenger 1048576 ns:"),
        LARGE_COUNT,
        "{text}"
    );
    assert_eq!(numbers("echo: ping tcp 1048576 ns:"), LARGE_COUNT, "{text}");
    // 4 × 4 pipelined calls, and the nanoseconds they took.
    assert_eq!(numbers("echo: ping pipelined 16 ns:"), 1, "{text}");
}

fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(ECHO_BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run echo");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ping_options_without_the_rest_are_refused() {
    let (code, text) = refused(&["--ping-tcp", "127.0.0.1:7"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(
            "invalid value '127.0.0.1:7' for '--ping-tcp <ADDR:PORT>': an option of --ping-node"
        ),
        "{text}"
    );
    let (code, text) = refused(&["--ping-node", "1", "--ping-ebb", "300"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--ping-node needs --ping-tcp too"), "{text}");
    let (code, text) = refused(&["--ping-node", "one"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("invalid value 'one' for '--ping-node <ID>': a node id"),
        "{text}"
    );
}
