//! The command-line options that put an application on the user-space
//! stack, taken out of its arguments like the platform's own options.

use std::net::Ipv4Addr;

use ebb_hosted::ConfigError;
use ebb_netstack::{EthernetAddress, IpConfig, IpSetup};

/// The options, for `--help`.
pub const OPTIONS_HELP: &str = "\
User-space network stack options (Ebbflow's own stack over a TAP device):
  --tap NAME         run the network on our own stack over TAP device NAME
  --tap-ip ADDR/LEN  static address, e.g. 10.0.0.2/24 (default: DHCP)
  --tap-gateway ADDR default gateway for the static address
  --tap-mac MAC      our Ethernet address (default 02:eb:00:00:00:02)
  --tap-batch N      frames read per poll before other events run (default 64)";

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

    /// Takes the user-space stack's options out of `args`: `Some` if
    /// `--tap` was given. Returns the other arguments unchanged.
    ///
    /// # Errors
    ///
    /// A malformed value, or `--tap-*` options without `--tap`.
    pub fn from_args(
        args: impl IntoIterator<Item = String>,
    ) -> Result<(Option<Options>, Vec<String>), ConfigError> {
        let mut tap = None;
        let mut ip = None;
        let mut gateway = None;
        let mut mac = None;
        let mut batch = None;
        let mut rest = Vec::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) if name.starts_with("--tap") => {
                    (name.to_string(), Some(value.to_string()))
                }
                _ => (arg.clone(), None),
            };
            let mut value = |name: &str| {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| ConfigError(format!("{name} needs a value")))
            };
            match name.as_str() {
                "--tap" => tap = Some(value("--tap")?),
                "--tap-ip" => ip = Some(parse_cidr(&value("--tap-ip")?)?),
                "--tap-gateway" => {
                    let text = value("--tap-gateway")?;
                    gateway = Some(text.parse::<Ipv4Addr>().map_err(|_| {
                        ConfigError(format!("--tap-gateway takes an IPv4 address, not '{text}'"))
                    })?);
                }
                "--tap-mac" => mac = Some(parse_mac(&value("--tap-mac")?)?),
                "--tap-batch" => {
                    let text = value("--tap-batch")?;
                    batch = Some(text.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(
                        || ConfigError(format!("--tap-batch takes a number above 0, not '{text}'")),
                    )?);
                }
                _ => rest.push(arg),
            }
        }
        let Some(tap) = tap else {
            if ip.is_some() || gateway.is_some() || mac.is_some() {
                return Err(ConfigError(
                    "--tap-ip, --tap-gateway and --tap-mac need --tap".into(),
                ));
            }
            return Ok((None, rest));
        };
        let mut options = Options::new(&tap);
        if let Some((addr, prefix_len)) = ip {
            options.ip = IpSetup::Static(IpConfig {
                addr,
                prefix_len,
                gateway,
            });
        } else if gateway.is_some() {
            return Err(ConfigError(
                "--tap-gateway needs --tap-ip (DHCP gives the gateway)".into(),
            ));
        }
        if let Some(mac) = mac {
            options.hardware_addr = mac;
        }
        if let Some(batch) = batch {
            options.batch = batch;
        }
        Ok((Some(options), rest))
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
    use super::*;

    fn parse(args: &[&str]) -> Result<(Option<Options>, Vec<String>), ConfigError> {
        Options::from_args(args.iter().map(|arg| arg.to_string()))
    }

    #[test]
    fn no_tap_means_no_user_space_stack() {
        let (options, rest) = parse(&["--udp-port", "7"]).unwrap();
        assert_eq!(options, None);
        assert_eq!(rest, vec!["--udp-port", "7"]);
    }

    #[test]
    fn static_address_gateway_and_mac_are_read() {
        let (options, rest) = parse(&[
            "--tap",
            "ebb0",
            "--tap-ip=10.1.2.3/24",
            "--tap-gateway",
            "10.1.2.1",
            "--tap-mac",
            "02:00:00:00:00:09",
            "--tap-batch",
            "8",
            "-v",
        ])
        .unwrap();
        let options = options.unwrap();
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
        assert_eq!(rest, vec!["-v"]);
    }

    #[test]
    fn dhcp_is_the_default() {
        let (options, _) = parse(&["--tap", "ebb0"]).unwrap();
        assert_eq!(options.unwrap().ip, IpSetup::Dhcp);
    }

    #[test]
    fn bad_values_are_explained() {
        assert!(parse(&["--tap", "t", "--tap-ip", "10.0.0.1"])
            .unwrap_err()
            .0
            .contains("ADDR/LEN"));
        assert!(parse(&["--tap", "t", "--tap-ip", "10.0.0.1/33"]).is_err());
        assert!(parse(&["--tap", "t", "--tap-mac", "01:00:00:00:00:00"])
            .unwrap_err()
            .0
            .contains("six hex bytes"));
        assert!(parse(&["--tap-ip", "10.0.0.1/24"])
            .unwrap_err()
            .0
            .contains("need --tap"));
        assert!(parse(&["--tap", "t", "--tap-gateway", "10.0.0.1"])
            .unwrap_err()
            .0
            .contains("DHCP"));
        assert_eq!(parse(&["--tap"]).unwrap_err().0, "--tap needs a value");
    }
}
