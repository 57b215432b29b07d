//! Bridges and veth pairs inside a [`NetNamespace`], for topologies with
//! more than one guest or node (a bridge with each guest's TAP device and
//! a veth pair to another namespace). Each is deleted on drop, and with
//! its namespace in any case.

use crate::netns::{ip, NetNamespace};
use crate::tap::MAX_IFNAME;

fn check_ifname(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_IFNAME {
        Err(format!(
            "interface name '{name}' must be 1 to {MAX_IFNAME} bytes"
        ))
    } else {
        Ok(())
    }
}

/// A bridge in a namespace, up; removed on drop.
#[derive(Debug)]
pub struct Bridge {
    namespace: String,
    name: String,
}

impl Bridge {
    /// The `ip` arguments that create bridge `name` in `ns` and set it up.
    pub fn setup_commands(ns: &str, name: &str) -> [Vec<String>; 2] {
        let owned = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect();
        [
            owned(&["-n", ns, "link", "add", "name", name, "type", "bridge"]),
            owned(&["-n", ns, "link", "set", name, "up"]),
        ]
    }

    /// Creates bridge `name` inside `namespace`.
    pub fn create(namespace: &NetNamespace, name: &str) -> Result<Bridge, String> {
        check_ifname(name)?;
        let [add, up] = Bridge::setup_commands(namespace.name(), name);
        ip(&add.iter().map(String::as_str).collect::<Vec<_>>())?;
        let bridge = Bridge {
            namespace: namespace.name().to_owned(),
            name: name.to_owned(),
        };
        ip(&up.iter().map(String::as_str).collect::<Vec<_>>())?;
        Ok(bridge)
    }

    /// Enslaves interface `ifname` (a TAP device, a veth end) of the same
    /// namespace to the bridge.
    pub fn attach(&self, ifname: &str) -> Result<(), String> {
        ip(&[
            "-n",
            &self.namespace,
            "link",
            "set",
            ifname,
            "master",
            &self.name,
        ])
        .map(drop)
    }

    /// The bridge's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = ip(&["-n", &self.namespace, "link", "del", &self.name]);
    }
}

/// A veth pair: one end in `namespace`, the other in `peer_namespace`
/// (or the same one), both up; removed on drop (deleting one end deletes
/// both).
#[derive(Debug)]
pub struct VethPair {
    namespace: String,
    name: String,
}

impl VethPair {
    /// The `ip` arguments that create the pair `name`–`peer` in `ns`, move
    /// `peer` to `peer_ns` and set both up.
    pub fn setup_commands(ns: &str, name: &str, peer_ns: &str, peer: &str) -> Vec<Vec<String>> {
        let owned = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect();
        let mut commands = vec![owned(&[
            "-n", ns, "link", "add", name, "type", "veth", "peer", "name", peer,
        ])];
        if peer_ns != ns {
            commands.push(owned(&["-n", ns, "link", "set", peer, "netns", peer_ns]));
        }
        commands.push(owned(&["-n", ns, "link", "set", name, "up"]));
        commands.push(owned(&["-n", peer_ns, "link", "set", peer, "up"]));
        commands
    }

    /// Creates the pair `name` (in `namespace`) – `peer` (in `peer_namespace`).
    pub fn create(
        namespace: &NetNamespace,
        name: &str,
        peer_namespace: &NetNamespace,
        peer: &str,
    ) -> Result<VethPair, String> {
        check_ifname(name)?;
        check_ifname(peer)?;
        let mut pair = None;
        for command in VethPair::setup_commands(namespace.name(), name, peer_namespace.name(), peer)
        {
            ip(&command.iter().map(String::as_str).collect::<Vec<_>>())?;
            pair.get_or_insert_with(|| VethPair {
                namespace: namespace.name().to_owned(),
                name: name.to_owned(),
            });
        }
        pair.ok_or_else(|| "no command created the veth pair".to_owned())
    }

    /// The end in the first namespace.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        let _ = ip(&["-n", &self.namespace, "link", "del", &self.name]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bridge_is_added_and_set_up() {
        let lines = Bridge::setup_commands("ns", "br0").map(|c| c.join(" "));
        assert_eq!(
            lines,
            [
                "-n ns link add name br0 type bridge",
                "-n ns link set br0 up"
            ]
        );
    }

    #[test]
    fn a_veth_peer_moves_to_its_namespace_before_going_up() {
        let lines: Vec<String> = VethPair::setup_commands("a", "v0", "b", "v1")
            .into_iter()
            .map(|c| c.join(" "))
            .collect();
        assert_eq!(
            lines,
            [
                "-n a link add v0 type veth peer name v1",
                "-n a link set v1 netns b",
                "-n a link set v0 up",
                "-n b link set v1 up",
            ]
        );
        assert_eq!(VethPair::setup_commands("a", "v0", "a", "v1").len(), 3);
    }
}
