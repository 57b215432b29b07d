//! Prerequisites, and the one policy for tests that need them.
//!
//! A test that needs root, `/dev/net/tun`, QEMU or another host tool calls
//! [`require`] first (or the [`skip_unless!`] macro, which does all of the
//! following). When something is missing it gets `Err(Skip)` with the
//! reason, calls [`skip`] and returns: `skip` prints one line
//! `SKIPPED: <test>: <reason>` (to the real stderr, past libtest's output
//! capture) and appends `<test>\t<reason>` to the file named by
//! `EBB_TEST_SKIPS`. `./ebb test` sets that variable, reads the file after
//! the test step and counts those tests as skipped, never as passed
//! (stable libtest has no runtime skip: to libtest the test passed).
//!
//! With `CI=true`, a missing tool that `./ebb` installs (a Debian package)
//! is a failure, not a skip: [`require`] panics and names the package.
//! Root and `/dev/net/tun` still skip, since `./ebb` cannot provide them.
//!
//! `EBB_TESTBED_PRETEND_MISSING=tun,qemu,...` (names as in [`Need::name`])
//! makes those prerequisites count as missing, to check the policy itself
//! on a machine that has everything.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The variable naming the file that collects skipped tests.
pub const SKIPS_ENV: &str = "EBB_TEST_SKIPS";
/// The variable listing prerequisites to treat as missing (for testing).
pub const PRETEND_MISSING_ENV: &str = "EBB_TESTBED_PRETEND_MISSING";

/// Something a test or a launch needs from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// An effective user id of 0 (namespaces, TAP devices).
    Root,
    /// The TUN/TAP character device `/dev/net/tun`.
    Tun,
    /// `qemu-system-x86_64`.
    Qemu,
    /// `ip` from iproute2.
    Ip,
    /// `dnsmasq` (a DHCP server for the guests' DHCP tests).
    Dnsmasq,
    /// `ping`.
    Ping,
    /// `python3`.
    Python3,
    /// Stock memcached, the reference server.
    Memcached,
    /// etcd, the store behind a cluster's global id map.
    Etcd,
}

impl Need {
    /// The short name used in messages and in `EBB_TESTBED_PRETEND_MISSING`.
    pub fn name(self) -> &'static str {
        match self {
            Need::Root => "root",
            Need::Tun => "tun",
            Need::Qemu => "qemu",
            Need::Ip => "ip",
            Need::Dnsmasq => "dnsmasq",
            Need::Ping => "ping",
            Need::Python3 => "python3",
            Need::Memcached => "memcached",
            Need::Etcd => "etcd",
        }
    }

    /// For a tool: its program name and the Debian package `./ebb`
    /// installs it from. `None` for what `./ebb` cannot provide.
    pub fn tool(self) -> Option<(&'static str, &'static str)> {
        match self {
            Need::Root | Need::Tun => None,
            Need::Qemu => Some(("qemu-system-x86_64", "qemu-system-x86")),
            Need::Ip => Some(("ip", "iproute2")),
            Need::Dnsmasq => Some(("dnsmasq", "dnsmasq-base")),
            Need::Ping => Some(("ping", "iputils-ping")),
            Need::Python3 => Some(("python3", "python3")),
            Need::Memcached => Some(("memcached", "memcached")),
            Need::Etcd => Some(("etcd", "etcd-server")),
        }
    }

    /// Why it is missing, or `None` when it is there.
    fn missing(self) -> Option<String> {
        if pretended_missing(self) {
            return Some(format!(
                "{} (pretended by {PRETEND_MISSING_ENV})",
                self.describe()
            ));
        }
        let present = match self {
            Need::Root => is_root(),
            Need::Tun => Path::new("/dev/net/tun").exists(),
            _ => self.tool().is_some_and(|(program, _)| on_path(program)),
        };
        (!present).then(|| self.describe())
    }

    /// What is missing, as a user reads it.
    fn describe(self) -> String {
        match self.tool() {
            None if self == Need::Root => "not root".to_owned(),
            None => "no /dev/net/tun".to_owned(),
            Some((program, package)) => format!("no {program} (Debian package {package})"),
        }
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a test cannot run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// Everything that is missing, joined by `, `.
    pub reason: String,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Checks `needs`; `Err(Skip)` names everything missing.
///
/// # Panics
///
/// With `CI=true`, when a tool `./ebb` installs is missing: CI must not
/// pass by skipping what it could have run.
pub fn require(needs: &[Need]) -> Result<(), Skip> {
    let missing: Vec<(Need, String)> = needs
        .iter()
        .filter_map(|&need| need.missing().map(|why| (need, why)))
        .collect();
    if is_ci() {
        let installable: Vec<&str> = missing
            .iter()
            .filter(|(need, _)| need.tool().is_some())
            .map(|(_, why)| why.as_str())
            .collect();
        assert!(
            installable.is_empty(),
            "CI=true and a prerequisite ./ebb installs is missing: {} \
             (run the tests through `./ebb test`, which installs it)",
            installable.join(", ")
        );
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Skip {
            reason: missing
                .into_iter()
                .map(|(_, why)| why)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

/// Records that `test` was skipped because of `reason`: one line
/// `SKIPPED: <test>: <reason>` on stderr (written past libtest's capture,
/// so it shows in `cargo test`'s output), and `<test>\t<reason>` appended
/// to the file named by `EBB_TEST_SKIPS` when that is set.
pub fn skip(test: &str, reason: &str) {
    let line = skip_line(test, reason);
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os(SKIPS_ENV).filter(|path| !path.is_empty()) {
        let record = format!("{test}\t{reason}\n");
        // One write per record on an O_APPEND file: records from test
        // threads and binaries running at once do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(record.as_bytes()));
        if let Err(e) = written {
            let _ = writeln!(
                std::io::stderr(),
                "warning: cannot record the skip in {}: {e}",
                Path::new(&path).display()
            );
        }
    }
}

/// The line [`skip`] prints.
pub fn skip_line(test: &str, reason: &str) -> String {
    format!("SKIPPED: {test}: {reason}\n")
}

/// The skipped tests recorded in an `EBB_TEST_SKIPS` file: `(test,
/// reason)` in the order written.
pub fn read_skips(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| match line.split_once('\t') {
            Some((test, reason)) => (test.to_owned(), reason.to_owned()),
            None => (line.to_owned(), String::new()),
        })
        .collect()
}

/// Returns from the calling test, counted as skipped, unless every need is
/// met: `ebb_testbed::skip_unless!(Need::Root, Need::Tun);`. The test's
/// name is the calling function's path.
#[macro_export]
macro_rules! skip_unless {
    ($($need:expr),+ $(,)?) => {
        if let Err(skip) = $crate::require(&[$($need),+]) {
            $crate::skip($crate::function_name!(), &skip.reason);
            return;
        }
    };
}

/// The path of the function this is expanded in, e.g.
/// `namespace::ping_answers` (an integration test's crate is its binary).
#[macro_export]
macro_rules! function_name {
    () => {{
        fn here() {}
        $crate::need::trim_function_name(::std::any::type_name_of_val(&here))
    }};
}

/// `krate::a::b::here` → `krate::a::b`; used by [`function_name!`].
pub fn trim_function_name(full: &'static str) -> &'static str {
    let path = full.strip_suffix("::here").unwrap_or(full);
    path.strip_suffix("::{{closure}}").unwrap_or(path)
}

/// Whether this process runs as root (effective user id 0).
pub fn is_root() -> bool {
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// Whether `program` is an executable file in a directory on `PATH`.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(program))
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

/// Whether `CI` is set to `true` (or `1`).
pub fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true" || value == "1")
}

fn pretended_missing(need: Need) -> bool {
    std::env::var(PRETEND_MISSING_ENV).is_ok_and(|list| {
        list.split(',')
            .any(|name| name.trim().eq_ignore_ascii_case(need.name()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_name_their_debian_package_and_root_and_tun_name_none() {
        assert_eq!(
            Need::Qemu.tool(),
            Some(("qemu-system-x86_64", "qemu-system-x86"))
        );
        assert_eq!(Need::Dnsmasq.tool(), Some(("dnsmasq", "dnsmasq-base")));
        assert_eq!(Need::Root.tool(), None);
        assert_eq!(Need::Tun.tool(), None);
        assert_eq!(Need::Root.describe(), "not root");
        assert_eq!(Need::Tun.describe(), "no /dev/net/tun");
        assert_eq!(Need::Ip.describe(), "no ip (Debian package iproute2)");
    }

    #[test]
    fn sh_is_on_path_and_a_made_up_tool_is_not() {
        assert!(on_path("sh"));
        assert!(!on_path("ebb-no-such-tool-anywhere"));
    }

    #[test]
    fn skip_records_read_back_in_order_with_their_reasons() {
        let text =
            "a::one\tnot root\n\nb::two\tno /dev/net/tun, no ip (Debian package iproute2)\nodd\n";
        assert_eq!(
            read_skips(text),
            [
                ("a::one".to_owned(), "not root".to_owned()),
                (
                    "b::two".to_owned(),
                    "no /dev/net/tun, no ip (Debian package iproute2)".to_owned()
                ),
                ("odd".to_owned(), String::new()),
            ]
        );
        assert_eq!(skip_line("t", "r"), "SKIPPED: t: r\n");
    }

    #[test]
    fn the_function_name_drops_the_helper() {
        assert_eq!(trim_function_name("tests::a::b::here"), "tests::a::b");
        assert_eq!(trim_function_name("t::a::{{closure}}::here"), "t::a");
        assert_eq!(
            crate::function_name!(),
            "ebb_testbed::need::tests::the_function_name_drops_the_helper"
        );
    }
}
