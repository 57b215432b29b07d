//! TAP devices inside a [`NetNamespace`]: the host's (kernel's) side of a
//! guest's or a user-space stack's link.
//!
//! [`TapConfig`] says what to create: the interface, the host side's
//! address, optionally a permanent neighbour entry for the guest (so the
//! first packets do not wait for ARP: BENCH-NOTES, ARP retries add 1 s
//! steps), multi-queue and a virtio-net header. [`TapDevice::create`] runs
//! the `ip -n NS ...` commands; the device is deleted on drop (and with its
//! namespace in any case).

use std::net::Ipv4Addr;

use crate::netns::NetNamespace;

/// The longest interface name Linux takes (`IFNAMSIZ` - 1).
pub const MAX_IFNAME: usize = 15;

/// How to set up a [`TapDevice`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapConfig {
    /// Interface name (at most [`MAX_IFNAME`] bytes).
    pub ifname: String,
    /// The host side's address.
    pub host: Ipv4Addr,
    /// The prefix length of the link's subnet.
    pub prefix_len: u8,
    /// The guest's address and its NIC's MAC address, for a permanent
    /// neighbour entry; `None` leaves the neighbour to ARP.
    pub guest: Option<(Ipv4Addr, String)>,
    /// Queue pairs; more than one creates a multi-queue TAP.
    pub queues: u16,
    /// Whether frames carry a virtio-net header (`vnet_hdr`), for checksum
    /// offload between the guest and the host.
    pub vnet_hdr: bool,
    /// A bridge of the same namespace to enslave the device to, instead
    /// of giving it an address: a cluster's node links
    /// ([`crate::cluster_net`]), where the host's address sits on the
    /// bridge's other port.
    pub bridge: Option<String>,
}

impl TapConfig {
    /// `ifname` with the host at `host/prefix_len`, one queue, no
    /// neighbour entry, no virtio-net header.
    pub fn new(ifname: &str, host: Ipv4Addr, prefix_len: u8) -> Self {
        TapConfig {
            ifname: ifname.to_owned(),
            host,
            prefix_len,
            guest: None,
            queues: 1,
            vnet_hdr: false,
            bridge: None,
        }
    }

    /// `ifname` as a port of bridge `bridge`: no address of its own (the
    /// host is reached through the bridge), no neighbour entry.
    pub fn bridge_port(ifname: &str, bridge: &str) -> Self {
        TapConfig {
            bridge: Some(bridge.to_owned()),
            ..TapConfig::new(ifname, Ipv4Addr::UNSPECIFIED, 0)
        }
    }

    /// `ifname` with the host at `host_cidr` (`ADDR/LEN`, e.g.
    /// `10.99.0.1/24`), as [`TapConfig::new`].
    pub fn from_cidr(ifname: &str, host_cidr: &str) -> Result<Self, String> {
        let bad = || format!("'{host_cidr}' is not ADDR/LEN (e.g. 10.99.0.1/24)");
        let (addr, len) = host_cidr.split_once('/').ok_or_else(bad)?;
        let addr = addr.parse().map_err(|_| bad())?;
        let len = len.parse().ok().filter(|&len| len <= 32).ok_or_else(bad)?;
        Ok(TapConfig::new(ifname, addr, len))
    }

    /// The benchmarks' guest link: `ebbtap0`, host 192.168.77.1/24, the
    /// guest at 192.168.77.2 with `guest_mac` (private addresses: only ever
    /// inside a namespace).
    pub fn guest_link(guest_mac: &str) -> Self {
        TapConfig::new("ebbtap0", Ipv4Addr::new(192, 168, 77, 1), 24)
            .with_guest(Ipv4Addr::new(192, 168, 77, 2), guest_mac)
    }

    /// The same with a permanent neighbour entry for the guest.
    #[must_use]
    pub fn with_guest(mut self, addr: Ipv4Addr, mac: &str) -> Self {
        self.guest = Some((addr, mac.to_owned()));
        self
    }

    /// The same with `queues` queue pairs.
    #[must_use]
    pub fn with_queues(mut self, queues: u16) -> Self {
        self.queues = queues;
        self
    }

    /// The same with a virtio-net header on every frame.
    #[must_use]
    pub fn with_vnet_hdr(mut self) -> Self {
        self.vnet_hdr = true;
        self
    }

    /// The host side as `ADDR/LEN`.
    pub fn host_cidr(&self) -> String {
        format!("{}/{}", self.host, self.prefix_len)
    }

    /// The `ip` arguments that set the device up inside namespace `ns`, in
    /// order: the device, the host's address (or its bridge), up, the
    /// guest's neighbour.
    pub fn setup_commands(&self, ns: &str) -> Vec<Vec<String>> {
        let owned = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let mut add = vec![
            "-n",
            ns,
            "tuntap",
            "add",
            "dev",
            &self.ifname,
            "mode",
            "tap",
        ];
        if self.queues > 1 {
            add.push("multi_queue");
        }
        if self.vnet_hdr {
            add.push("vnet_hdr");
        }
        let host = self.host_cidr();
        let place = match &self.bridge {
            Some(bridge) => owned(&["-n", ns, "link", "set", &self.ifname, "master", bridge]),
            None => owned(&["-n", ns, "addr", "add", &host, "dev", &self.ifname]),
        };
        let mut commands = vec![
            owned(&add),
            place,
            owned(&["-n", ns, "link", "set", &self.ifname, "up"]),
        ];
        if let Some((addr, mac)) = &self.guest {
            let addr = addr.to_string();
            commands.push(owned(&[
                "-n",
                ns,
                "neigh",
                "replace",
                &addr,
                "lladdr",
                mac,
                "dev",
                &self.ifname,
                "nud",
                "permanent",
            ]));
        }
        commands
    }
}

/// A TAP interface in a [`NetNamespace`], up, with the host side's
/// address; removed on drop.
#[derive(Debug)]
pub struct TapDevice {
    namespace: String,
    config: TapConfig,
}

impl TapDevice {
    /// Creates the device `config` describes inside `namespace`.
    pub fn create(namespace: &NetNamespace, config: &TapConfig) -> Result<Self, String> {
        if config.ifname.is_empty() || config.ifname.len() > MAX_IFNAME {
            return Err(format!(
                "interface name '{}' must be 1 to {MAX_IFNAME} bytes",
                config.ifname
            ));
        }
        let mut device = None;
        for command in config.setup_commands(namespace.name()) {
            let words: Vec<&str> = command.iter().map(String::as_str).collect();
            // On failure the device made so far is dropped, so deleted.
            crate::netns::ip(&words)
                .map_err(|e| format!("{e} (TAP devices need root and /dev/net/tun)"))?;
            device.get_or_insert_with(|| TapDevice {
                namespace: namespace.name().to_owned(),
                config: config.clone(),
            });
        }
        device.ok_or_else(|| "no command created the TAP device".to_owned())
    }

    /// The interface name, for QEMU's `-netdev tap,ifname=`.
    pub fn ifname(&self) -> &str {
        &self.config.ifname
    }

    /// The host side's address.
    pub fn host(&self) -> Ipv4Addr {
        self.config.host
    }

    /// The guest's address, when the device has a neighbour entry for it.
    pub fn guest(&self) -> Option<Ipv4Addr> {
        self.config.guest.as_ref().map(|(addr, _)| *addr)
    }

    /// How the device was made.
    pub fn config(&self) -> &TapConfig {
        &self.config
    }
}

impl Drop for TapDevice {
    fn drop(&mut self) {
        // Quietly: the namespace may already be gone, and the device with it.
        let _ = crate::netns::ip(&["-n", &self.namespace, "link", "del", &self.config.ifname]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The setup commands in namespace `ns`, one line each.
    fn setup_lines(config: &TapConfig) -> Vec<String> {
        config
            .setup_commands("ns")
            .into_iter()
            .map(|c| c.join(" "))
            .collect()
    }

    #[test]
    fn setup_adds_address_and_the_guests_permanent_neighbour() {
        let config = TapConfig::new("ebbtap0", Ipv4Addr::new(192, 168, 77, 1), 24)
            .with_guest(Ipv4Addr::new(192, 168, 77, 2), "52:54:00:eb:b0:01");
        assert_eq!(
            setup_lines(&config),
            [
                "-n ns tuntap add dev ebbtap0 mode tap",
                "-n ns addr add 192.168.77.1/24 dev ebbtap0",
                "-n ns link set ebbtap0 up",
                "-n ns neigh replace 192.168.77.2 lladdr 52:54:00:eb:b0:01 dev ebbtap0 nud permanent",
            ]
        );
        let multi = config.with_queues(4).with_vnet_hdr();
        assert!(multi.setup_commands("ns")[0]
            .join(" ")
            .ends_with("mode tap multi_queue vnet_hdr"));
    }

    #[test]
    fn a_host_cidr_is_parsed_and_a_bad_one_refused() {
        let config = TapConfig::from_cidr("t0", "10.99.0.1/24").expect("cidr");
        assert_eq!(config.host_cidr(), "10.99.0.1/24");
        for bad in ["10.99.0.1", "10.99.0/24", "10.99.0.1/33"] {
            assert!(
                matches!(TapConfig::from_cidr("t0", bad), Err(e) if e.contains("is not ADDR/LEN")),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_bridge_port_is_enslaved_instead_of_addressed() {
        assert_eq!(
            setup_lines(&TapConfig::bridge_port("ebbtap1", "ebbbr0")),
            [
                "-n ns tuntap add dev ebbtap1 mode tap",
                "-n ns link set ebbtap1 master ebbbr0",
                "-n ns link set ebbtap1 up",
            ]
        );
    }

    #[test]
    fn without_a_guest_there_is_no_neighbour_entry() {
        let config = TapConfig::new("ebb0", Ipv4Addr::new(10, 99, 0, 1), 24);
        assert_eq!(config.setup_commands("n").len(), 3);
        assert_eq!(config.host_cidr(), "10.99.0.1/24");
    }
}
