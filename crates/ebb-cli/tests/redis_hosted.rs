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
//! Needs apt's deb-src entries, gcc and make (the build) and `redis-cli`
//! (and QEMU natively); without them it is SKIPPED with the reason.

mod c_support;
mod native_support;

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use ebb_testbed::child::run_bounded;
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

/// `redis-cli -p PORT ARGS`: its output, trimmed.
fn cli(port: u16, args: &[&str]) -> String {
    let finished = run_bounded(
        Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
        CLI_LIMIT,
    );
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
fn wait_for_pong(port: u16, server: &mut Server) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let finished = run_bounded(
            Command::new("redis-cli").args(["-h", "127.0.0.1", "-p", &port.to_string(), "PING"]),
            CLI_LIMIT,
        );
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
        match wait_for_pong(port, &mut server) {
            Ok(()) => return (server, port),
            Err(log) if log.contains("Address already in use") => {
                let _ = std::fs::remove_file(&server.log);
            }
            Err(log) => panic!("redis-server ended before it answered {log}"),
        }
    }
    panic!("three free ports were taken before redis-server could bind one");
}

/// The must-show commands against the server on `port`: PING, SET, GET,
/// INCR, LPUSH/LRANGE, EXPIRE/TTL/PEXPIRE, a pipeline of 10,000 SETs,
/// and BGSAVE's error (no fork) with the server going on.
fn serves_the_commands(port: u16) {
    assert_eq!(cli(port, &["PING"]), "PONG");
    assert_eq!(cli(port, &["SET", "greeting", "hello"]), "OK");
    assert_eq!(cli(port, &["GET", "greeting"]), "hello");
    for expected in ["1", "2", "3"] {
        assert_eq!(cli(port, &["INCR", "counter"]), expected);
    }
    assert_eq!(cli(port, &["LPUSH", "list", "a", "b", "c"]), "3");
    assert_eq!(cli(port, &["LRANGE", "list", "0", "-1"]), "c\nb\na");
    assert_eq!(cli(port, &["EXPIRE", "greeting", "100"]), "1");
    let ttl = cli(port, &["TTL", "greeting"]);
    assert!(
        ttl.parse::<i64>().is_ok_and(|ttl| (1..=100).contains(&ttl)),
        "TTL {ttl}"
    );
    assert_eq!(cli(port, &["PEXPIRE", "counter", "1"]), "1");
    thread::sleep(Duration::from_millis(50));
    assert_eq!(cli(port, &["EXISTS", "counter"]), "0", "an expired key");

    // A pipeline of 10,000 SETs, every one answered.
    let commands =
        std::env::temp_dir().join(format!("ebb-redis-pipeline-{}-{port}", std::process::id()));
    std::fs::write(&commands, pipeline(PIPELINED)).expect("the pipeline's file");
    let piped = run_bounded(
        Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "--pipe"])
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
    assert_eq!(cli(port, &["GET", "key:9999"]), "value-9999");
    assert_eq!(cli(port, &["DBSIZE"]), (PIPELINED + 2).to_string());

    // BGSAVE needs fork: Redis's own error, and the server goes on.
    let bgsave = cli(port, &["BGSAVE"]);
    assert!(bgsave.starts_with("ERR"), "BGSAVE: {bgsave}");
    assert_eq!(cli(port, &["PING"]), "PONG");
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

    let (mut server, port) = start_serving(&server_path);
    serves_the_commands(port);

    // SIGTERM: Redis's handler schedules the shutdown and returns.
    let pid = server.child.id().to_string();
    let killed = run_bounded(Command::new("kill").args(["-TERM", &pid]), CLI_LIMIT);
    assert!(killed.status.success(), "kill -TERM: {}", killed.stderr);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("the server's status") {
            break status;
        }
        assert!(
            started.elapsed() < STOP_LIMIT,
            "redis-server still runs {STOP_LIMIT:?} after SIGTERM"
        );
        thread::sleep(Duration::from_millis(50));
    };
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
    serves_the_commands(port);
    // `--save ""` crossed the kernel command line as one empty argument.
    assert_eq!(cli(port, &["CONFIG", "GET", "save"]), "save");
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
