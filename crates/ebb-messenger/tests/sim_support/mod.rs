//! Nodes on Ebbflow's own TCP/IP stack over the simulated link
//! (`ebb_netstack::sim`): a simulated port that records where received
//! frames live (to check payloads are views of them) and can go silent
//! (a node that vanished), and a stack on it; Messenger nodes on such
//! stacks ([`nodes`]).

#![allow(dead_code)]

pub mod nodes;

use std::cell::{Cell, RefCell};
use std::net::Ipv4Addr;
use std::rc::Rc;
use std::time::Duration;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_netstack::device::{Device, DeviceCapabilities};
use ebb_netstack::sim::{Sim, SimPort};
use ebb_netstack::tcp::TcpConfig;
use ebb_netstack::{Config, EthernetAddress, Instant, IpConfig, Stack};

/// The simulated port, recording where received frames live and going
/// silent (both ways) when told to: a node that vanished.
pub struct Port {
    inner: SimPort,
    received: Rc<RefCell<Vec<(usize, usize)>>>,
    vanished: Rc<Cell<bool>>,
}

impl Device for Port {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        let frame = self.inner.receive(now)?;
        if self.vanished.get() {
            return None;
        }
        self.received
            .borrow_mut()
            .push((frame.as_ptr() as usize, frame.len()));
        Some(frame)
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        if !self.vanished.get() {
            self.inner.transmit(now, frame);
        }
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.inner.capabilities()
    }
}

pub struct Side {
    pub stack: Stack<Port>,
    pub received: Rc<RefCell<Vec<(usize, usize)>>>,
    pub vanished: Rc<Cell<bool>>,
}

/// A stack with address `addr` on a new port of `sim`'s wire; a lost
/// peer is given up on within seconds of simulated time.
pub fn side(sim: &Sim, mac: u8, addr: Ipv4Addr) -> Side {
    let received = Rc::new(RefCell::new(Vec::new()));
    let vanished = Rc::new(Cell::new(false));
    let port = Port {
        inner: sim.wire().port(),
        received: received.clone(),
        vanished: vanished.clone(),
    };
    let mut config = Config::new_static(
        EthernetAddress([2, 0, 0, 0, 0, mac]),
        IpConfig {
            addr,
            prefix_len: 24,
            gateway: None,
        },
    );
    // A lost peer is given up on within seconds of simulated time.
    config.tcp = TcpConfig {
        initial_rto: Duration::from_millis(200),
        min_rto: Duration::from_millis(200),
        max_retries: 4,
        max_syn_retries: 3,
        ..TcpConfig::default()
    };
    Side {
        stack: Stack::new(port, config, sim.now()),
        received,
        vanished,
    }
}
