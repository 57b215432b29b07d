//! Issue 19, its first step: Redis 7.0.15, unchanged (Debian's `redis`
//! source package, 0 changed lines), built by its own Makefile with
//! Ebbflow's musl and linked with the hosted POSIX personality, serves
//! the real client, `redis-cli` (Debian's `redis-tools`), on 127.0.0.1:
//! PING, SET, GET, INCR, LPUSH/LRANGE, EXPIRE, a pipeline of 10,000
//! commands; BGSAVE, which needs fork (never served), gets Redis's own
//! error and the server goes on; SIGTERM runs Redis's handler, which
//! returns through musl's `__restore_rt` (the personality's
//! `rt_sigreturn`), and Redis shuts down cleanly with status 0. Every
//! other call Redis makes is served: the only `ebb-posix:` line is
//! fork's.
//!
//! Natively (`./ebb run redis --native --forward P:6379`), the same
//! build's objects linked into the `c-program` image serve the same
//! commands over Ebbflow's own TCP/IP stack, through QEMU's forwarded
//! port; `SHUTDOWN NOSAVE` ends Redis, and with it the image, with 0.
//!
//! On the user-space stack (`./ebb run redis --userstack`), the same
//! objects linked with `ebb-posix-userstack` serve the same commands over
//! Ebbflow's stack on a TAP device in a namespace; `SHUTDOWN NOSAVE` ends
//! Redis, whose exit closes its connections there.
//!
//! Needs apt's deb-src entries, gcc and make (the build) and `redis-cli`
//! (and QEMU natively; root and /dev/net/tun on the user-space stack);
//! without them it is SKIPPED with the reason.

mod c_support;
mod native_support;

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use ebb_testbed::child::run_bounded;
use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{skip_unless, Need};
use native_support::BOOT;

/// musl, the personality and Redis (two minutes on two cores; cached after
/// the first time).
const PREPARE_LIMIT: Duration = Duration::from_secs(1500);
/// One `redis-cli` call.
const CLI_LIMIT: Duration = Duration::from_secs(60);
/// How long the server may take to answer its first PING.
const START_LIMIT: Duration = Duration::from_secs(60);
/// How long a clean shutdown may take after SIGTERM.
const STOP_LIMIT: Duration = Duration::from_secs(30);
/// Commands sent as one pipeline.
const PIPELINED: usize = 10_000;

/// The server, killed when dropped.
struct Server {
    child: Child,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// `redis-server` on 127.0.0.1:`port`, without persistence, its output
/// in a file.
fn start(server: &Path, port: u16) -> Server {
    let log = std::env::temp_dir().join(format!("ebb-redis-{}-{port}.log", std::process::id()));
    let file = std::fs::File::create(&log).expect("the server's log");
    let child = Command::new(server)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .stdout(file.try_clone().expect("the log, twice"))
        .stderr(file)
        .spawn()
        .expect("redis-server starts");
    Server { child, log }
}

/// Where a server is reached from: 127.0.0.1, or an address inside a
/// network namespace (the user-space stack's).
struct At {
    namespace: Option<String>,
    host: String,
    port: u16,
}

impl At {
    fn loopback(port: u16) -> At {
        At {
            namespace: None,
            host: "127.0.0.1".to_owned(),
            port,
        }
    }

    /// `redis-cli -h HOST -p PORT`, inside the namespace if there is one.
    fn redis_cli(&self) -> Command {
        let mut command = match &self.namespace {
            Some(ns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", ns, "redis-cli"]);
                command
            }
            None => Command::new("redis-cli"),
        };
        command.args(["-h", &self.host, "-p", &self.port.to_string()]);
        command
    }
}

/// `redis-cli ARGS` against `at`: its output, trimmed.
fn cli(at: &At, args: &[&str]) -> String {
    let finished = run_bounded(at.redis_cli().args(args), CLI_LIMIT);
    assert!(
        finished.status.success(),
        "redis-cli {args:?}: {}\n{}{}",
        finished.status,
        finished.stdout,
        finished.stderr
    );
    finished.stdout.trim().to_owned()
}

/// Waits for the first PONG; `Err` with the server's log if it ended
/// first.
fn wait_for_pong(at: &At, server: &mut Server) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let finished = run_bounded(at.redis_cli().arg("PING"), CLI_LIMIT);
        if finished.stdout.trim() == "PONG" {
            return Ok(());
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            let log = std::fs::read_to_string(&server.log).unwrap_or_default();
            return Err(format!("({status})\n{log}"));
        }
        assert!(
            started.elapsed() < START_LIMIT,
            "no PONG within {START_LIMIT:?}"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// The server serving on a port free a moment before; another port if
/// another process took that one meanwhile.
fn start_serving(server_path: &Path) -> (Server, u16) {
    for _ in 0..3 {
        let port = free_port();
        let mut server = start(server_path, port);
        match wait_for_pong(&At::loopback(port), &mut server) {
            Ok(()) => return (server, port),
            Err(log) if log.contains("Address already in use") => {
                let _ = std::fs::remove_file(&server.log);
            }
            Err(log) => panic!("redis-server ended before it answered {log}"),
        }
    }
    panic!("three free ports were taken before redis-server could bind one");
}

/// The must-show commands against the server at `port`: PING, SET, GET,
/// INCR, LPUSH/LRANGE, EXPIRE/TTL/PEXPIRE, a pipeline of 10,000 SETs,
/// and BGSAVE's error (no fork) with the server going on.
fn serves_the_commands(at: &At) {
    assert_eq!(cli(at, &["PING"]), "PONG");
    assert_eq!(cli(at, &["SET", "greeting", "hello"]), "OK");
    assert_eq!(cli(at, &["GET", "greeting"]), "hello");
    for expected in ["1", "2", "3"] {
        assert_eq!(cli(at, &["INCR", "counter"]), expected);
    }
    assert_eq!(cli(at, &["LPUSH", "list", "a", "b", "c"]), "3");
    assert_eq!(cli(at, &["LRANGE", "list", "0", "-1"]), "c\nb\na");
    assert_eq!(cli(at, &["EXPIRE", "greeting", "100"]), "1");
    let ttl = cli(at, &["TTL", "greeting"]);
    assert!(
        ttl.parse::<i64>().is_ok_and(|ttl| (1..=100).contains(&ttl)),
        "TTL {ttl}"
    );
    assert_eq!(cli(at, &["PEXPIRE", "counter", "1"]), "1");
    thread::sleep(Duration::from_millis(50));
    assert_eq!(cli(at, &["EXISTS", "counter"]), "0", "an expired key");

    // A pipeline of 10,000 SETs, every one answered.
    let commands = std::env::temp_dir().join(format!(
        "ebb-redis-pipeline-{}-{}",
        std::process::id(),
        at.port
    ));
    std::fs::write(&commands, pipeline(PIPELINED)).expect("the pipeline's file");
    let piped = run_bounded(
        at.redis_cli()
            .arg("--pipe")
            .stdin(std::fs::File::open(&commands).expect("the pipeline's file")),
        CLI_LIMIT,
    );
    let _ = std::fs::remove_file(&commands);
    assert!(
        piped
            .stdout
            .contains(&format!("errors: 0, replies: {PIPELINED}")),
        "{}{}",
        piped.stdout,
        piped.stderr
    );
    assert_eq!(cli(at, &["GET", "key:9999"]), "value-9999");
    assert_eq!(cli(at, &["DBSIZE"]), (PIPELINED + 2).to_string());

    // BGSAVE needs fork: Redis's own error, and the server goes on.
    let bgsave = cli(at, &["BGSAVE"]);
    assert!(bgsave.starts_with("ERR"), "BGSAVE: {bgsave}");
    assert_eq!(cli(at, &["PING"]), "PONG");
}

/// The server's exit status, within [`STOP_LIMIT`] of `what` asked it to
/// stop.
fn wait_for_exit(server: &mut Server, what: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().expect("the server's status") {
            return status;
        }
        assert!(
            started.elapsed() < STOP_LIMIT,
            "redis-server still runs {STOP_LIMIT:?} after {what}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// The personality's log lines in `text` say fork alone was not served.
fn assert_only_fork_is_unprovided(text: &str) {
    let unprovided: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("ebb-posix:"))
        .collect();
    assert_eq!(
        unprovided,
        ["ebb-posix: system call 57 (fork) is not provided: ENOSYS (said once per call)"],
        "every call but fork is served:\n{text}"
    );
}

/// `count` SET commands in RESP, for `redis-cli --pipe`.
fn pipeline(count: usize) -> Vec<u8> {
    let mut commands = Vec::new();
    for i in 0..count {
        let (key, value) = (format!("key:{i}"), format!("value-{i}"));
        write!(
            commands,
            "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
            key.len(),
            value.len()
        )
        .expect("writing to a Vec");
    }
    commands
}

#[test]
fn hosted_redis_built_unchanged_serves_redis_cli() {
    let tools = ["apt-get", "dpkg-source", "gcc", "make", "redis-cli"];
    let printed = match c_support::build("redis", &tools, PREPARE_LIMIT) {
        Ok((_, printed)) => printed,
        Err(reason) => {
            ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
            return;
        }
    };
    assert!(
        printed
            .lines()
            .any(|line| line == "changed lines against upstream: 0"),
        "Redis is built unchanged:\n{printed}"
    );
    let server_path = printed
        .lines()
        .find_map(|line| line.strip_prefix("server "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("ebb-cbuild names the server:\n{printed}"));

    let (server, port) = start_serving(&server_path);
    serves_the_commands(&At::loopback(port));
    stops_cleanly_on_sigterm(server);
}

/// SIGTERM: Redis's handler schedules the shutdown and returns (through
/// musl's `__restore_rt`, the personality's `rt_sigreturn`); Redis says
/// goodbye and exits 0. Its log names fork alone as not provided.
fn stops_cleanly_on_sigterm(mut server: Server) {
    let pid = server.child.id().to_string();
    let killed = run_bounded(Command::new("kill").args(["-TERM", &pid]), CLI_LIMIT);
    assert!(killed.status.success(), "kill -TERM: {}", killed.stderr);
    let status = wait_for_exit(&mut server, "SIGTERM");
    let log_path = server.log.clone();
    drop(server);
    let log = std::fs::read_to_string(&log_path).expect("the server's log");
    assert_only_fork_is_unprovided(&log);
    assert!(
        log.contains("Can't save in background: fork: Function not implemented"),
        "{log}"
    );
    assert!(
        status.success() && log.contains("Redis is now ready to exit, bye bye..."),
        "a clean shutdown on SIGTERM ({status}):\n{log}"
    );
    let _ = std::fs::remove_file(&log_path);
}

/// The user-space stack (`./ebb run redis --userstack`): the same objects
/// linked with `ebb-posix-userstack` run as a Linux process in a network
/// namespace of the test's own, with Ebbflow's TCP/IP stack on a TAP
/// device at 10.99.0.2; `redis-cli` in the namespace reaches it through
/// the kernel's side of the TAP. Every socket, epoll set, eventfd and
/// pipe Redis makes is Ebbflow's; the rest passes to Linux.
#[test]
fn userstack_redis_serves_redis_cli_on_ebbflows_stack_over_tap() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let tools = ["apt-get", "dpkg-source", "gcc", "make", "redis-cli"];
    let printed = match c_support::build("redis-userstack", &tools, PREPARE_LIMIT) {
        Ok((_, printed)) => printed,
        Err(reason) => {
            ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
            return;
        }
    };
    let server_path = printed
        .lines()
        .find_map(|line| line.strip_prefix("userstack-server "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("ebb-cbuild names the user-space stack's server:\n{printed}"));
    let ns = format!("ebb-redis-test-{}", std::process::id());
    let namespace = NetNamespace::create(&ns).expect("a network namespace");
    let _tap = TapDevice::create(
        &namespace,
        &TapConfig::from_cidr("ebb0", "10.99.0.1/24").expect("an address"),
    )
    .expect("a TAP device");
    let log = std::env::temp_dir().join(format!("ebb-redis-userstack-{}.log", std::process::id()));
    let file = std::fs::File::create(&log).expect("the server's log");
    // `ip netns exec` execs the server: the child is Redis itself.
    let child = Command::new("ip")
        .args(["netns", "exec", &ns])
        .arg(&server_path)
        .args(["--port", "6379", "--protected-mode", "no"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .env("EBB_USERSTACK_TAP", "ebb0")
        .env("EBB_USERSTACK_IP", "10.99.0.2/24")
        .stdout(file.try_clone().expect("the log, twice"))
        .stderr(file)
        .spawn()
        .expect("redis-server starts");
    let mut server = Server { child, log };
    let at = At {
        namespace: Some(ns.clone()),
        host: "10.99.0.2".to_owned(),
        port: 6379,
    };
    if let Err(log) = wait_for_pong(&at, &mut server) {
        panic!("redis-server on the user-space stack ended before it answered {log}");
    }
    serves_the_commands(&at);
    // SHUTDOWN NOSAVE: Redis exits without a reply; redis-cli waits for
    // the connection to close, which it hears only if the program's exit
    // closed its connections on our stack (a FIN over the TAP device);
    // `run_bounded` fails the test if it waits past the limit.
    run_bounded(at.redis_cli().args(["SHUTDOWN", "NOSAVE"]), STOP_LIMIT);
    let status = wait_for_exit(&mut server, "SHUTDOWN NOSAVE");
    let log = std::fs::read_to_string(&server.log).expect("the server's log");
    assert_only_fork_is_unprovided(&log);
    assert!(
        status.success() && log.contains("Redis is now ready to exit, bye bye..."),
        "a clean shutdown ({status}):\n{log}"
    );
}

#[test]
fn native_redis_serves_redis_cli_on_ebbflows_own_stack() {
    skip_unless!(Need::Qemu);
    let tools = ["apt-get", "dpkg-source", "gcc", "make", "redis-cli"];
    if let Err(reason) = c_support::build("redis", &tools, PREPARE_LIMIT) {
        ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
        return;
    }
    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let port = native_support::free_port();
    let guest = native_support::start_native_redis(&["--forward", &format!("{port}:6379")], 900);
    let at = At::loopback(port);
    serves_the_commands(&at);
    // `--save ""` crossed the kernel command line as one empty argument.
    assert_eq!(cli(&at, &["CONFIG", "GET", "save"]), "save");
    // Natively no signal is delivered: Redis's own command ends it.
    let _ = run_bounded(
        Command::new("redis-cli").args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "SHUTDOWN",
            "NOSAVE",
        ]),
        CLI_LIMIT,
    );
    let console = guest.finish();
    assert_only_fork_is_unprovided(&console);
    assert!(
        console.contains("Redis is now ready to exit, bye bye..."),
        "{console}"
    );
}
