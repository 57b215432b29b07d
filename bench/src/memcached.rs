//! Memcached servers under load, for the benchmarks that set Ebbflow's
//! memcached against stock memcached 1.6 (`./ebb bench memcached` on
//! loopback, `./ebb bench tcp` on TAP in a namespace).
//!
//! A [`Server`] is one of the two, started with the same `-t 1 -m 64 -c
//! 1024` (another `-m` if [`Launch::memory_mib`] says so) and pinned to one CPU, optionally inside a [`NetNamespace`] (then
//! `ip netns exec` becomes the server: it execs, so the child's process id
//! is the server's). [`Server::measure`] runs `ebb-loadgen` against it —
//! inside the namespace when the server is in one — and divides the
//! server's CPU time over the run (all its threads' on-CPU time from
//! `/proc/PID/task/*/schedstat`) by the replies. It also gives this
//! process's own CPU time over the run (the generator's threads, from
//! `getrusage`), so that a benchmark can also compare server + client.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use ebb_loadgen::{Config, ProtocolKind, Summary};

use crate::report::{median, workspace_root};
use ebb_testbed::need::is_root;
use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::TapConfig;

/// Debian's memcached.
pub const STOCK: &str = "/usr/bin/memcached";

/// Which memcached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Debian's memcached 1.6 on the kernel's TCP.
    Stock,
    /// Ebbflow's (`apps/memcached`).
    Ours,
}

impl Which {
    /// `stock` or `ours`.
    pub fn name(self) -> &'static str {
        match self {
            Which::Stock => "stock",
            Which::Ours => "ours",
        }
    }
}

/// How long each measurement runs and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Repetitions of each measurement (medians are taken over them).
    pub runs: usize,
    /// The measured window.
    pub window: Duration,
    /// Warm-up before it.
    pub warmup: Duration,
}

/// How to start a [`Server`].
#[derive(Clone, Debug)]
pub struct Launch<'ns> {
    /// Which server.
    pub which: Which,
    /// The CPU it is pinned to.
    pub cpu: usize,
    /// The address it listens on (`-l`).
    pub listen: IpAddr,
    /// The address clients connect to (the listening one, unless it is
    /// unspecified or the server sits behind a TAP device).
    pub connect: SocketAddr,
    /// The namespace to run it in; `None`: this process's.
    pub namespace: Option<&'ns NetNamespace>,
    /// Options before the common ones (e.g. `--tap ...` for ours).
    pub extra: Vec<String>,
    /// `-m`, in MiB (64 unless a benchmark needs more).
    pub memory_mib: usize,
    /// How long it may take until it accepts connections.
    pub ready_within: Duration,
}

impl<'ns> Launch<'ns> {
    /// `which` on 127.0.0.1 at a free port of this namespace, pinned to
    /// `cpu`.
    pub fn loopback(which: Which, cpu: usize) -> Self {
        let listen = IpAddr::from([127, 0, 0, 1]);
        Launch {
            which,
            cpu,
            listen,
            connect: SocketAddr::new(listen, free_port()),
            namespace: None,
            extra: Vec::new(),
            memory_mib: 64,
            ready_within: Duration::from_secs(10),
        }
    }

    /// `which` inside `namespace`, across the link `tap` describes (a TAP
    /// device created in it): stock on the kernel's TCP at the kernel's
    /// side (`tap.host`; the kernel reaches its own address over
    /// loopback), ours on the user-space stack (`--tap`) at `tap.guest`
    /// with `tap.guest_mac`; port 11211, pinned to `cpu`.
    pub fn on_tap(which: Which, cpu: usize, namespace: &'ns NetNamespace, tap: &TapConfig) -> Self {
        let (guest, guest_mac) = tap
            .guest
            .clone()
            .expect("a TapConfig with the guest's address and MAC");
        let (listen, connect, extra) = match which {
            Which::Stock => (IpAddr::V4(tap.host), tap.host, Vec::new()),
            Which::Ours => (
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                guest,
                vec![
                    "--tap".to_owned(),
                    tap.ifname.clone(),
                    "--tap-ip".to_owned(),
                    format!("{guest}/{}", tap.prefix_len),
                    "--tap-mac".to_owned(),
                    guest_mac,
                ],
            ),
        };
        Launch {
            which,
            cpu,
            listen,
            connect: SocketAddr::new(IpAddr::V4(connect), 11211),
            namespace: Some(namespace),
            extra,
            memory_mib: 64,
            // Ours attaches to the TAP device and configures its address
            // first.
            ready_within: Duration::from_secs(20),
        }
    }

    /// The server's command line.
    pub fn command(&self) -> Command {
        let cpu = self.cpu.to_string();
        let mut words: Vec<String> = Vec::new();
        if let Some(namespace) = self.namespace {
            words.extend(["ip", "netns", "exec", namespace.name()].map(String::from));
        }
        match self.which {
            Which::Stock => {
                words.extend(["taskset", "-c", &cpu, STOCK, "-U", "0"].map(String::from));
                if is_root() {
                    // memcached refuses to run as root without naming a user.
                    words.extend(["-u", "root"].map(String::from));
                }
            }
            Which::Ours => {
                words.push(ours_binary().to_string_lossy().into_owned());
                words.extend(["--cpus".to_owned(), cpu]);
            }
        }
        words.extend(self.extra.iter().cloned());
        let port = self.connect.port().to_string();
        let listen = self.listen.to_string();
        let memory = self.memory_mib.to_string();
        words.extend(
            [
                "-p", &port, "-l", &listen, "-t", "1", "-m", &memory, "-c", "1024",
            ]
            .map(String::from),
        );
        let mut command = Command::new(&words[0]);
        command.args(&words[1..]);
        command
    }
}

/// A running memcached; killed on drop.
pub struct Server<'ns> {
    child: Child,
    which: Which,
    addr: SocketAddr,
    namespace: Option<&'ns NetNamespace>,
}

impl Drop for Server<'_> {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl<'ns> Server<'ns> {
    /// Starts the server and waits until it accepts a connection.
    pub fn start(launch: &Launch<'ns>) -> Result<Self, String> {
        let mut command = launch.command();
        command.stdin(Stdio::null()).stdout(Stdio::null());
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {} memcached: {e}", launch.which.name()))?;
        let mut server = Server {
            child,
            which: launch.which,
            addr: launch.connect,
            namespace: launch.namespace,
        };
        let deadline = Instant::now() + launch.ready_within;
        let addr = server.addr;
        loop {
            let probe = move || TcpStream::connect_timeout(&addr, Duration::from_millis(200));
            if server.inside(probe)?.is_ok() {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "{} memcached exited ({status}) before listening at {addr}",
                    launch.which.name()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} memcached did not listen at {addr} within {} s",
                    launch.which.name(),
                    launch.ready_within.as_secs()
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Which server this is.
    pub fn which(&self) -> Which {
        self.which
    }

    /// Where clients reach it.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Runs `work` in the server's network namespace.
    fn inside<R: Send>(&self, work: impl FnOnce() -> R + Send) -> Result<R, String> {
        match self.namespace {
            Some(namespace) => namespace.run_inside(work),
            None => Ok(work()),
        }
    }

    /// A load against this server: the ETC workload in `protocol`, one
    /// generator thread pinned to `generator_cpu`, closed loop with 4
    /// connections × depth 4 (mutilate's c4 d4; set `rate` and a deeper
    /// `depth` for open loop), `plan`'s window and warm-up.
    pub fn load(&self, protocol: ProtocolKind, plan: &Plan, generator_cpu: usize) -> Config {
        let mut cfg = Config::new(self.addr.to_string()).etc();
        cfg.protocol = protocol;
        cfg.cpus = vec![generator_cpu];
        cfg.threads = 1;
        cfg.connections = 4;
        cfg.depth = 4;
        cfg.duration = plan.window;
        cfg.warmup = plan.warmup;
        cfg.drain = Duration::from_millis(500);
        cfg
    }

    /// Runs the load generator with `cfg` (inside the namespace if any).
    pub fn run_load(&self, cfg: &Config) -> Result<Summary, String> {
        self.inside(|| ebb_loadgen::run(cfg).map_err(|e| e.to_string()))?
    }

    /// Sets every key of the workload once, so that gets hit.
    pub fn preload(&self, protocol: ProtocolKind, generator_cpu: usize) -> Result<(), String> {
        let plan = Plan {
            runs: 1,
            window: Duration::from_millis(200),
            warmup: Duration::ZERO,
        };
        let mut cfg = self.load(protocol, &plan, generator_cpu);
        cfg.preload = true;
        self.run_load(&cfg).map(|_| ())
    }

    /// One measured run of `cfg`; fails on error replies.
    pub fn measure(&self, cfg: &Config) -> Result<Measured, String> {
        // Read outside the CPU window: `ip` is a child, not our CPU time.
        let retrans_before = self.kernel_retransmits();
        let server_before = cpu_ns(self.pid());
        let sleeps_before = voluntary_switches(self.pid());
        let own_before = own_cpu_ns();
        let summary = self.run_load(cfg)?;
        let server = cpu_ns(self.pid()).saturating_sub(server_before);
        let sleeps = voluntary_switches(self.pid()).saturating_sub(sleeps_before);
        let generator = own_cpu_ns().saturating_sub(own_before);
        let kernel_retransmits = retrans_before
            .zip(self.kernel_retransmits())
            .map(|(before, after)| after.saturating_sub(before));
        if summary.errors_total > 0 {
            return Err(format!(
                "{} error replies from {} memcached",
                summary.errors_total,
                self.which.name()
            ));
        }
        let replies = summary.replies_total.max(1) as f64;
        Ok(Measured {
            server_us_per_request: server as f64 / 1e3 / replies,
            generator_us_per_request: generator as f64 / 1e3 / replies,
            server_sleeps_per_request: sleeps as f64 / replies,
            kernel_retransmits,
            summary,
        })
    }

    /// The kernel's count of retransmitted TCP segments in the server's
    /// namespace (`RetransSegs` of `/proc/net/snmp`); `None` outside a
    /// namespace of our own, where other traffic would be counted too.
    fn kernel_retransmits(&self) -> Option<u64> {
        let snmp = self.namespace?.exec(&["cat", "/proc/net/snmp"]).ok()?;
        snmp_tcp_field(&snmp, "RetransSegs")
    }
}

/// Field `name` of the `Tcp:` lines (a header line, then values) of a
/// `/proc/net/snmp` text.
fn snmp_tcp_field(snmp: &str, name: &str) -> Option<u64> {
    let mut lines = snmp.lines().filter(|line| line.starts_with("Tcp:"));
    let (header, values) = (lines.next()?, lines.next()?);
    let index = header.split_whitespace().position(|field| field == name)?;
    values.split_whitespace().nth(index)?.parse().ok()
}

/// What [`Server::measure`] found.
#[derive(Clone, Debug)]
pub struct Measured {
    /// The generator's report.
    pub summary: Summary,
    /// The server's CPU time per reply (µs), over the whole run.
    pub server_us_per_request: f64,
    /// This process's CPU time per reply (µs): the generator's threads.
    pub generator_us_per_request: f64,
    /// The server's voluntary context switches (its threads going to
    /// sleep) per reply: what a sleep-and-wake costs is most of the
    /// server's CPU at low load.
    pub server_sleeps_per_request: f64,
    /// TCP segments the kernel retransmitted during the run, when the
    /// server runs in a namespace of our own (for ours on TAP: the load
    /// generator's segments that our stack did not get, or got late).
    pub kernel_retransmits: Option<u64>,
}

/// What [`closed_loop_max`] found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClosedLoop {
    /// The median throughput of the runs (ops/s).
    pub median_qps: f64,
    /// The median p99 of the runs (µs).
    pub median_p99_us: f64,
    /// The highest throughput of the runs (ops/s): on a shared machine
    /// interference only ever lowers it.
    pub best_qps: f64,
    /// The p99 of that run (µs).
    pub best_p99_us: f64,
    /// TCP segments the kernel retransmitted over all runs (only counted
    /// in a namespace of our own).
    pub kernel_retransmits: Option<u64>,
}

/// `plan.runs` closed-loop runs (c4 d4) against `server`: its maximum
/// throughput as the generator sees it, and the p99 latency there.
pub fn closed_loop_max(
    server: &Server<'_>,
    protocol: ProtocolKind,
    plan: &Plan,
    generator_cpu: usize,
) -> Result<ClosedLoop, String> {
    let (mut maxima, mut p99s) = (Vec::new(), Vec::new());
    let (mut best_qps, mut best_p99_us) = (0.0, f64::NAN);
    let mut kernel_retransmits = Some(0);
    for run in 1..=plan.runs {
        let measured = server.measure(&server.load(protocol, plan, generator_cpu))?;
        let summary = &measured.summary;
        let retransmitted = measured
            .kernel_retransmits
            .map_or(String::new(), |n| format!(", kernel retransmits {n}"));
        println!(
            "  closed loop run {run}/{}, {:5}: {:.0} ops/s, p99 {:.0} us, server {:.2} us CPU/request{retransmitted}",
            plan.runs,
            server.which().name(),
            summary.achieved_qps,
            summary.p99_us,
            measured.server_us_per_request,
        );
        if summary.achieved_qps > best_qps {
            best_qps = summary.achieved_qps;
            best_p99_us = summary.p99_us;
        }
        maxima.push(summary.achieved_qps);
        p99s.push(summary.p99_us);
        kernel_retransmits = kernel_retransmits
            .zip(measured.kernel_retransmits)
            .map(|(sum, more)| sum + more);
    }
    Ok(ClosedLoop {
        median_qps: median(&mut maxima),
        median_p99_us: median(&mut p99s),
        best_qps,
        best_p99_us,
        kernel_retransmits,
    })
}

/// The medians at one offered load, per server (in the order given to
/// [`matched_loads`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MatchedLoad {
    /// The load as a percentage of the reference maximum.
    pub percent: u32,
    /// The offered rate (ops/s).
    pub rate: f64,
    /// Server CPU per request (µs).
    pub server_us: [f64; 2],
    /// Generator CPU per request (µs).
    pub generator_us: [f64; 2],
    /// p99 latency (µs).
    pub p99_us: [f64; 2],
    /// Achieved throughput (ops/s).
    pub achieved: [f64; 2],
    /// TCP segments the kernel retransmitted over all runs (only counted
    /// in a namespace of our own).
    pub kernel_retransmits: [Option<u64>; 2],
}

/// Open loop (depth 64, Poisson arrivals) at each of `percents` of
/// `max` against both `servers`, alternating, `plan.runs` times each;
/// prints a progress line per run and returns the medians per load.
pub fn matched_loads(
    servers: [&Server<'_>; 2],
    max: f64,
    percents: &[u32],
    protocol: ProtocolKind,
    plan: &Plan,
    generator_cpu: usize,
) -> Result<Vec<MatchedLoad>, String> {
    let mut loads = Vec::new();
    for &percent in percents {
        let rate = max * f64::from(percent) / 100.0;
        let mut samples: [[Vec<f64>; 4]; 2] = Default::default();
        let mut retransmits: [Option<u64>; 2] = [Some(0); 2];
        for _ in 0..plan.runs {
            for (index, server) in servers.iter().enumerate() {
                let mut cfg = server.load(protocol, plan, generator_cpu);
                cfg.rate = Some(rate);
                cfg.depth = 64;
                let measured = server.measure(&cfg)?;
                let summary = &measured.summary;
                let retransmitted = measured
                    .kernel_retransmits
                    .map_or(String::new(), |n| format!(", kernel retransmits {n}"));
                println!(
                    "  {percent:>3}% ({rate:.0} ops/s), {:5}: achieved {:.0}/{:.0} ops/s, p99 {:.0} us, server {:.2} us CPU/request ({:.3} sleeps), generator {:.2}{retransmitted}",
                    server.which().name(),
                    summary.achieved_qps,
                    summary.offered_qps,
                    summary.p99_us,
                    measured.server_us_per_request,
                    measured.server_sleeps_per_request,
                    measured.generator_us_per_request,
                );
                let s = &mut samples[index];
                s[0].push(measured.server_us_per_request);
                s[1].push(measured.generator_us_per_request);
                s[2].push(summary.p99_us);
                s[3].push(summary.achieved_qps);
                retransmits[index] = retransmits[index]
                    .zip(measured.kernel_retransmits)
                    .map(|(sum, more)| sum + more);
            }
        }
        let [a, b] = &mut samples;
        let mut pair = |i: usize| [median(&mut a[i]), median(&mut b[i])];
        loads.push(MatchedLoad {
            percent,
            rate,
            server_us: pair(0),
            generator_us: pair(1),
            p99_us: pair(2),
            achieved: pair(3),
            kernel_retransmits: retransmits,
        });
    }
    Ok(loads)
}

/// A port free on 127.0.0.1 now (0 if there is none).
pub fn free_port() -> u16 {
    ebb_testbed::free_port().unwrap_or(0)
}

/// Our memcached's release binary.
pub fn ours_binary() -> PathBuf {
    workspace_root().join("target/release/memcached")
}

/// Builds our memcached (release).
pub fn build_ours() -> Result<(), String> {
    let status = Command::new("cargo")
        .args(["build", "--release", "--quiet", "-p", "memcached"])
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err("building apps/memcached failed".to_owned())
    }
}

/// The sum over every thread of `pid` of what `read` finds in the
/// thread's `/proc/PID/task/TID/FILE` (0 if the process is gone).
fn sum_over_threads(pid: u32, file: &str, read: impl Fn(&str) -> Option<u64>) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join(file)).ok())
        .filter_map(|text| read(&text))
        .sum()
}

/// On-CPU nanoseconds of every thread of `pid`.
pub fn cpu_ns(pid: u32) -> u64 {
    sum_over_threads(pid, "schedstat", |text| {
        text.split_whitespace()
            .next()
            .and_then(|ns| ns.parse().ok())
    })
}

/// Voluntary context switches of every thread of `pid` (each one a
/// thread that blocked: `voluntary_ctxt_switches` in
/// `/proc/PID/task/TID/status`).
pub fn voluntary_switches(pid: u32) -> u64 {
    sum_over_threads(pid, "status", |status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|count| count.trim().parse().ok())
    })
}

/// User + system CPU nanoseconds of this process, threads that ended
/// included (the generator's threads end with each run).
pub fn own_cpu_ns() -> u64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage(2) writes one rusage into the valid, owned `usage`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    let ns = |tv: libc::timeval| {
        u64::try_from(tv.tv_sec).unwrap_or(0) * 1_000_000_000
            + u64::try_from(tv.tv_usec).unwrap_or(0) * 1_000
    };
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(command: &Command) -> Vec<String> {
        std::iter::once(command.get_program())
            .chain(command.get_args())
            .map(|w| w.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn both_servers_get_the_same_settings() {
        let mut stock = Launch::loopback(Which::Stock, 1);
        stock.connect = "127.0.0.1:4242".parse().expect("addr");
        let stock = words(&stock.command());
        assert_eq!(stock[..6], ["taskset", "-c", "1", STOCK, "-U", "0"]);
        let mut ours = Launch::loopback(Which::Ours, 1);
        ours.connect = "127.0.0.1:4242".parse().expect("addr");
        ours.extra = vec!["--tap".into(), "t0".into()];
        let ours = words(&ours.command());
        assert!(ours[0].ends_with("target/release/memcached"), "{ours:?}");
        assert_eq!(ours[1..5], ["--cpus", "1", "--tap", "t0"]);
        let common = [
            "-p",
            "4242",
            "-l",
            "127.0.0.1",
            "-t",
            "1",
            "-m",
            "64",
            "-c",
            "1024",
        ];
        assert_eq!(stock[stock.len() - 10..], common);
        assert_eq!(ours[ours.len() - 10..], common);
    }

    #[test]
    fn snmp_fields_are_read_by_name() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin ActiveOpens RetransSegs InErrs\n\
                    Tcp: 1 200 14964 2580 0\n\
                    Udp: InDatagrams\nUdp: 5\n";
        assert_eq!(snmp_tcp_field(snmp, "RetransSegs"), Some(2580));
        assert_eq!(snmp_tcp_field(snmp, "InErrs"), Some(0));
        assert_eq!(snmp_tcp_field(snmp, "Nothing"), None);
        assert_eq!(snmp_tcp_field("Tcp: RetransSegs\n", "RetransSegs"), None);
    }

    #[test]
    fn own_cpu_time_grows_with_work() {
        let before = own_cpu_ns();
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(own_cpu_ns() > before);
        assert!(cpu_ns(std::process::id()) > 0);
    }

    #[test]
    fn a_thread_that_sleeps_counts_a_voluntary_switch() {
        let before = voluntary_switches(std::process::id());
        std::thread::sleep(Duration::from_millis(2));
        assert!(voluntary_switches(std::process::id()) > before);
        assert_eq!(voluntary_switches(u32::MAX), 0);
    }
}
