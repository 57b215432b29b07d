//! The network of a cluster: a hosted frontend and native nodes on one
//! Ethernet segment, all inside one network namespace created for the
//! cluster (QEMU-NOTES: private addresses and TAP devices only ever inside
//! a namespace we create and delete).
//!
//! ```text
//!  namespace ebb-PID-TAG-N
//!    ebbfe0 (frontend, .1/24) ══ veth ══ ebbfe0p ─┐
//!                                  ebbtap1 (node 1, .2) ─┤ bridge ebbbr0
//!                                  ebbtap2 (node 2, .3) ─┘
//! ```
//!
//! Both ends of the veth pair live in the namespace: one is a port of the
//! bridge, the other carries the frontend's address, so a frontend run
//! inside the namespace (`NetNamespace::run_inside`, `ip netns exec`)
//! reaches every node, and no private address exists outside it. The TAP
//! devices are bridge ports without addresses. [`AddressPlan`] hands out
//! the addresses: the frontend (node 0) is `.1`, node `k` is `.k+1`, and a
//! node's MAC address is derived from its id. Dropping the
//! [`ClusterNetwork`] deletes the namespace, which removes every device in
//! it.

use std::net::Ipv4Addr;
use std::sync::Mutex;

use crate::link::{Bridge, VethPair};
use crate::netns::NetNamespace;
use crate::tap::{TapConfig, TapDevice};

/// The bridge joining the nodes and the frontend.
pub const BRIDGE: &str = "ebbbr0";
/// The frontend's end of the veth pair (it carries the frontend's address).
pub const FRONTEND_IF: &str = "ebbfe0";
/// The veth pair's other end, a port of the bridge.
const FRONTEND_PORT: &str = "ebbfe0p";

/// Addresses on a cluster's /24: node `k` at `.k+1`, the frontend being
/// node 0 at `.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressPlan {
    /// The subnet's first address (`.0`).
    pub subnet: Ipv4Addr,
}

impl AddressPlan {
    /// The plan's prefix length.
    pub const PREFIX_LEN: u8 = 24;
    /// The highest node id that has an address (`.254`).
    pub const MAX_NODE: u32 = 253;

    /// 10.96.0.0/24: private, and only ever inside the cluster's namespace.
    /// It lies in Kubernetes' default service range (10.96.0.0/12), whose
    /// 10.96.0.1 an IPVS host binds itself; that does not collide with a
    /// cluster, whose addresses and routes live in its own namespace (the
    /// testbed test that shows the frontend's address is not the host's
    /// says it cannot show that on such a host).
    pub const fn default_plan() -> Self {
        AddressPlan {
            subnet: Ipv4Addr::new(10, 96, 0, 0),
        }
    }

    /// The frontend's address (node 0).
    pub fn frontend(&self) -> Ipv4Addr {
        self.node(0).expect("node 0 has an address")
    }

    /// Node `id`'s address, or why it has none.
    pub fn node(&self, id: u32) -> Result<Ipv4Addr, String> {
        if id > Self::MAX_NODE {
            return Err(format!(
                "node {id} has no address: a cluster's /24 holds nodes 0 to {}",
                Self::MAX_NODE
            ));
        }
        Ok(Ipv4Addr::from(u32::from(self.subnet) + id + 1))
    }

    /// Node `id`'s MAC address: QEMU's locally administered prefix
    /// 52:54:00, then `eb` and the id's low 16 bits.
    pub fn mac(id: u32) -> String {
        let [_, _, high, low] = id.to_be_bytes();
        format!("52:54:00:eb:{high:02x}:{low:02x}")
    }

    /// What node `id` is told of its place on this plan's network (its
    /// TAP device's name, address, MAC, the frontend's address); nothing
    /// is created.
    ///
    /// # Errors
    ///
    /// `id` is 0 (the frontend) or past [`AddressPlan::MAX_NODE`].
    pub fn link(&self, id: u32) -> Result<NodeLink, String> {
        let address = self.node(id)?;
        if id == 0 {
            return Err("node 0 is the frontend".to_owned());
        }
        Ok(NodeLink {
            id,
            tap: format!("ebbtap{id}"),
            address,
            prefix_len: AddressPlan::PREFIX_LEN,
            frontend: self.frontend(),
            mac: AddressPlan::mac(id),
        })
    }
}

/// What a node's launcher needs to put it on the cluster's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLink {
    /// The node's id.
    pub id: u32,
    /// Its TAP device in the namespace (QEMU's `-netdev tap,ifname=`).
    pub tap: String,
    /// Its address.
    pub address: Ipv4Addr,
    /// The prefix length of the cluster's subnet.
    pub prefix_len: u8,
    /// The frontend's address (the node's gateway).
    pub frontend: Ipv4Addr,
    /// Its NIC's MAC address.
    pub mac: String,
}

impl NodeLink {
    /// The native platform's static address option
    /// (`ebb_boot_abi::StaticIp`): `ip=ADDR/LEN,gw=FRONTEND`.
    pub fn boot_arg(&self) -> String {
        format!(
            "ip={}/{},gw={}",
            self.address, self.prefix_len, self.frontend
        )
    }
}

/// A cluster's namespace with its bridge, the frontend's veth pair and
/// one TAP device per node; everything is deleted on drop.
#[derive(Debug)]
pub struct ClusterNetwork {
    // Declared (so dropped) before the namespace.
    taps: Mutex<Vec<(u32, TapDevice)>>,
    _veth: VethPair,
    _bridge: Bridge,
    namespace: NetNamespace,
    plan: AddressPlan,
}

impl ClusterNetwork {
    /// Creates namespace `ebb-PID-TAG-N` ([`NetNamespace::for_this_process`])
    /// with the bridge and the frontend's veth pair, the frontend at
    /// `plan.frontend()`.
    pub fn create(tag: &str, plan: AddressPlan) -> Result<ClusterNetwork, String> {
        let namespace = NetNamespace::for_this_process(tag)?;
        let bridge = Bridge::create(&namespace, BRIDGE)?;
        let veth = VethPair::create(&namespace, FRONTEND_IF, &namespace, FRONTEND_PORT)?;
        bridge.attach(FRONTEND_PORT)?;
        let cidr = format!("{}/{}", plan.frontend(), AddressPlan::PREFIX_LEN);
        namespace.ip(&["addr", "add", &cidr, "dev", FRONTEND_IF])?;
        // ARP answers for the frontend only from the interface that has
        // its address (arp_ignore=1, Linux's ip-sysctl.rst): by default
        // the bridge answers too, with its own MAC, and a node got two
        // replies for 10.96.0.1 with different addresses, keeping
        // whichever came first (the kernel's arp locktime).
        namespace.exec(&[
            "sh",
            "-c",
            "echo 1 > /proc/sys/net/ipv4/conf/all/arp_ignore",
        ])?;
        Ok(ClusterNetwork {
            taps: Mutex::new(Vec::new()),
            _veth: veth,
            _bridge: bridge,
            namespace,
            plan,
        })
    }

    /// The namespace: run the frontend (and anything talking to the
    /// nodes) inside it.
    pub fn namespace(&self) -> &NetNamespace {
        &self.namespace
    }

    /// The frontend's address.
    pub fn frontend(&self) -> Ipv4Addr {
        self.plan.frontend()
    }

    /// Adds node `id`: its TAP device on the bridge, and a permanent
    /// neighbour entry for it on the frontend's side (the first packets do
    /// not wait for ARP: BENCH-NOTES, ARP retries add 1 s steps).
    pub fn add_node(&self, id: u32) -> Result<NodeLink, String> {
        let link = self.plan.link(id)?;
        let address = link.address;
        let mut taps = self.taps.lock().unwrap_or_else(|e| e.into_inner());
        if taps.iter().any(|(known, _)| *known == id) {
            return Err(format!("node {id} is already on the cluster's network"));
        }
        let tap = TapDevice::create(&self.namespace, &TapConfig::bridge_port(&link.tap, BRIDGE))?;
        self.namespace.ip(&[
            "neigh",
            "replace",
            &address.to_string(),
            "lladdr",
            &link.mac,
            "dev",
            FRONTEND_IF,
            "nud",
            "permanent",
        ])?;
        taps.push((id, tap));
        Ok(link)
    }

    /// Removes node `id`'s TAP device (after its QEMU has exited).
    pub fn remove_node(&self, id: u32) {
        let mut taps = self.taps.lock().unwrap_or_else(|e| e.into_inner());
        taps.retain(|(known, _)| *known != id);
        let _ = self.namespace.ip(&[
            "neigh",
            "del",
            &self
                .plan
                .node(id)
                .map(|a| a.to_string())
                .unwrap_or_default(),
            "dev",
            FRONTEND_IF,
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frontend_is_dot_1_and_nodes_follow_with_macs_from_their_ids() {
        let plan = AddressPlan::default_plan();
        assert_eq!(plan.frontend(), Ipv4Addr::new(10, 96, 0, 1));
        assert_eq!(plan.node(1), Ok(Ipv4Addr::new(10, 96, 0, 2)));
        assert_eq!(plan.node(253), Ok(Ipv4Addr::new(10, 96, 0, 254)));
        let err = plan.node(254).expect_err("past the /24");
        assert!(err.contains("holds nodes 0 to 253"), "{err}");
        assert_eq!(AddressPlan::mac(1), "52:54:00:eb:00:01");
        assert_eq!(AddressPlan::mac(0x1234), "52:54:00:eb:12:34");
    }

    #[test]
    fn a_node_link_gives_the_static_address_option() {
        let link = NodeLink {
            id: 2,
            tap: "ebbtap2".to_owned(),
            address: Ipv4Addr::new(10, 96, 0, 3),
            prefix_len: 24,
            frontend: Ipv4Addr::new(10, 96, 0, 1),
            mac: AddressPlan::mac(2),
        };
        assert_eq!(link.boot_arg(), "ip=10.96.0.3/24,gw=10.96.0.1");
    }
}
