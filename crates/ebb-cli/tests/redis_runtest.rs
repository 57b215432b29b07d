//! Issue 19: Redis's own test suite (`tests/test_helper.tcl`, what
//! `./runtest` runs, from the same source package) in external-server
//! mode (`--host`/`--port`), against stock Redis on Linux (the same
//! source built with gcc and glibc, `ebb-cbuild redis-stock`), ours
//! hosted (musl and the hosted personality) and ours native (Ebbflow's
//! own TCP/IP stack), stock and hosted side by side.
//!
//! Natively the suite reaches Redis over a TAP device in the network
//! namespace the launcher makes (`--net tap`; the suite runs in it with
//! `ip netns exec`), not through QEMU's user-mode forwarding: that
//! forwarding accepts a new host connection only when its loop comes
//! round, so bytes sent on a connection just opened can reach the guest
//! after bytes sent later on an older one. Several tests open a client
//! and use it at once, assuming they do not (measured here: 1 in 20
//! `BRPOPLPUSH with multiple blocked clients` rounds hung through the
//! forwarding, none over TAP).
//!
//! - **Which tests.** The units in [`UNITS`], the groups that need no
//!   fork, with the tags excluded in [`EXCLUDED_TAGS`]: replication,
//!   persistence (`needs:save`: SAVE, BGSAVE and restarts) and DEBUG
//!   (DEBUG RELOAD and the other debugging commands). The suite itself
//!   skips what an external server cannot do (`external:skip`).
//! - **What it shows.** Each suite's pass and fail counts, and that
//!   every test that passes on stock but not on ours is listed, with its
//!   reason, in `docs/redis-tests.md` (a test newly failing on ours
//!   fails this test; one listed that passes again is reported, to be
//!   taken off the list).
//!
//! `EBB_REDIS_UNITS=all` runs every fork-free unit ([`ALL_UNITS`],
//! about 15 minutes hosted) instead of the subset CI runs. Needs tclsh,
//! QEMU and what the Redis builds need; without them it is SKIPPED with
//! the reason (natively also root and /dev/net/tun, for the namespace).

mod c_support;
mod native_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ebb_testbed::child::run_bounded;
use ebb_testbed::Need;
use native_support::{root, BOOT};

/// musl, the personality and both Redis builds (cached after the first
/// time).
const PREPARE_LIMIT: Duration = Duration::from_secs(1500);
/// The native guest's address on its TAP link (`ebb-cli`'s tap.rs).
const GUEST_ADDR: &str = "10.98.0.2";
/// One suite's run of [`UNITS`] (about 2 minutes hosted or native).
const SUITE_LIMIT: Duration = Duration::from_secs(1200);
/// One suite's run of [`ALL_UNITS`] (about 15 minutes hosted).
const ALL_SUITE_LIMIT: Duration = Duration::from_secs(3600);

/// The units CI runs: the data types, keys, expiry, the protocol,
/// transactions, pub/sub and scripting, each a few seconds hosted.
const UNITS: &[&str] = &[
    "unit/protocol",
    "unit/keyspace",
    "unit/info-command",
    "unit/type/string",
    "unit/type/incr",
    "unit/type/hash",
    "unit/type/set",
    "unit/type/list-2",
    "unit/expire",
    "unit/multi",
    "unit/quit",
    "unit/pubsub",
    "unit/bitfield",
];

/// Every unit an external server can run without fork (`EBB_REDIS_UNITS=all`).
const ALL_UNITS: &[&str] = &[
    "unit/printver",
    "unit/dump",
    "unit/auth",
    "unit/protocol",
    "unit/keyspace",
    "unit/scan",
    "unit/info",
    "unit/info-command",
    "unit/type/string",
    "unit/type/incr",
    "unit/type/list",
    "unit/type/list-2",
    "unit/type/list-3",
    "unit/type/set",
    "unit/type/zset",
    "unit/type/hash",
    "unit/type/stream",
    "unit/type/stream-cgroups",
    "unit/sort",
    "unit/expire",
    "unit/other",
    "unit/multi",
    "unit/quit",
    "unit/acl",
    "unit/acl-v2",
    "unit/latency-monitor",
    "unit/pubsub",
    "unit/pubsubshard",
    "unit/slowlog",
    "unit/scripting",
    "unit/functions",
    "unit/introspection",
    "unit/introspection-2",
    "unit/limits",
    "unit/bitops",
    "unit/bitfield",
    "unit/geo",
    "unit/memefficiency",
    "unit/hyperloglog",
    "unit/lazyfree",
    "unit/wait",
    "unit/pause",
    "unit/querybuf",
    "unit/tracking",
    "unit/oom-score-adj",
    "unit/shutdown",
    "unit/networking",
    "unit/client-eviction",
    "unit/violations",
    "unit/replybufsize",
];

/// Tags whose tests are left out: replication, persistence, DEBUG.
const EXCLUDED_TAGS: &[&str] = &["needs:repl", "needs:save", "needs:debug"];

/// What one suite said.
#[derive(Default)]
struct Outcome {
    passed: BTreeSet<String>,
    failed: BTreeSet<String>,
    /// The suite stopped (`[exception]`): its line and what followed.
    exception: Option<String>,
    output: String,
}

/// `text` without its ANSI colour sequences.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for end in chars.by_ref() {
                if end.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The suite's lines parsed: `[ok]: NAME (N ms)`, `[err]: NAME in FILE`,
/// `[exception]: ...`.
fn parse(output: &str) -> Outcome {
    let output = plain(output);
    let mut outcome = Outcome::default();
    for (index, line) in output.lines().enumerate() {
        if let Some(rest) = line.strip_prefix("[ok]: ") {
            let name = rest.rsplit_once(" (").map_or(rest, |(name, _)| name);
            outcome.passed.insert(name.to_owned());
        } else if let Some(rest) = line.strip_prefix("[err]: ") {
            let name = rest.rsplit_once(" in ").map_or(rest, |(name, _)| name);
            outcome.failed.insert(name.to_owned());
        } else if line.starts_with("[exception]") {
            let rest: Vec<&str> = output.lines().skip(index).take(20).collect();
            outcome.exception = Some(rest.join("\n"));
        }
    }
    // A test that failed once and passed in another unit of the same name
    // counts as failed.
    outcome.passed = &outcome.passed - &outcome.failed;
    outcome.output = output;
    outcome
}

/// The units to run: [`UNITS`], or [`ALL_UNITS`] with
/// `EBB_REDIS_UNITS=all`.
fn units() -> &'static [&'static str] {
    match std::env::var("EBB_REDIS_UNITS").as_deref() {
        Ok("all") => ALL_UNITS,
        _ => UNITS,
    }
}

/// A copy of the source's `tests/` in a directory of its own (the suite
/// writes `tests/tmp` and runs from the directory above).
fn suite_dir(source: &Path, label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ebb-redis-suite-{}-{label}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the suite's directory");
    let copied = run_bounded(
        Command::new("cp")
            .arg("-a")
            .arg(source.join("tests"))
            .arg(&dir),
        Duration::from_secs(120),
    );
    assert!(copied.status.success(), "copying tests/: {}", copied.stderr);
    dir
}

/// Where a suite runs and which server it tests.
struct Target<'a> {
    /// The name in reports.
    label: &'a str,
    /// The network namespace to run the suite in (`ip netns exec`), if
    /// not this one.
    namespace: Option<&'a str>,
    host: &'a str,
    port: u16,
    /// The first of the ports the suite itself takes (its own test
    /// server's is just below), so that suites side by side never pick
    /// the same.
    base_port: u16,
    /// Tests not to run (`--skiptest`), each listed with its reason in
    /// `docs/redis-tests.md`.
    skipped: &'a [&'a str],
}

/// Tests that cannot mean on another host what they mean on the
/// server's: `CONFIG SET rollback on apply error` takes a port on the
/// client's host and expects the server to fail to listen on it; a
/// native server is another host, listens, and the suite's next units
/// find it on the wrong port.
const NOT_ON_ANOTHER_HOST: &[&str] = &["CONFIG SET rollback on apply error"];

/// Runs the suite against `target`.
fn run_suite(source: &Path, target: &Target) -> Outcome {
    let Target {
        label,
        namespace,
        host,
        port,
        base_port,
        skipped,
    } = *target;
    let dir = suite_dir(source, label);
    let mut command = match namespace {
        Some(namespace) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", namespace, "tclsh"]);
            command
        }
        None => Command::new("tclsh"),
    };
    command
        .arg("tests/test_helper.tcl")
        .args(["--host", host, "--port", &port.to_string()])
        .args(["--timeout", "600"])
        .args(["--baseport", &base_port.to_string(), "--portcount", "100"])
        .current_dir(&dir);
    for tag in EXCLUDED_TAGS {
        command.args(["--tags", &format!("-{tag}")]);
    }
    for test in skipped {
        command.args(["--skiptest", test]);
    }
    for unit in units() {
        command.args(["--single", unit]);
    }
    let limit = if units().len() == UNITS.len() {
        SUITE_LIMIT
    } else {
        ALL_SUITE_LIMIT
    };
    let finished = run_bounded(&mut command, limit);
    let _ = std::fs::remove_dir_all(&dir);
    let outcome = parse(&format!("{}{}", finished.stdout, finished.stderr));
    eprintln!(
        "{label}: {} passed, {} failed{}",
        outcome.passed.len(),
        outcome.failed.len(),
        if outcome.exception.is_some() {
            ", stopped by an exception"
        } else {
            ""
        }
    );
    outcome
}

/// A Redis server process, killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `server` on 127.0.0.1:`port` without persistence, once it answers;
/// checked to be this process (`INFO server`'s `process_id`), so that a
/// server that could not bind never leaves the suite testing another.
fn start_process(server: &Path, port: u16) -> Process {
    let child = Command::new(server)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("{} starts: {error}", server.display()));
    let mut process = Process(child);
    for _ in 0..600 {
        if let Ok(Some(status)) = process.0.try_wait() {
            panic!("{} on port {port} ended ({status})", server.display());
        }
        let info = run_bounded(
            Command::new("redis-cli").args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "INFO",
                "server",
            ]),
            Duration::from_secs(10),
        );
        if let Some(pid) = info
            .stdout
            .lines()
            .find_map(|line| line.trim().strip_prefix("process_id:"))
        {
            assert_eq!(
                pid,
                process.0.id().to_string(),
                "port {port} is served by another process than {}",
                server.display()
            );
            return process;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "{} answered nothing on port {port} within a minute",
        server.display()
    );
}

/// The tests `docs/redis-tests.md` lists as passing on stock and not on
/// ours, each with where it fails: the items of its list, each
/// "- `NAME` (hosted|native|both): reason".
fn documented_differences() -> Vec<(String, String)> {
    let doc =
        std::fs::read_to_string(root().join("docs/redis-tests.md")).expect("docs/redis-tests.md");
    let Some((_, list)) = doc.split_once("<!-- differences -->") else {
        panic!("docs/redis-tests.md has no <!-- differences --> list");
    };
    list.lines()
        .filter_map(|line| line.strip_prefix("- `"))
        .filter_map(|rest| {
            let (name, rest) = rest.split_once('`')?;
            let (_, rest) = rest.split_once('(')?;
            let (where_, _) = rest.split_once(')')?;
            Some((name.to_owned(), where_.to_owned()))
        })
        .collect()
}

/// Checks `ours` (`label`: hosted or native) against `stock`: every
/// stock pass that is not ours is documented for `label`.
fn compare(label: &str, stock: &Outcome, ours: &Outcome, documented: &[(String, String)]) {
    if !ours.failed.is_empty() {
        eprintln!("{label}'s failures:\n{}", failures(&ours.output));
    }
    assert!(
        ours.exception.is_none(),
        "{label}: the suite stopped: {}",
        ours.exception.as_deref().unwrap_or_default()
    );
    let here: BTreeSet<&str> = documented
        .iter()
        .filter(|(_, where_)| where_ == label || where_ == "both")
        .map(|(name, _)| name.as_str())
        .collect();
    let undocumented: Vec<&String> = stock
        .passed
        .difference(&ours.passed)
        .filter(|name| !here.contains(name.as_str()))
        .collect();
    for name in here
        .iter()
        .filter(|name| stock.passed.contains(**name) && ours.passed.contains(**name))
    {
        eprintln!("{label}: `{name}` passed this time (docs/redis-tests.md lists it: once it always passes, take it off)");
    }
    assert!(
        undocumented.is_empty(),
        "{label}: {} tests pass on stock Redis and not on ours, and docs/redis-tests.md does not say why:\n{}",
        undocumented.len(),
        undocumented
            .iter()
            .map(|name| format!("- `{name}`"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}

/// The failure reports in a suite's output (each `[err]` line and the
/// line after it).
fn failures(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, line)| line.starts_with("[err]"))
        .flat_map(|(index, _)| lines[index..(index + 2).min(lines.len())].iter())
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tool the suite needs, or the reason to skip.
fn need_tools(tools: &[&str]) -> Result<(), String> {
    let paths = std::env::var_os("PATH").unwrap_or_default();
    match tools
        .iter()
        .find(|tool| !std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
    {
        Some(tool) => Err(format!("no {tool}")),
        None => Ok(()),
    }
}

#[test]
fn redis_own_suite_passes_on_ours_as_on_stock_hosted_and_native() {
    let name = ebb_testbed::function_name!();
    if let Err(reason) = need_tools(&["tclsh", "redis-cli"]) {
        ebb_testbed::skip(name, &reason);
        return;
    }
    let tools = ["apt-get", "dpkg-source", "gcc", "make"];
    let ours = match c_support::build("redis", &tools, PREPARE_LIMIT) {
        Ok((_, printed)) => printed,
        Err(reason) => {
            ebb_testbed::skip(name, &reason);
            return;
        }
    };
    let ours_server = line_value(&ours, "server ");
    let stock = match c_support::build("redis-stock", &tools, PREPARE_LIMIT) {
        Ok((_, printed)) => printed,
        Err(reason) => {
            ebb_testbed::skip(name, &reason);
            return;
        }
    };
    let stock_server = line_value(&stock, "stock-server ");
    let source = line_value(&stock, "source ");
    let documented = documented_differences();

    // Stock and ours hosted, side by side.
    let stock_port = native_support::free_port();
    let hosted_port = loop {
        let port = native_support::free_port();
        if port != stock_port {
            break port;
        }
    };
    let stock_process = start_process(&stock_server, stock_port);
    let hosted_process = start_process(&ours_server, hosted_port);
    let (stock_outcome, hosted_outcome) = std::thread::scope(|scope| {
        let stock = scope.spawn(|| run_suite(&source, &local("stock", stock_port, 21111)));
        let hosted = scope.spawn(|| run_suite(&source, &local("hosted", hosted_port, 23111)));
        (
            stock.join().expect("the stock suite"),
            hosted.join().expect("the hosted suite"),
        )
    });
    drop((stock_process, hosted_process));
    assert!(
        stock_outcome.exception.is_none() && !stock_outcome.passed.is_empty(),
        "the suite against stock Redis: {}",
        stock_outcome
            .exception
            .as_deref()
            .unwrap_or("nothing passed")
    );
    compare("hosted", &stock_outcome, &hosted_outcome, &documented);

    // Native, over a TAP device in the launcher's namespace.
    let needs = [Need::Root, Need::Tun, Need::Ip, Need::Qemu];
    if let Err(skip) = ebb_testbed::require(&needs) {
        ebb_testbed::skip(name, &format!("natively: {}", skip.reason));
        return;
    }
    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    // The guest outlives the suite's own limit.
    let guest_limit = if units().len() == UNITS.len() {
        1500
    } else {
        3900
    };
    let guest = native_support::start_native_redis(&["--net", "tap"], guest_limit);
    // The launcher's namespace for `c-program`, the image Redis is in
    // (`ebb-cli`'s tap.rs).
    let namespace = format!("ebb-c-program-{}", guest.pid());
    let native = Target {
        label: "native",
        namespace: Some(&namespace),
        host: GUEST_ADDR,
        port: 6379,
        base_port: 25111,
        skipped: NOT_ON_ANOTHER_HOST,
    };
    let native_outcome = run_suite(&source, &native);
    let _ = run_bounded(
        Command::new("ip").args([
            "netns",
            "exec",
            &namespace,
            // The guest ends with Redis, and nothing closes the client's
            // connection after it.
            "timeout",
            "10",
            "redis-cli",
            "-h",
            GUEST_ADDR,
            "SHUTDOWN",
            "NOSAVE",
        ]),
        Duration::from_secs(60),
    );
    drop(guest);
    compare("native", &stock_outcome, &native_outcome, &documented);
}

/// A suite against a server on 127.0.0.1:`port`.
fn local(label: &str, port: u16, base_port: u16) -> Target<'_> {
    Target {
        label,
        namespace: None,
        host: "127.0.0.1",
        port,
        base_port,
        skipped: &[],
    }
}

/// The rest of the line of `printed` that starts with `prefix`.
fn line_value(printed: &str, prefix: &str) -> PathBuf {
    printed
        .lines()
        .find_map(|line| line.strip_prefix(prefix))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("ebb-cbuild printed no `{prefix}` line:\n{printed}"))
}
