//! The hosted platform's own options, declared in the same table form as
//! an application's (so clap parses them with the application's and the
//! help lists them under their own headings), and what they configure:
//! the node (`ebb_hosted::Config`) and, with `--tap`, the user-space stack
//! (`ebb_userstack::Options`). Their values are checked by the parsers of
//! the crates they configure.

use std::format;
use std::net::Ipv4Addr;

use ebb_hosted::{parse_cores, parse_cpus, Config, ConfigError};
use ebb_netstack::{IpConfig, IpSetup};

use crate::args::Args;
use crate::options::{Opt, Section};

/// The node's options.
pub const PLATFORM: Section = Section {
    heading: Some("Platform options"),
    options: &[
        Opt::long_value(
            "cores",
            "N",
            "Number of cores (default: every CPU this process may use)",
        ),
        Opt::long_value(
            "cpus",
            "LIST",
            "CPUs to pin cores to, comma-separated (e.g. 0,1)",
        ),
        Opt::long_value("backend", "NAME", "auto (default), io-uring or epoll"),
        Opt::long_flag("no-pin", "Do not pin cores to CPUs"),
    ],
};

/// The user-space stack's options.
pub const USERSTACK: Section = Section {
    heading: Some("User-space network stack options"),
    options: &[
        Opt::long_value(
            "tap",
            "NAME",
            "Run the network on our own stack over TAP device NAME",
        ),
        Opt::long_value(
            "tap-ip",
            "ADDR/LEN",
            "Static address, e.g. 10.0.0.2/24 (default: DHCP)",
        ),
        Opt::long_value(
            "tap-gateway",
            "ADDR",
            "Default gateway for the static address",
        ),
        Opt::long_value(
            "tap-mac",
            "MAC",
            "Our Ethernet address (default 02:eb:00:00:00:02)",
        ),
        Opt::long_value(
            "tap-batch",
            "N",
            "Frames read per poll before other events run (default 64)",
        ),
    ],
};

/// The node's configuration and, with `--tap`, the user-space stack's.
///
/// # Errors
///
/// A value the platform does not take.
pub fn configure(args: &Args) -> Result<(Config, Option<ebb_userstack::Options>), ConfigError> {
    let mut config = Config::default();
    if let Some(text) = args.value("cores") {
        config.cores = Some(parse_cores(text)?);
    }
    if let Some(text) = args.value("cpus") {
        config.cpus = Some(parse_cpus(text)?);
    }
    if let Some(text) = args.value("backend") {
        config.backend = text.parse().map_err(ConfigError)?;
    }
    config.pin = !args.flag("no-pin");
    let ip = args
        .value("tap-ip")
        .map(ebb_userstack::parse_cidr)
        .transpose()?;
    let gateway = args
        .value("tap-gateway")
        .map(|text| {
            text.parse::<Ipv4Addr>().map_err(|_| {
                ConfigError(format!("--tap-gateway takes an IPv4 address, not '{text}'"))
            })
        })
        .transpose()?;
    let mac = args
        .value("tap-mac")
        .map(ebb_userstack::parse_mac)
        .transpose()?;
    let batch = args
        .value("tap-batch")
        .map(|text| {
            text.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    ConfigError(format!("--tap-batch takes a number above 0, not '{text}'"))
                })
        })
        .transpose()?;
    let Some(tap) = args.value("tap") else {
        if ip.is_some() || gateway.is_some() || mac.is_some() || batch.is_some() {
            return Err(ConfigError(
                "--tap-ip, --tap-gateway, --tap-mac and --tap-batch need --tap".into(),
            ));
        }
        return Ok((config, None));
    };
    let mut userstack = ebb_userstack::Options::new(tap);
    match (ip, gateway) {
        (Some((addr, prefix_len)), gateway) => {
            userstack.ip = IpSetup::Static(IpConfig {
                addr,
                prefix_len,
                gateway,
            });
        }
        (None, Some(_)) => {
            return Err(ConfigError(
                "--tap-gateway needs --tap-ip (DHCP gives the gateway)".into(),
            ))
        }
        (None, None) => {}
    }
    if let Some(mac) = mac {
        userstack.hardware_addr = mac;
    }
    if let Some(batch) = batch {
        userstack.batch = batch;
    }
    Ok((config, Some(userstack)))
}
