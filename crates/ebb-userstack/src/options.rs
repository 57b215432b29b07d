//! The command-line options that put an application on the user-space
//! stack ([`TapArgs`], clap), and what they configure ([`Options`]).

use std::net::Ipv4Addr;

use ebb_hosted::ConfigError;
use ebb_netstack::{EthernetAddress, IpConfig, IpSetup};

/// The options that put an application on the user-space stack, the same
/// on every hosted command line (clap): applications get them through
/// `ebb-app`, tools flatten them into their own parser.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
#[command(next_help_heading = "User-space network stack options")]
pub struct TapArgs {
    /// Run the network on our own stack over TAP device NAME
    #[arg(long, value_name = "NAME")]
    pub tap: Option<String>,
    /// Static address, e.g. 10.0.0.2/24 (default: DHCP)
    #[arg(long, value_name = "ADDR/LEN", value_parser = parse_cidr)]
    pub tap_ip: Option<(Ipv4Addr, u8)>,
    /// Default gateway for the static address
    #[arg(long, value_name = "ADDR")]
    pub tap_gateway: Option<Ipv4Addr>,
    /// Our Ethernet address (default 02:eb:00:00:00:02)
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub tap_mac: Option<EthernetAddress>,
    /// Frames read per poll before other events run (default 64)
    #[arg(long, value_name = "N", value_parser = parse_batch)]
    pub tap_batch: Option<usize>,
}

impl TapArgs {
    /// The user-space stack's options, `None` without `--tap`.
    ///
    /// # Errors
    ///
    /// `--tap-*` options without `--tap`, or a gateway without an address.
    pub fn options(&self) -> Result<Option<Options>, ConfigError> {
        let Some(tap) = &self.tap else {
            if self.tap_ip.is_some()
                || self.tap_gateway.is_some()
                || self.tap_mac.is_some()
                || self.tap_batch.is_some()
            {
                return Err(ConfigError(
                    "--tap-ip, --tap-gateway, --tap-mac and --tap-batch need --tap".into(),
                ));
            }
            return Ok(None);
        };
        let mut options = Options::new(tap);
        match (self.tap_ip, self.tap_gateway) {
            (Some((addr, prefix_len)), gateway) => {
                options.ip = IpSetup::Static(IpConfig {
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
        if let Some(mac) = self.tap_mac {
            options.hardware_addr = mac;
        }
        if let Some(batch) = self.tap_batch {
            options.batch = batch;
        }
        Ok(Some(options))
    }
}

fn parse_batch(text: &str) -> Result<usize, ConfigError> {
    text.parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| ConfigError(format!("--tap-batch takes a number above 0, not '{text}'")))
}

/// Where and how the user-space stack runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The TAP device's name.
    pub tap: String,
    /// Static address or DHCP.
    pub ip: IpSetup,
    /// Our Ethernet address.
    pub hardware_addr: EthernetAddress,
    /// Frames one poll reads at most; more wait for a poll queued behind
    /// the core's other events.
    pub batch: usize,
}

impl Options {
    /// Options for TAP device `tap` with DHCP and the default address.
    #[must_use]
    pub fn new(tap: &str) -> Self {
        Options {
            tap: tap.to_string(),
            ip: IpSetup::Dhcp,
            // Locally administered (bit 1 of the first octet), unicast.
            hardware_addr: EthernetAddress([0x02, 0xeb, 0, 0, 0, 2]),
            batch: 64,
        }
    }
}

/// `--tap-ip`'s value: `ADDR/LEN`.
///
/// # Errors
///
/// Anything else, with a sentence saying so.
pub fn parse_cidr(text: &str) -> Result<(Ipv4Addr, u8), ConfigError> {
    let error = || {
        ConfigError(format!(
            "--tap-ip takes ADDR/LEN such as 10.0.0.2/24, not '{text}'"
        ))
    };
    let (addr, len) = text.split_once('/').ok_or_else(error)?;
    let addr = addr.parse::<Ipv4Addr>().map_err(|_| error())?;
    let len = len
        .parse::<u8>()
        .ok()
        .filter(|&len| len <= 32)
        .ok_or_else(error)?;
    Ok((addr, len))
}

/// `--tap-mac`'s value: six hex bytes, unicast.
///
/// # Errors
///
/// Anything else, with a sentence saying so.
pub fn parse_mac(text: &str) -> Result<EthernetAddress, ConfigError> {
    let error = || {
        ConfigError(format!(
            "--tap-mac takes six hex bytes such as 02:eb:00:00:00:02, not '{text}'"
        ))
    };
    let mut bytes = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut bytes {
        let part = parts.next().ok_or_else(error)?;
        *byte = u8::from_str_radix(part, 16).map_err(|_| error())?;
    }
    if parts.next().is_some() || bytes[0] & 1 == 1 {
        return Err(error());
    }
    Ok(EthernetAddress(bytes))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Tool {
        #[command(flatten)]
        tap: TapArgs,
        #[arg(long)]
        udp_port: Option<u16>,
    }

    fn parse(args: &[&str]) -> Result<Option<Options>, String> {
        let tool = Tool::try_parse_from(["tool"].iter().chain(args)).map_err(|e| e.to_string())?;
        tool.tap.options().map_err(|error| error.0)
    }

    #[test]
    fn no_tap_means_no_user_space_stack() {
        assert_eq!(parse(&["--udp-port", "7"]), Ok(None));
    }

    #[test]
    fn static_address_gateway_and_mac_are_read() {
        let options = parse(&[
            "--tap",
            "ebb0",
            "--tap-ip=10.1.2.3/24",
            "--tap-gateway",
            "10.1.2.1",
            "--tap-mac",
            "02:00:00:00:00:09",
            "--tap-batch",
            "8",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(options.tap, "ebb0");
        assert_eq!(
            options.ip,
            IpSetup::Static(IpConfig {
                addr: Ipv4Addr::new(10, 1, 2, 3),
                prefix_len: 24,
                gateway: Some(Ipv4Addr::new(10, 1, 2, 1)),
            })
        );
        assert_eq!(options.hardware_addr, EthernetAddress([2, 0, 0, 0, 0, 9]));
        assert_eq!(options.batch, 8);
    }

    #[test]
    fn dhcp_is_the_default() {
        let options = parse(&["--tap", "ebb0"]).unwrap().unwrap();
        assert_eq!(options.ip, IpSetup::Dhcp);
    }

    #[test]
    fn bad_values_are_explained() {
        assert!(parse(&["--tap", "t", "--tap-ip", "10.0.0.1"])
            .unwrap_err()
            .contains("ADDR/LEN"));
        assert!(
            matches!(parse(&["--tap", "t", "--tap-ip", "10.0.0.1/33"]), Err(e) if e.contains("--tap-ip takes ADDR/LEN"))
        );
        assert!(parse(&["--tap", "t", "--tap-mac", "01:00:00:00:00:00"])
            .unwrap_err()
            .contains("six hex bytes"));
        assert!(parse(&["--tap-ip", "10.0.0.1/24"])
            .unwrap_err()
            .contains("need --tap"));
        assert!(parse(&["--tap", "t", "--tap-gateway", "10.0.0.1"])
            .unwrap_err()
            .contains("DHCP"));
        assert!(parse(&["--tap"])
            .unwrap_err()
            .contains("a value is required for '--tap <NAME>'"));
    }
}
