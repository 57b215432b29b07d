//! `./ebb run APP --native --net tap`: the guest's virtio-net on a TAP
//! device in a network namespace of its own (QEMU-NOTES: TAP devices and
//! private addresses only inside a namespace we create and delete). The
//! namespace `ebb-APP-PID` holds the TAP device, with the host's side at
//! [`HOST_ADDR`], and QEMU; the guest gets [`GUEST_ADDR`] on its command
//! line (`ip=`, see `ebb_boot_abi::StaticIp`). With `--cores N` the TAP
//! device is `multi_queue` with N queue pairs, one per vCPU. The namespace
//! is deleted when QEMU exits, also after Ctrl-C or a SIGTERM to `./ebb`.

use std::path::Path;

use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};

use crate::native::{self, Settings, TapNic};

/// The TAP device inside the namespace.
pub const TAP: &str = "ebbtap0";
/// The host's side of the link.
pub const HOST_ADDR: &str = "10.98.0.1/24";
/// The guest's address.
pub const GUEST_ADDR: &str = "10.98.0.2";
/// The guest's platform option: its address, the host as the gateway.
pub const GUEST_BOOT_ARG: &str = "ip=10.98.0.2/24,gw=10.98.0.1";
/// The guest NIC's MAC address (a locally administered QEMU one), which
/// the host's permanent neighbour entry names.
pub const GUEST_MAC: &str = "52:54:00:eb:98:02";

/// The namespace's name for `app` run by process `pid`.
pub fn namespace_name(app: &str, pid: u32) -> String {
    format!("ebb-{app}-{pid}")
}

/// The TAP device of namespace `ns` with `queues` queue pairs: the host's
/// address, and a permanent neighbour entry for the guest, so that the
/// first packets do not wait for ARP (BENCH-NOTES: ARP retries add 1 s
/// steps).
pub fn tap_config(queues: u16) -> TapConfig {
    TapConfig::from_cidr(TAP, HOST_ADDR)
        .expect("HOST_ADDR is ADDR/LEN")
        .with_guest(GUEST_ADDR.parse().expect("GUEST_ADDR"), GUEST_MAC)
        .with_queues(queues)
}

/// `settings` for a guest on the namespace's TAP device: QEMU runs inside
/// `ns`, with `queues` queue pairs, and the guest takes [`GUEST_ADDR`].
pub fn tap_settings(settings: &Settings, ns: &str, queues: u16) -> Settings {
    let mut settings = settings.clone();
    settings.tap = Some(TapNic {
        ifname: TAP.to_owned(),
        queues,
        mac: GUEST_MAC.to_owned(),
    });
    settings.namespace = Some(ns.to_owned());
    settings.boot_args.insert(0, GUEST_BOOT_ARG.to_owned());
    settings
}

/// What to tell the user once the namespace exists.
pub fn usage_hint(app: &str, ns: &str, queues: u16) -> String {
    let example = match app {
        "memcached" => format!("ip netns exec {ns} memcached-tool {GUEST_ADDR}:11211 stats"),
        "netpipe" => format!(
            "ip netns exec {ns} python3 -c \"import socket,struct; s=socket.create_connection(('{GUEST_ADDR}',5002)); s.sendall(struct.pack('>I',5)+b'hello'); print(s.recv(99))\""
        ),
        "echo" => format!(
            "ip netns exec {ns} python3 -c \"import socket; s=socket.create_connection(('{GUEST_ADDR}',7007)); s.sendall(b'hi'); print(s.recv(99))\""
        ),
        _ => format!("ip netns exec {ns} bash   # a shell inside the namespace"),
    };
    format!(
        "ebb: {app} boots with address {GUEST_ADDR} on TAP {TAP} ({queues} queue pair{}) in \
         network namespace {ns} (host side {HOST_ADDR}). Reach it from the namespace, e.g.:\n  \
         ip netns exec {ns} ping -c 3 {GUEST_ADDR}\n  {example}\n\
         ebb: Ctrl-C stops it and deletes the namespace.",
        if queues == 1 { "" } else { "s" }
    )
}

/// Sets up the namespace and its TAP device (one queue pair per vCPU),
/// boots `app` natively inside it ([`native::run`]) and deletes the
/// namespace. Returns the application's exit code.
pub fn run(root: &Path, app: &str, settings: &Settings, args: &[String]) -> Result<u8, String> {
    if let Err(why) = ebb_testbed::require(&[ebb_testbed::Need::Root, ebb_testbed::Need::Ip]) {
        return Err(format!(
            "--net tap needs root (it creates a network namespace and a TAP device): \
             run ./ebb as root, or use --net user with --forward ({why})"
        ));
    }
    let queues = u16::try_from(settings.cores)
        .map_err(|_| format!("--cores {} is too many queue pairs", settings.cores))?;
    let ns = namespace_name(app, std::process::id());
    let tap_settings = tap_settings(settings, &ns, queues);
    // Refuse bad combinations (--forward, microvm) before creating anything.
    native::network_args(&tap_settings)?;
    // Dropped on every return: a half-made namespace is deleted too.
    let namespace = NetNamespace::create(&ns)?.announce_deletion("ebb");
    let tap = TapDevice::create(&namespace, &tap_config(queues))?;
    eprintln!("{}", usage_hint(app, &ns, queues));
    let code = native::run(root, app, &tap_settings, args);
    drop(tap);
    drop(namespace);
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_namespace_gets_a_tap_with_one_queue_per_core_and_the_guest_neighbour() {
        let ns = namespace_name("memcached", 42);
        assert_eq!(ns, "ebb-memcached-42");
        let single: Vec<String> = tap_config(1)
            .setup_commands(&ns)
            .iter()
            .map(|line| line.join(" "))
            .collect();
        assert_eq!(
            single,
            [
                "-n ebb-memcached-42 tuntap add dev ebbtap0 mode tap",
                "-n ebb-memcached-42 addr add 10.98.0.1/24 dev ebbtap0",
                "-n ebb-memcached-42 link set ebbtap0 up",
                "-n ebb-memcached-42 neigh replace 10.98.0.2 lladdr 52:54:00:eb:98:02 dev ebbtap0 nud permanent",
            ]
        );
        assert_eq!(
            tap_config(4).setup_commands(&ns)[0].join(" "),
            "-n ebb-memcached-42 tuntap add dev ebbtap0 mode tap multi_queue"
        );
    }

    #[test]
    fn qemu_runs_in_the_namespace_on_the_tap_with_the_guest_address() {
        let base = Settings {
            cores: 4,
            timeout: 60,
            ..Settings::default()
        };
        let settings = tap_settings(&base, "ebb-memcached-42", 4);
        let words = native::shell_words(
            &native::qemu_command(
                &settings,
                Path::new("/img"),
                &native::kernel_cmdline(&settings, None, &[]).expect("cmdline"),
                false,
            )
            .expect("command"),
        );
        assert!(
            words.starts_with(
                "ip netns exec ebb-memcached-42 timeout --foreground 60 qemu-system-x86_64 "
            ),
            "{words}"
        );
        assert!(
            words.contains(
                "-netdev tap,id=net0,ifname=ebbtap0,script=no,downscript=no,vhost=off,queues=4 \
                 -device virtio-net-pci,netdev=net0,disable-legacy=on,mac=52:54:00:eb:98:02,mq=on,vectors=10"
            ),
            "{words}"
        );
        assert!(
            words.contains("cores=4 ip=10.98.0.2/24,gw=10.98.0.1 --"),
            "{words}"
        );
        let one = tap_settings(&Settings::default(), "ns", 1);
        assert_eq!(
            native::network_args(&one).expect("args"),
            [
                "-netdev",
                "tap,id=net0,ifname=ebbtap0,script=no,downscript=no,vhost=off",
                "-device",
                "virtio-net-pci,netdev=net0,disable-legacy=on,mac=52:54:00:eb:98:02",
            ]
        );
        let forwarded = Settings {
            forwards: vec!["11211".to_owned()],
            ..one.clone()
        };
        assert!(
            matches!(native::network_args(&forwarded), Err(e) if e.contains("--forward is for --net user"))
        );
        let microvm = Settings {
            machine: native::Machine::Microvm,
            ..one
        };
        assert!(
            matches!(native::network_args(&microvm), Err(e) if e.contains("--net tap needs --machine q35"))
        );
    }

    #[test]
    fn the_hint_names_the_namespace_and_an_app_specific_client() {
        let hint = usage_hint("memcached", "ebb-memcached-42", 2);
        assert!(
            hint.contains("ip netns exec ebb-memcached-42 memcached-tool 10.98.0.2:11211 stats")
        );
        assert!(hint.contains("2 queue pairs"));
        assert!(usage_hint("hello", "ns", 1).contains("ip netns exec ns bash"));
    }

    #[test]
    fn the_guest_boot_arg_parses_as_the_guest_address() {
        let ip = GUEST_BOOT_ARG
            .strip_prefix("ip=")
            .and_then(ebb_boot_abi::StaticIp::parse)
            .expect("a valid ip=");
        assert_eq!(ip.addr.to_string(), GUEST_ADDR);
        assert_eq!(
            format!("{}/{}", ip.gateway.expect("gw"), ip.prefix_len),
            HOST_ADDR
        );
    }
}
