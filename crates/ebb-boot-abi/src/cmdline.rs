//! The kernel command line the launcher passes (`-append`).
//!
//! Words before a lone `--` are platform options `key=value`
//! ([`PlatformOptions`]); words after it are the application's arguments.
//! Words are separated by whitespace; an application argument that is
//! empty or holds whitespace is one percent-encoded word ([`crate::app_args`]).

use core::net::Ipv4Addr;

use crate::node_contract::{NodeContract, NodeContractError, NodeWords};

/// A deliberate fault for testing the exception path (`crash=KIND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// A load from address 0 (page 0 is never mapped): a page fault.
    NullLoad,
    /// A store just past the end of a virtual region, into its guard page.
    GuardPage,
    /// Unbounded recursion until the stack's guard page.
    StackOverflow,
    /// Unbounded recursion on core 0's NMI interrupt stack, until its
    /// guard page.
    IstOverflow,
    /// `ud2`: an invalid-opcode exception.
    InvalidOpcode,
    /// `int3`: a breakpoint exception.
    Breakpoint,
    /// A Rust panic.
    Panic,
}

impl Crash {
    /// Parses the value of `crash=`.
    pub fn parse(value: &str) -> Option<Crash> {
        Some(match value {
            "null" | "page-fault" => Crash::NullLoad,
            "guard-page" => Crash::GuardPage,
            "stack-overflow" => Crash::StackOverflow,
            "ist-overflow" => Crash::IstOverflow,
            "ud2" | "invalid-opcode" => Crash::InvalidOpcode,
            "int3" | "breakpoint" => Crash::Breakpoint,
            "panic" => Crash::Panic,
            _ => return None,
        })
    }
}

/// How much the platform's serial logger prints (`log=LEVEL`): each level
/// includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Nothing (`log=off`).
    Off,
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// Also what the platform says in normal operation (the default).
    Info,
    /// Also the boot summary and device listing (`verbose` means this).
    Debug,
    /// Everything.
    Trace,
}

impl LogLevel {
    /// Parses the value of `log=` (case-insensitive).
    pub fn parse(value: &str) -> Option<LogLevel> {
        const NAMES: [(&str, LogLevel); 7] = [
            ("off", LogLevel::Off),
            ("error", LogLevel::Error),
            ("warn", LogLevel::Warn),
            ("warning", LogLevel::Warn),
            ("info", LogLevel::Info),
            ("debug", LogLevel::Debug),
            ("trace", LogLevel::Trace),
        ];
        NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(value))
            .map(|&(_, level)| level)
    }
}

/// The machine the launcher chose (`machine=`), which says where the PCI
/// configuration window is until ACPI (MCFG) is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Machine {
    /// QEMU's q35: PCIe with ECAM at [`Q35_ECAM`].
    Q35,
    /// QEMU's microvm: no PCI.
    Microvm,
    /// Not said: map no PCI window.
    Unknown,
}

/// The q35 ECAM window (MCFG): base and length (256 buses).
pub const Q35_ECAM: (u64, u64) = (0xb000_0000, 0x1000_0000);

/// Platform options from the kernel command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlatformOptions {
    /// `tsc_khz=N`: the TSC frequency the launcher measured, in kHz.
    pub tsc_khz: Option<u64>,
    /// `cores=N`: how many cores the node should run.
    pub cores: usize,
    /// `machine=q35|microvm`.
    pub machine: Machine,
    /// `crash=KIND`: fault on purpose as the first event (tests).
    pub crash: Option<Crash>,
    /// `verbose`: print what the platform found at boot (the logger's
    /// debug level, unless `log=` says otherwise).
    pub verbose: bool,
    /// `log=off|error|warn|info|debug|trace`: the serial logger's level.
    pub log: Option<LogLevel>,
    /// `net=[poll-|irq-]static|dhcp`: how the virtio-net stack gets its
    /// address (QEMU user networking's 10.0.2.15/24 with gateway
    /// 10.0.2.2, or DHCP), and how the device is driven: adaptive polling
    /// by default, always polled (`poll-`) or always on MSI-X interrupts
    /// (`irq-`).
    pub net: NetMode,
    /// `poll_above=PPS`: adaptive polling polls above this packet rate
    /// (default: see `virtio::adaptive::Thresholds`, per accelerator).
    pub poll_above: Option<u64>,
    /// `poll_below=PPS`: and goes back to interrupts below this one (which
    /// must be lower).
    pub poll_below: Option<u64>,
    /// `virtio_tx_queue=N`: at most N transmit queue entries (a power of
    /// two, at least 2; tests fill small rings on purpose).
    pub virtio_tx_queue: Option<u16>,
    /// `virtio_reset_after=N`: reset and re-initialise the virtio-net
    /// device once, after it received N frames (tests the reset path).
    pub virtio_reset_after: Option<u64>,
    /// `wall=UNIX_SECONDS[.FRACTION]`: the host's wall-clock time at
    /// launch, in nanoseconds since the Unix epoch (wins over the CMOS
    /// RTC, which counts whole seconds); `wall=rtc` forgets an earlier one.
    pub wall_ns: Option<u64>,
    /// `ip=ADDR/PREFIX[,gw=GATEWAY]`: the static address of the virtio-net
    /// stack instead of QEMU user networking's 10.0.2.15/24 (e.g. on a TAP
    /// device, `./ebb run APP --native --net tap`). Ignored with
    /// `net=dhcp`.
    pub ip: Option<StaticIp>,
    /// `node= frontend= ebb_ids= messenger_port=`: the node's place in a
    /// distributed application (all four or none; see
    /// [`crate::node_contract`]). An error when they are given wrong,
    /// which the platform reports and refuses to run with.
    pub node: Result<Option<NodeContract>, NodeContractError>,
}

/// How a virtio-net device is driven (`net=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetMode {
    /// Ask QEMU's DHCP server instead of the static address.
    pub dhcp: bool,
    /// Poll the queues from an idle handler instead of taking interrupts.
    pub poll: bool,
    /// Take interrupts always (no adaptive switch to polling).
    pub irq: bool,
}

/// A static IPv4 configuration, from `ip=ADDR/PREFIX[,gw=GATEWAY]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticIp {
    /// The guest's address.
    pub addr: Ipv4Addr,
    /// The subnet's prefix length (0..=32).
    pub prefix_len: u8,
    /// The default gateway, if any.
    pub gateway: Option<Ipv4Addr>,
}

impl StaticIp {
    /// Parses `ADDR/PREFIX[,gw=GATEWAY]` (a prefix of 1 to 32; an
    /// unspecified, broadcast or multicast address is refused, and so is
    /// a gateway outside the subnet, which could never be reached).
    pub fn parse(value: &str) -> Option<StaticIp> {
        let (address, gateway) = match value.split_once(',') {
            Some((address, rest)) => (address, Some(rest.strip_prefix("gw=")?)),
            None => (value, None),
        };
        let (addr, prefix) = address.split_once('/')?;
        let addr: Ipv4Addr = addr.parse().ok()?;
        let prefix_len: u8 = prefix.parse().ok().filter(|p| (1..=32).contains(p))?;
        let usable = |a: Ipv4Addr| !(a.is_unspecified() || a.is_broadcast() || a.is_multicast());
        if !usable(addr) {
            return None;
        }
        let gateway = match gateway {
            Some(text) => {
                let gateway: Ipv4Addr = text.parse().ok()?;
                let mask = u32::MAX << (32 - u32::from(prefix_len));
                let same_subnet = u32::from(gateway) & mask == u32::from(addr) & mask;
                if !usable(gateway) || gateway == addr || !same_subnet {
                    return None;
                }
                Some(gateway)
            }
            None => None,
        };
        Some(StaticIp {
            addr,
            prefix_len,
            gateway,
        })
    }
}

impl NetMode {
    fn parse(value: &str) -> Option<NetMode> {
        let (poll, irq, rest) = if let Some(rest) = value.strip_prefix("poll-") {
            (true, false, rest)
        } else if let Some(rest) = value.strip_prefix("irq-") {
            (false, true, rest)
        } else {
            (false, false, value)
        };
        let dhcp = match rest {
            "static" => false,
            "dhcp" => true,
            _ => return None,
        };
        Some(NetMode { dhcp, poll, irq })
    }
}

impl Default for PlatformOptions {
    fn default() -> Self {
        PlatformOptions {
            tsc_khz: None,
            cores: 1,
            machine: Machine::Unknown,
            crash: None,
            verbose: false,
            log: None,
            net: NetMode::default(),
            poll_above: None,
            poll_below: None,
            virtio_tx_queue: None,
            virtio_reset_after: None,
            wall_ns: None,
            ip: None,
            node: Ok(None),
        }
    }
}

impl PlatformOptions {
    /// The logger's level: `log=` if given, else debug with `verbose`,
    /// else info.
    pub fn log_level(&self) -> LogLevel {
        match (self.log, self.verbose) {
            (Some(level), _) => level,
            (None, true) => LogLevel::Debug,
            (None, false) => LogLevel::Info,
        }
    }
}

/// The longest command line the guest keeps, in bytes: the launcher
/// refuses longer ones rather than let the guest cut one short.
pub const CMDLINE_MAX: usize = 4096;

/// The `wall=` word for `unix_nanos` nanoseconds since the Unix epoch:
/// `wall=SECONDS.NANOSECONDS`, nine digits after the point.
pub fn wall_word(unix_nanos: u64) -> alloc::string::String {
    alloc::format!(
        "wall={}.{:09}",
        unix_nanos / 1_000_000_000,
        unix_nanos % 1_000_000_000
    )
}

/// `SECONDS` or `SECONDS.FRACTION` (at most nine digits after the point)
/// in nanoseconds; `None` for anything else or past `u64`'s nanoseconds.
fn parse_wall(value: &str) -> Option<u64> {
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let (seconds, fraction) = match value.split_once('.') {
        Some((seconds, fraction)) if digits(fraction) && fraction.len() <= 9 => (seconds, fraction),
        Some(_) => return None,
        None => (value, ""),
    };
    if !digits(seconds) {
        return None;
    }
    let mut nanos: u64 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    for _ in fraction.len()..9 {
        nanos *= 10;
    }
    seconds
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(nanos)
}

/// Splits `cmdline` into platform options and application arguments.
/// `on_unknown` is called with every platform word it does not understand.
pub fn parse_cmdline<'a>(
    cmdline: &'a str,
    mut on_unknown: impl FnMut(&'a str),
) -> (PlatformOptions, core::str::SplitWhitespace<'a>) {
    let mut words = cmdline.split_whitespace();
    let mut options = PlatformOptions::default();
    let mut node = NodeWords::default();
    for word in words.by_ref() {
        if word == "--" {
            break;
        }
        let (key, value) = word.split_once('=').unwrap_or((word, ""));
        if node.take(key, value) {
            continue;
        }
        let known = match key {
            "tsc_khz" => value.parse().ok().map(|khz| options.tsc_khz = Some(khz)),
            // `wall=rtc` (a later word wins) makes the guest read the CMOS RTC.
            "wall" if value == "rtc" => {
                options.wall_ns = None;
                Some(())
            }
            "wall" => parse_wall(value).map(|ns| options.wall_ns = Some(ns)),
            "cores" => value
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .map(|n| options.cores = n),
            "machine" => match value {
                "q35" => Some(Machine::Q35),
                "microvm" => Some(Machine::Microvm),
                _ => None,
            }
            .map(|machine| options.machine = machine),
            "crash" => Crash::parse(value).map(|crash| options.crash = Some(crash)),
            "net" => NetMode::parse(value).map(|net| options.net = net),
            "log" => LogLevel::parse(value).map(|level| options.log = Some(level)),
            "poll_above" => value.parse().ok().map(|pps| options.poll_above = Some(pps)),
            "poll_below" => value.parse().ok().map(|pps| options.poll_below = Some(pps)),
            "virtio_tx_queue" => value
                .parse::<u16>()
                .ok()
                .filter(|n| n.is_power_of_two() && *n >= 2)
                .map(|n| options.virtio_tx_queue = Some(n)),
            "virtio_reset_after" => value
                .parse()
                .ok()
                .map(|n| options.virtio_reset_after = Some(n)),
            "ip" => StaticIp::parse(value).map(|ip| options.ip = Some(ip)),
            "verbose" if value.is_empty() => {
                options.verbose = true;
                Some(())
            }
            _ => None,
        };
        if known.is_none() {
            on_unknown(word);
        }
    }
    options.node = node.finish();
    (options, words)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn parse(cmdline: &str) -> (PlatformOptions, Vec<&str>, Vec<&str>) {
        let mut unknown = Vec::new();
        let (options, args) = parse_cmdline(cmdline, |w| unknown.push(w));
        (options, args.collect(), unknown)
    }

    #[test]
    fn platform_words_come_before_double_dash() {
        let (options, args, unknown) =
            parse("tsc_khz=2445426 wall=1795320818 cores=2 machine=microvm verbose net=poll-dhcp bogus -- --x y");
        assert_eq!(options.tsc_khz, Some(2_445_426));
        assert_eq!(options.wall_ns, Some(1_795_320_818_000_000_000));
        assert_eq!(options.cores, 2);
        assert_eq!(options.machine, Machine::Microvm);
        assert!(options.verbose);
        assert_eq!(
            options.net,
            NetMode {
                dhcp: true,
                poll: true,
                irq: false,
            }
        );
        assert_eq!(args, ["--x", "y"]);
        assert_eq!(unknown, ["bogus"]);
        let (options, _) = parse_cmdline("wall=1795320818 wall=rtc", |_| panic!());
        assert_eq!(options.wall_ns, None);
    }

    #[test]
    fn the_wall_clock_takes_fractions_of_a_second() {
        let wall = |word: &str| parse_cmdline(word, |_| {}).0.wall_ns;
        assert_eq!(wall("wall=1795320818.5"), Some(1_795_320_818_500_000_000));
        assert_eq!(
            wall("wall=1795320818.000000001"),
            Some(1_795_320_818_000_000_001)
        );
        assert_eq!(
            wall(&wall_word(1_795_320_818_012_345_678)),
            Some(1_795_320_818_012_345_678)
        );
        assert_eq!(wall_word(5_000_000_007), "wall=5.000000007");
        for bad in [
            "wall=1.",
            "wall=.5",
            "wall=1.0000000001",
            "wall=1e9",
            "wall=-1",
            "wall=99999999999999999999",
        ] {
            let mut unknown = Vec::new();
            let (options, _) = parse_cmdline(bad, |w| unknown.push(w));
            assert_eq!(
                (options.wall_ns, unknown.as_slice()),
                (None, &[bad][..]),
                "{bad}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn every_time_survives_its_wall_word(nanos in 0u64..u64::MAX) {
            let word = wall_word(nanos);
            proptest::prop_assert_eq!(parse_cmdline(&word, |_| {}).0.wall_ns, Some(nanos));
        }
    }

    #[test]
    fn the_log_level_comes_from_log_or_verbose_and_defaults_to_info() {
        let level = |cmdline| parse_cmdline(cmdline, |w| panic!("{w}")).0.log_level();
        assert_eq!(level(""), LogLevel::Info);
        assert_eq!(level("verbose"), LogLevel::Debug);
        assert_eq!(level("log=trace"), LogLevel::Trace);
        assert_eq!(level("log=WARN"), LogLevel::Warn);
        assert_eq!(level("log=warning"), LogLevel::Warn);
        assert_eq!(level("log=error"), LogLevel::Error);
        assert_eq!(level("log=off"), LogLevel::Off);
        // An explicit level wins over `verbose`, in either order.
        assert_eq!(level("verbose log=info"), LogLevel::Info);
        assert_eq!(level("log=error verbose"), LogLevel::Error);
        assert!(LogLevel::Error < LogLevel::Warn && LogLevel::Debug < LogLevel::Trace);
        let mut unknown = Vec::new();
        let (options, _) = parse_cmdline("log=loud log= log=debug", |w| unknown.push(w));
        assert_eq!(unknown, ["log=loud", "log="]);
        assert_eq!(options.log_level(), LogLevel::Debug);
    }

    #[test]
    fn missing_parts_and_bad_values() {
        assert_eq!(parse(""), (PlatformOptions::default(), vec![], vec![]));
        assert_eq!(parse("--"), (PlatformOptions::default(), vec![], vec![]));
        assert_eq!(parse("-- a b").1, ["a", "b"]);
        assert_eq!(parse("cores=3 --").0.cores, 3);
        let (options, _, unknown) = parse("cores=0 crash=nope crash=ud2");
        assert_eq!(options.cores, 1);
        assert_eq!(options.crash, Some(Crash::InvalidOpcode));
        assert_eq!(Crash::parse("guard-page"), Some(Crash::GuardPage));
        assert_eq!(Crash::parse("stack-overflow"), Some(Crash::StackOverflow));
        assert_eq!(Crash::parse("ist-overflow"), Some(Crash::IstOverflow));
        assert_eq!(unknown, ["cores=0", "crash=nope"]);
    }

    #[test]
    fn virtio_options_and_thresholds() {
        let (options, _, unknown) = parse(
            "net=irq-dhcp poll_above=5000 poll_below=500 virtio_tx_queue=8 virtio_reset_after=40",
        );
        assert_eq!(
            options.net,
            NetMode {
                dhcp: true,
                poll: false,
                irq: true,
            }
        );
        assert_eq!(
            (options.poll_above, options.poll_below),
            (Some(5000), Some(500))
        );
        assert_eq!(options.virtio_tx_queue, Some(8));
        assert_eq!(options.virtio_reset_after, Some(40));
        assert!(unknown.is_empty());
        assert_eq!(parse("").0.net, NetMode::default(), "adaptive by default");
        let (options, _, unknown) = parse("poll_above=fast virtio_tx_queue=6");
        assert_eq!(options.poll_above, None);
        assert_eq!(options.virtio_tx_queue, None);
        assert_eq!(unknown, ["poll_above=fast", "virtio_tx_queue=6"]);
    }

    #[test]
    fn static_addresses_parse_with_and_without_gateway() {
        assert_eq!(
            StaticIp::parse("10.98.0.2/24"),
            Some(StaticIp {
                addr: Ipv4Addr::new(10, 98, 0, 2),
                prefix_len: 24,
                gateway: None,
            })
        );
        assert_eq!(
            StaticIp::parse("10.98.0.2/24,gw=10.98.0.1"),
            Some(StaticIp {
                addr: Ipv4Addr::new(10, 98, 0, 2),
                prefix_len: 24,
                gateway: Some(Ipv4Addr::new(10, 98, 0, 1)),
            })
        );
        assert!(StaticIp::parse("192.168.1.9/32").is_some());
        for bad in [
            "",
            "10.98.0.2",
            "10.98.0.2/",
            "10.98.0.2/0",
            "10.98.0.2/33",
            "10.98.0/24",
            "0.0.0.0/24",
            "255.255.255.255/24",
            "224.0.0.1/24",
            "10.98.0.2/24,",
            "10.98.0.2/24,gw=",
            "10.98.0.2/24,via=10.98.0.1",
            "10.98.0.2/24,gw=10.98.1.1",
            "10.98.0.2/24,gw=10.98.0.2",
            "10.98.0.2/24,gw=10.98.0.1,x",
        ] {
            assert_eq!(StaticIp::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn ip_and_net_words_combine_in_any_order() {
        for line in [
            "ip=10.98.0.2/24,gw=10.98.0.1 net=poll-static",
            "net=poll-static ip=10.98.0.2/24,gw=10.98.0.1",
        ] {
            let (options, _, unknown) = parse(line);
            assert!(options.net.poll && !options.net.dhcp, "{line}");
            assert_eq!(
                options.ip,
                StaticIp::parse("10.98.0.2/24,gw=10.98.0.1"),
                "{line}"
            );
            assert!(unknown.is_empty(), "{line}");
        }
        let (options, _, unknown) = parse("ip=10.98.0.2 -- x");
        assert_eq!(options.ip, None);
        assert_eq!(unknown, ["ip=10.98.0.2"]);
    }
}
