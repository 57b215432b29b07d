//! A node's QEMU command line: the one `./ebb run APP --native --net tap`
//! boots with (`ebb_testbed::qemu::command`), on the node's TAP device inside
//! the cluster's namespace, with its static address (`ip=`, the frontend
//! as the gateway) and the boot contract's words
//! ([`crate::BootContract`]) ahead of the platform options.

use std::process::Command;

use ebb_testbed::qemu::command::{self as native, Settings, TapNic};
use ebb_testbed::qemu::host_wall_word;

use crate::launcher::LaunchSpec;
use crate::qemu::QemuCommandLine;

/// Builds nodes' QEMU commands from the settings every node shares.
pub struct NativeCommandLine {
    /// Machine, accelerator and boot options (cores, memory and the
    /// network come from each node's spec).
    pub settings: Settings,
    /// Whether to use KVM (else TCG).
    pub kvm: bool,
    /// The host's TSC rate, for the guests' clocks.
    pub tsc_khz: Option<u64>,
}

impl NativeCommandLine {
    /// Nodes booted with `settings` (cores, memory and the network come
    /// from each node's spec), KVM where it is usable, the host's TSC rate.
    pub fn for_this_host(settings: Settings) -> NativeCommandLine {
        NativeCommandLine {
            settings,
            kvm: ebb_testbed::qemu::kvm_usable(),
            tsc_khz: ebb_testbed::qemu::measure_tsc_khz(),
        }
    }

    /// The settings of node `spec`.
    pub fn node_settings(&self, spec: &LaunchSpec) -> Settings {
        let mut settings = self.settings.clone();
        settings.cores = spec.node.cores;
        settings.mem = spec.node.memory.clone();
        settings.timeout = 0;
        settings.tap = Some(TapNic {
            ifname: spec.link.tap.clone(),
            queues: 1,
            mac: spec.link.mac.clone(),
        });
        settings.namespace = Some(spec.namespace.clone());
        let contract = std::iter::once(spec.link.boot_arg()).chain(spec.boot_args.iter().cloned());
        settings.boot_args.splice(0..0, contract);
        settings
    }
}

impl QemuCommandLine for NativeCommandLine {
    fn command(&self, spec: &LaunchSpec) -> Result<Command, String> {
        let settings = self.node_settings(spec);
        let cmdline = native::kernel_cmdline(&settings, self.tsc_khz, &spec.node.args)?;
        let cmdline = format!("{} {cmdline}", host_wall_word());
        native::qemu_command(&settings, &spec.node.image, &cmdline, self.kvm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeSpec;
    use ebb_core::NodeId;
    use ebb_testbed::cluster_net::{AddressPlan, NodeLink};

    #[test]
    fn a_node_boots_in_the_namespace_on_its_tap_with_its_address() {
        let plan = AddressPlan::default_plan();
        let spec = LaunchSpec {
            id: NodeId(2),
            node: NodeSpec {
                image: "/img".into(),
                cores: 2,
                memory: "256M".to_owned(),
                args: vec!["--port".to_owned(), "7".to_owned()],
            },
            link: NodeLink {
                id: 2,
                tap: "ebbtap2".to_owned(),
                address: plan.node(2).expect("address"),
                prefix_len: AddressPlan::PREFIX_LEN,
                frontend: plan.frontend(),
                mac: AddressPlan::mac(2),
            },
            namespace: "ebb-1-cluster-0".to_owned(),
            console_log: "/logs/node-2.log".into(),
            runtime_dir: "/run/x".into(),
            boot_args: vec!["node=2".to_owned(), "frontend=10.96.0.1:7000".to_owned()],
        };
        let line = NativeCommandLine {
            settings: Settings::default(),
            kvm: false,
            tsc_khz: Some(2_600_000),
        };
        let words = ebb_testbed::qemu::shell_words(&line.command(&spec).expect("command"));
        assert!(
            words.starts_with("ip netns exec ebb-1-cluster-0 qemu-system-x86_64 -machine q35"),
            "{words}"
        );
        assert!(words.contains("-smp 2 -m 256M"), "{words}");
        assert!(
            words.contains(
                "-netdev tap,id=net0,ifname=ebbtap2,script=no,downscript=no,vhost=off \
                 -device virtio-net-pci,netdev=net0,disable-legacy=on,mac=52:54:00:eb:00:02"
            ),
            "{words}"
        );
        assert!(
            words.contains(
                "cores=2 ip=10.96.0.3/24,gw=10.96.0.1 node=2 frontend=10.96.0.1:7000 -- --port 7'"
            ),
            "{words}"
        );
        assert!(!words.contains("timeout"), "{words}");
    }
}
