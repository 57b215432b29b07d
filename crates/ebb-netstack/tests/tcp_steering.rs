//! One interface, one stack per core: connections stay on the core that
//! set them up, and segments the NIC steers to another core are forwarded
//! to the owner through the shared flow directory instead of being reset
//! (`ebb_netstack::steering`).
//!
//! The NIC here deals frames to its two queues round robin — the worst a
//! steering can do (a host's tun device falls back to hashing once it
//! forgets an idle flow) — except ARP, which every core sees, as the
//! native driver does.

mod common;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use common::{
    accepted, chunks, config, listen_recording, pattern, sock, test_tcp, Log, Recorder, IP_A, IP_B,
    MAC_A, MAC_B,
};
use ebb_core::CoreId;
use ebb_iobuf::IoBuf;
use ebb_net::NetStack;
use ebb_netstack::device::{Device, DeviceCapabilities};
use ebb_netstack::sim::{LinkConfig, Sim, SimPort};
use ebb_netstack::steering::{FlowDirectory, Steering};
use ebb_netstack::tcp::TcpConfig;
use ebb_netstack::{Instant, Stack};

const CORES: usize = 2;

/// A NIC with one receive queue per core on one wire port.
struct Nic {
    port: SimPort,
    queues: Vec<VecDeque<IoBuf>>,
    next: usize,
}

impl Nic {
    fn deal(&mut self, now: Instant) {
        while let Some(frame) = self.port.receive(now) {
            // Ethertype 0x0806: ARP goes to every queue.
            if frame.len() >= 14 && frame[12..14] == [0x08, 0x06] {
                for queue in &mut self.queues {
                    queue.push_back(frame.clone());
                }
                continue;
            }
            self.queues[self.next].push_back(frame);
            self.next = (self.next + 1) % self.queues.len();
        }
    }
}

/// One core's queue pair.
struct Queue {
    nic: Rc<RefCell<Nic>>,
    index: usize,
}

impl Device for Queue {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        let mut nic = self.nic.borrow_mut();
        nic.deal(now);
        nic.queues[self.index].pop_front()
    }

    fn transmit(&mut self, now: Instant, frame: ebb_iobuf::IoChain) {
        self.nic.borrow_mut().port.transmit(now, frame);
    }

    fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities::default()
    }
}

/// Forwarding between the cores: onto the owner's queue (natively, a
/// message to the owner's event loop).
struct Forwarder {
    directory: FlowDirectory,
    nic: Rc<RefCell<Nic>>,
}

impl Steering for Forwarder {
    fn directory(&self) -> &FlowDirectory {
        &self.directory
    }

    fn forward(&self, core: CoreId, frame: &IoBuf) {
        self.nic.borrow_mut().queues[core.0].push_back(frame.clone());
    }
}

struct Setup {
    sim: Sim,
    client: Stack<SimPort>,
    cores: Vec<Stack<Queue>>,
    steering: Rc<Forwarder>,
}

/// A client stack at 10.0.0.1 and a server interface at 10.0.0.2 with one
/// stack per core.
fn setup() -> Setup {
    let mut sim = Sim::new(LinkConfig {
        latency: Duration::from_micros(50),
        ..LinkConfig::default()
    });
    let client = Stack::new(
        sim.wire().port(),
        config(MAC_A, IP_A, test_tcp()),
        sim.now(),
    );
    sim.add(Box::new(client.clone()));
    let nic = Rc::new(RefCell::new(Nic {
        port: sim.wire().port(),
        queues: vec![VecDeque::new(); CORES],
        next: 0,
    }));
    let steering = Rc::new(Forwarder {
        directory: FlowDirectory::new(256, 42),
        nic: Rc::clone(&nic),
    });
    let cores: Vec<Stack<Queue>> = (0..CORES)
        .map(|index| {
            let tcp = TcpConfig {
                core: CoreId(index),
                seed: 1000 + index as u64,
                ..test_tcp()
            };
            let stack = Stack::new(
                Queue {
                    nic: Rc::clone(&nic),
                    index,
                },
                config(MAC_B, IP_B, tcp),
                sim.now(),
            );
            stack.set_steering(Rc::clone(&steering) as Rc<dyn Steering>);
            sim.add(Box::new(stack.clone()));
            stack
        })
        .collect();
    Setup {
        sim,
        client,
        cores,
        steering,
    }
}

fn run_until(sim: &mut Sim, max: Duration, mut done: impl FnMut() -> bool) {
    let step = Duration::from_millis(20);
    let mut elapsed = Duration::ZERO;
    while !done() && elapsed < max {
        sim.run_for(step);
        elapsed += step;
    }
}

fn resets(cores: &[Stack<Queue>]) -> u64 {
    cores.iter().map(|c| c.tcp(|t| t.stats().resets_sent)).sum()
}

#[test]
fn a_connection_whose_segments_land_on_the_wrong_core_half_the_time_is_intact() {
    let Setup {
        mut sim,
        client,
        cores,
        steering,
    } = setup();
    let up = pattern(1 << 20, 1);
    let down = pattern(1 << 20, 2);
    let down_copy = down.clone();
    for core in &cores {
        let down = down_copy.clone();
        listen_recording(core, 80, move |log| Recorder {
            to_send: Some(chunks(&down, 16_384)),
            close_after_send: true,
            ..Recorder::new(log)
        });
    }
    let heard = Log::default();
    client
        .connect(
            sock(IP_B, 80),
            Box::new(Recorder {
                to_send: Some(chunks(&up, 10_000)),
                close_after_send: true,
                ..Recorder::new(heard.clone())
            }),
        )
        .unwrap();
    run_until(&mut sim, Duration::from_secs(60), || {
        let c = heard.borrow();
        c.peer_closed && c.data.len() == down.len()
    });
    let servers = accepted(80);
    assert_eq!(servers.len(), 1, "one connection, on one core");
    let server = servers[0].borrow();
    assert!(server.data == up, "client → server bytes");
    assert!(heard.borrow().data == down, "server → client bytes");
    assert!(server.peer_closed && heard.borrow().peer_closed);
    assert_eq!(resets(&cores), 0, "no core reset a live connection");
    let forwarded: u64 = cores.iter().map(|c| c.tcp(|t| t.stats().forwarded)).sum();
    assert!(forwarded > 100, "forwarded {forwarded} segments");
    let owners = cores.iter().filter(|c| c.tcp(|t| !t.is_empty())).count();
    assert_eq!(owners, 1, "the connection lives on one core");
    assert_eq!(steering.directory.len(), 1);

    // TIME-WAIT ends: the flow leaves the directory with its connection.
    sim.run_for(Duration::from_secs(240));
    assert!(cores.iter().all(|c| c.tcp(|t| t.is_empty())));
    assert!(steering.directory.is_empty());
}

#[test]
fn connections_spread_over_the_cores_and_each_stays_on_its_own() {
    let Setup {
        mut sim,
        client,
        cores,
        ..
    } = setup();
    for core in &cores {
        listen_recording(core, 80, Recorder::new);
    }
    let logs: Vec<Log> = (0..20)
        .map(|i| {
            let log = Log::default();
            client
                .connect(
                    sock(IP_B, 80),
                    Box::new(Recorder {
                        to_send: Some(chunks(&pattern(3000, i), 1000)),
                        close_after_send: true,
                        ..Recorder::new(log.clone())
                    }),
                )
                .unwrap();
            log
        })
        .collect();
    run_until(&mut sim, Duration::from_secs(30), || {
        logs.iter().all(|l| l.borrow().peer_closed)
    });
    assert!(logs.iter().all(|l| l.borrow().aborted.is_none()));
    let servers = accepted(80);
    assert_eq!(servers.len(), 20);
    let mut heard: Vec<Vec<u8>> = servers.iter().map(|s| s.borrow().data.clone()).collect();
    heard.sort();
    let mut sent: Vec<Vec<u8>> = (0..20).map(|i| pattern(3000, i)).collect();
    sent.sort();
    assert_eq!(heard, sent);
    let per_core: Vec<u64> = cores
        .iter()
        .map(|c| c.tcp(|t| t.stats().accepted))
        .collect();
    assert_eq!(per_core.iter().sum::<u64>(), 20);
    assert!(
        per_core.iter().all(|&n| n > 0),
        "accepted per core: {per_core:?}"
    );
    assert_eq!(resets(&cores), 0);
}

#[test]
fn cores_connecting_to_one_peer_pick_different_ports() {
    let Setup {
        mut sim,
        client,
        cores,
        ..
    } = setup();
    listen_recording(&client, 9000, Recorder::new);
    let logs: Vec<Log> = cores
        .iter()
        .map(|core| {
            let log = Log::default();
            core.connect(sock(IP_A, 9000), Box::new(Recorder::new(log.clone())))
                .unwrap();
            log
        })
        .collect();
    run_until(&mut sim, Duration::from_secs(10), || {
        logs.iter().all(|l| l.borrow().connected)
    });
    let ports: Vec<u16> = logs
        .iter()
        .map(|l| l.borrow().conn.as_ref().unwrap().local_addr().port())
        .collect();
    assert_ne!(ports[0], ports[1]);
    assert_eq!(accepted(9000).len(), 2);
}
