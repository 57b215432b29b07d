//! The user-space stack's settings, from the environment: the program's
//! own command line is the program's (Redis's `--port`, ...), so
//! Ebbflow's words travel beside it. `./ebb run PROGRAM --userstack` sets
//! them.

use ebb_userstack::{parse_cidr, parse_mac, Options, TapArgs};

/// The TAP device to attach to (required).
pub const TAP: &str = "EBB_USERSTACK_TAP";
/// The stack's address, `ADDR/LEN` (default: DHCP).
pub const IP: &str = "EBB_USERSTACK_IP";
/// The default gateway (with an address only).
pub const GATEWAY: &str = "EBB_USERSTACK_GATEWAY";
/// The stack's MAC address (default: a locally administered one).
pub const MAC: &str = "EBB_USERSTACK_MAC";
/// The CPU to pin the program's core to (default: not pinned).
pub const CPU: &str = "EBB_USERSTACK_CPU";

/// What the environment says.
#[derive(Debug)]
pub struct Settings {
    /// The stack's options.
    pub options: Options,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

/// Reads the settings through `var` (the environment, or a test's map).
///
/// # Errors
///
/// A sentence naming the variable that is missing or wrong.
pub fn read(var: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
    let Some(tap) = var(TAP) else {
        return Err(format!(
            "this program runs on Ebbflow's user-space stack and needs a TAP device: set {TAP}=NAME \
             (and {IP}=ADDR/LEN, else DHCP); `./ebb run PROGRAM --userstack` sets them"
        ));
    };
    let named = |name: &str, error: String| format!("{name}: {error}");
    let tap_ip = var(IP)
        .map(|text| parse_cidr(&text).map_err(|e| named(IP, e.0)))
        .transpose()?;
    let tap_gateway = var(GATEWAY)
        .map(|text| {
            text.parse()
                .map_err(|e| named(GATEWAY, format!("'{text}' is not an IPv4 address: {e}")))
        })
        .transpose()?;
    let tap_mac = var(MAC)
        .map(|text| parse_mac(&text).map_err(|e| named(MAC, e.0)))
        .transpose()?;
    let cpu = var(CPU)
        .map(|text| {
            text.parse::<usize>()
                .map_err(|_| named(CPU, format!("'{text}' is not a CPU number")))
        })
        .transpose()?;
    let args = TapArgs {
        tap: Some(tap),
        tap_ip,
        tap_gateway,
        tap_mac,
        tap_batch: None,
    };
    let options = args
        .options()
        .map_err(|e| e.0)?
        .ok_or_else(|| format!("{TAP} is empty"))?;
    Ok(Settings { options, cpu })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_netstack::IpSetup;

    fn from(pairs: &[(&str, &str)]) -> Result<Settings, String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        read(|name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn a_tap_and_an_address_make_a_static_stack() {
        let settings = from(&[(TAP, "ebb0"), (IP, "10.99.0.2/24"), (CPU, "1")]).unwrap();
        assert_eq!(settings.options.tap, "ebb0");
        assert!(matches!(settings.options.ip, IpSetup::Static(ip) if ip.prefix_len == 24));
        assert_eq!(settings.cpu, Some(1));
    }

    #[test]
    fn a_missing_tap_or_a_bad_value_is_named() {
        let missing = from(&[]).unwrap_err();
        assert!(missing.contains("EBB_USERSTACK_TAP=NAME"), "{missing}");
        let bad = from(&[(TAP, "ebb0"), (IP, "10.99.0.2")]).unwrap_err();
        assert!(bad.starts_with("EBB_USERSTACK_IP: "), "{bad}");
        let bad = from(&[(TAP, "ebb0"), (CPU, "one")]).unwrap_err();
        assert!(bad.contains("'one' is not a CPU number"), "{bad}");
        let bad = from(&[(TAP, "ebb0"), (GATEWAY, "10.99.0.1")]).unwrap_err();
        assert!(bad.contains("need"), "a gateway without an address: {bad}");
    }
}
