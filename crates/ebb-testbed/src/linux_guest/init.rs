//! The guest's `/init` (a busybox shell script) and the kernel command line
//! it reads its settings from.
//!
//! The cloud kernel has no `CONFIG_IP_PNP`, so the kernel does not act on
//! `ip=`: `/init` parses it, in the kernel's own format
//! (`Documentation/admin-guide/nfs/nfsroot.rst`:
//! `ip=<client>:<server>:<gateway>:<netmask>:<hostname>:<device>:<autoconf>`).

use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// What `/init` prints on the serial console once the service listens.
pub const READY_MARKER: &str = "EBB-LINUX-GUEST-READY";
/// What `/init` prints before powering off when something failed.
pub const FAILURE_MARKER: &str = "EBB-LINUX-GUEST-FAILED";
/// Printed after a batch ([`GuestService::Batch`]), with its exit status.
pub const BATCH_DONE_MARKER: &str = "EBB-LINUX-GUEST-BATCH-DONE";
/// The port stock memcached listens on inside the guest.
pub const MEMCACHED_PORT: u16 = 11211;
/// The port stock Redis listens on inside the guest: its default.
pub const REDIS_PORT: u16 = 6379;
/// Where the image carries Debian's Redis server (see `image.rs`: the
/// binary of package `redis-tools`, named so that Redis starts as a
/// server).
pub const REDIS_BINARY: &str = "usr/bin/redis-server";
/// The ports of apps/netpipe (ping-pong, sink) inside the guest: its
/// defaults.
pub const NETPIPE_PORTS: [u16; 2] = [5002, 5003];
/// Where the netpipe overlay puts the hosted netpipe binary.
pub const NETPIPE_BINARY: &str = "usr/bin/netpipe";
/// Where the program overlay (`overlay::with_program`) puts its program.
pub const PROGRAM_BINARY: &str = "usr/bin/ebb-program";
/// The shell script that starts it (its arguments and environment).
pub const PROGRAM_SCRIPT: &str = "usr/bin/ebb-program.sh";

/// What the guest serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestService {
    /// Stock memcached (`-t 1`, `-u root`) on [`MEMCACHED_PORT`].
    Memcached(MemcachedSettings),
    /// Stock Redis (Debian's 7.0.15) on [`REDIS_PORT`], in memory only;
    /// see [`RedisSettings`] for its command line and why.
    Redis(RedisSettings),
    /// Ebbflow's netpipe application on its hosted platform (Linux), one
    /// core, on [`NETPIPE_PORTS`]; needs the image's netpipe overlay.
    Netpipe,
    /// A program built here, started by the script of the image's
    /// program overlay ([`PROGRAM_SCRIPT`]); ready once it listens on TCP
    /// `port` (e.g. Ebbflow's hosted echo as a Messenger node).
    Program {
        /// The TCP port whose listener means "ready".
        port: u16,
    },
    /// A batch job: the program overlay's script ([`PROGRAM_SCRIPT`]) runs
    /// once, with a tmpfs on `/tmp`, between [`READY_MARKER`] and
    /// [`BATCH_DONE_MARKER`] on the console; then the guest powers off.
    Batch,
}

impl GuestService {
    /// The guest ports the service listens on; the first is the one whose
    /// listener means "ready".
    pub fn ports(&self) -> Vec<u16> {
        match self {
            GuestService::Memcached(_) => vec![MEMCACHED_PORT],
            GuestService::Redis(_) => vec![REDIS_PORT],
            GuestService::Netpipe => NETPIPE_PORTS.to_vec(),
            GuestService::Program { port } => vec![*port],
            GuestService::Batch => Vec::new(),
        }
    }

    /// The `ebb_service=...` words of the kernel command line.
    fn cmdline_words(&self) -> String {
        match self {
            GuestService::Memcached(m) => format!(
                "ebb_service=memcached ebb_memcached_m={} ebb_memcached_c={}",
                m.memory_mb, m.connections
            ),
            GuestService::Redis(_) => "ebb_service=redis".to_owned(),
            GuestService::Netpipe => "ebb_service=netpipe".to_owned(),
            GuestService::Program { port } => {
                format!("ebb_service=program ebb_program_port={port}")
            }
            GuestService::Batch => "ebb_service=batch".to_owned(),
        }
    }
}

/// The guest's static IPv4 configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestAddress {
    /// The guest's address.
    pub address: Ipv4Addr,
    /// Its netmask.
    pub netmask: Ipv4Addr,
    /// The default route, if any.
    pub gateway: Option<Ipv4Addr>,
}

impl GuestAddress {
    /// QEMU user networking's guest side: 10.0.2.15/24 via 10.0.2.2.
    pub const USER_NETWORKING: GuestAddress = GuestAddress {
        address: Ipv4Addr::new(10, 0, 2, 15),
        netmask: Ipv4Addr::new(255, 255, 255, 0),
        gateway: Some(Ipv4Addr::new(10, 0, 2, 2)),
    };
}

/// Stock memcached's settings; the same `-m` and `-c` as Ebbflow's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemcachedSettings {
    /// `-m`: item memory in MiB.
    pub memory_mb: u32,
    /// `-c`: most simultaneous connections.
    pub connections: u32,
}

impl Default for MemcachedSettings {
    /// memcached's own defaults, which apps/memcached shares.
    fn default() -> Self {
        MemcachedSettings {
            memory_mb: 64,
            connections: 1024,
        }
    }
}

/// Stock Redis's settings: none, Redis's own defaults (`maxclients`
/// 10000, no `maxmemory`), what Ebbflow's native Redis is compared with.
/// A field added here becomes an `ebb_redis_*=` word on the kernel command
/// line and a flag in `/init` (`non_exhaustive`: build it with
/// `RedisSettings::default()`, so that adding one breaks no caller).
///
/// `/init` always starts `redis-server --port 6379 --bind 0.0.0.0
/// --protected-mode no --save '' --appendonly no --daemonize no` in `/tmp`
/// (a tmpfs):
/// - Persistence is off (no RDB save points, no AOF): the benchmark
///   compares in-memory servers, and our native Redis cannot fork, so a
///   BGSAVE would only ever fork on Linux and bill it for work the other
///   side never does.
/// - Protected mode is off and Redis listens on every address: the
///   benchmark's clients come from the host's side of the TAP link (or
///   QEMU's user-networking gateway), never from loopback, and protected
///   mode refuses non-loopback clients when no password is set.
/// - The working directory is where an explicit `SAVE` or `DEBUG RELOAD`
///   would write `dump.rdb`; `/tmp` gets its own tmpfs, so such a file
///   stays in guest memory, apart from the image's files, within tmpfs's
///   limit of half the memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisSettings {}

/// The kernel command line: serial console, power off on panic, the host's
/// TSC rate (see BENCH-NOTES: TSC calibration can hang without it), the
/// address in `ip=` form and the service with its settings.
pub fn kernel_cmdline(net: &GuestAddress, service: &GuestService, tsc_khz: Option<u64>) -> String {
    let mut line = String::from("console=ttyS0 panic=-1 loglevel=4");
    if let Some(khz) = tsc_khz {
        let _ = write!(line, " tsc_early_khz={khz}");
    }
    let gateway = net.gateway.map(|g| g.to_string()).unwrap_or_default();
    let _ = write!(
        line,
        " ip={}::{gateway}:{}::eth0:off {}",
        net.address,
        net.netmask,
        service.cmdline_words()
    );
    line
}

/// `/init`: mount the pseudo file systems, load `modules` in order, bring
/// up the device named in `ip=`, start the service named by `ebb_service=`
/// (memcached with `-t 1`: one worker thread for one vCPU; Redis as
/// [`RedisSettings`] says; netpipe; or the program overlay's script),
/// print [`READY_MARKER`] once it listens, and power off if anything fails
/// or the service exits.
pub fn init_script(modules: &[String]) -> String {
    format!(
        r#"#!/bin/sh
# /init of the Linux comparison guest, generated by ebb-bench
# (crates/ebb-testbed/src/linux_guest/init.rs): stock memcached or Redis on Debian's cloud kernel.
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/sbin /usr/bin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() {{
    echo "{FAILURE_MARKER}: $*"
    poweroff -f
}}
# The value of WORD=VALUE on the kernel command line.
arg() {{
    for word in $(cat /proc/cmdline); do
        case "$word" in "$1"=*) echo "${{word#*=}}" ;; esac
    done
}}
for module in {modules}; do
    insmod "/lib/modules/$module.ko" || fail "insmod $module"
done
if [ "$(arg ebb_service)" = batch ]; then
    mount -t tmpfs tmpfs /tmp || fail "cannot mount a tmpfs on /tmp"
    export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu
    echo "{READY_MARKER}"
    /bin/sh /{program_script}
    echo "{BATCH_DONE_MARKER} $?"
    poweroff -f
fi
# ip=<client>:<server>:<gateway>:<netmask>:<hostname>:<device>:<autoconf>
# (arg splits the command line on IFS, so read it before IFS changes)
ip_spec=$(arg ip)
saved_ifs=$IFS
IFS=:
set -- $ip_spec
IFS=$saved_ifs
client=$1
gateway=$3
netmask=$4
device=${{6:-eth0}}
[ -n "$client" ] || fail "no ip= on the kernel command line"
tries=0
while [ ! -e "/sys/class/net/$device" ]; do
    tries=$((tries + 1))
    [ "$tries" -gt 200 ] && fail "no network device $device"
    sleep 0.05
done
ip link set lo up
ifconfig "$device" "$client" netmask "$netmask" up || fail "cannot configure $device"
[ -n "$gateway" ] && route add default gw "$gateway"
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu
case "$(arg ebb_service)" in
netpipe)
    /{netpipe} --cores 1 --no-pin --listen 0.0.0.0 --port {ping} --sink-port {sink} &
    port_hex={ping_hex:04X}
    ;;
program)
    /bin/sh /{program_script} &
    port_hex=$(printf %04X "$(arg ebb_program_port)")
    ;;
redis)
    # In memory only, reachable from the TAP link (see RedisSettings in init.rs).
    mount -t tmpfs tmpfs /tmp || fail "cannot mount a tmpfs on /tmp"
    cd /tmp || fail "cannot enter /tmp"
    /{redis} --port {redis_port} --bind 0.0.0.0 --protected-mode no \
        --save '' --appendonly no --daemonize no &
    port_hex={redis_hex:04X}
    ;;
*)
    /usr/bin/memcached -t 1 -m "$(arg ebb_memcached_m)" -c "$(arg ebb_memcached_c)" \
        -u root -p {memcached} &
    port_hex={memcached_hex:04X}
    ;;
esac
pid=$!
# Ready once /proc/net/tcp shows 0.0.0.0:PORT in state 0A (LISTEN).
while ! grep -q ":$port_hex 00000000:0000 0A" /proc/net/tcp; do
    kill -0 "$pid" 2>/dev/null || fail "the service did not start"
    sleep 0.05
done
echo "{READY_MARKER}"
wait "$pid"
fail "the service exited ($?)"
"#,
        modules = modules.join(" "),
        netpipe = NETPIPE_BINARY,
        program_script = PROGRAM_SCRIPT,
        ping = NETPIPE_PORTS[0],
        sink = NETPIPE_PORTS[1],
        ping_hex = NETPIPE_PORTS[0],
        memcached = MEMCACHED_PORT,
        memcached_hex = MEMCACHED_PORT,
        redis = REDIS_BINARY,
        redis_port = REDIS_PORT,
        redis_hex = REDIS_PORT,
    )
}

/// `/etc/passwd` with root only: memcached runs as root with `-u root`
/// (Redis runs as root without asking).
pub const PASSWD: &str = "root:x:0:0:root:/:/bin/sh\n";
/// `/etc/group` with root only.
pub const GROUP: &str = "root:x:0:\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_carries_address_and_settings() {
        let line = kernel_cmdline(
            &GuestAddress::USER_NETWORKING,
            &GuestService::Memcached(MemcachedSettings::default()),
            Some(2_600_000),
        );
        assert_eq!(
            line,
            "console=ttyS0 panic=-1 loglevel=4 tsc_early_khz=2600000 \
             ip=10.0.2.15::10.0.2.2:255.255.255.0::eth0:off ebb_service=memcached ebb_memcached_m=64 \
             ebb_memcached_c=1024"
        );
        let no_gateway = GuestAddress {
            gateway: None,
            ..GuestAddress::USER_NETWORKING
        };
        assert!(kernel_cmdline(&no_gateway, &GuestService::Netpipe, None)
            .ends_with(" ip=10.0.2.15:::255.255.255.0::eth0:off ebb_service=netpipe"));
        let program = GuestService::Program { port: 7007 };
        assert!(kernel_cmdline(&no_gateway, &program, None)
            .ends_with(" ebb_service=program ebb_program_port=7007"));
        assert_eq!(program.ports(), [7007]);
        assert!(
            kernel_cmdline(&no_gateway, &GuestService::Batch, None).ends_with(" ebb_service=batch")
        );
        assert!(GuestService::Batch.ports().is_empty());
        let redis = GuestService::Redis(RedisSettings::default());
        assert!(kernel_cmdline(&no_gateway, &redis, None)
            .ends_with(" ip=10.0.2.15:::255.255.255.0::eth0:off ebb_service=redis"));
        assert_eq!(redis.ports(), [REDIS_PORT]);
    }

    #[test]
    fn init_loads_modules_in_order_and_marks_readiness() {
        let script = init_script(&["virtio_ring".into(), "virtio".into(), "virtio_net".into()]);
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(script.contains("for module in virtio_ring virtio virtio_net; do"));
        assert!(script.contains("port_hex=2BCB"), "11211 is 0x2BCB");
        assert!(script.contains("port_hex=138A"), "5002 is 0x138A");
        assert!(script.contains(":$port_hex 00000000:0000 0A"));
        assert!(script.contains("/bin/sh /usr/bin/ebb-program.sh &"));
        assert!(script.contains("-t 1"));
        assert!(script.contains(READY_MARKER) && script.contains(FAILURE_MARKER));
        assert!(script.contains(
            "/bin/sh /usr/bin/ebb-program.sh\n    echo \"EBB-LINUX-GUEST-BATCH-DONE $?\""
        ));
        assert!(script.contains("mount -t tmpfs tmpfs /tmp"));
    }

    #[test]
    fn init_starts_redis_in_memory_only_on_every_address() {
        let script = init_script(&[]);
        let start = script.find("\nredis)\n").expect("a redis branch");
        let branch = &script[start..start + script[start..].find(";;").expect("end of branch")];
        assert!(
            matches!(
                (branch.find("mount -t tmpfs tmpfs /tmp"), branch.find("cd /tmp")),
                (Some(mount), Some(cd)) if mount < cd
            ),
            "the tmpfs is mounted before Redis enters it: {branch}"
        );
        assert!(
            branch.contains(
                "/usr/bin/redis-server --port 6379 --bind 0.0.0.0 --protected-mode no \\\n        \
                 --save '' --appendonly no --daemonize no &"
            ),
            "{branch}"
        );
        assert!(branch.contains("port_hex=18EB"), "6379 is 0x18EB: {branch}");
    }
}
