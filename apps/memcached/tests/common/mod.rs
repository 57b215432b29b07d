//! Test harness: start our server and Debian's memcached on free ports, and
//! talk to them request by request.
#![allow(dead_code)]

pub mod binary;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Where Debian's `memcached` package puts the server.
pub const STOCK_MEMCACHED: &str = "/usr/bin/memcached";

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process, killed when dropped.
pub struct Server {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Server {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(program: &str, args: &[&str]) -> Server {
    start_wrapped(&[], program, args)
}

/// Starts `program` through the command `wrapper` (empty: directly), as
/// `wrapper… program -p PORT -l 127.0.0.1 args…`.
fn start_wrapped(wrapper: &[&str], program: &str, args: &[&str]) -> Server {
    let port = free_port();
    let port_text = port.to_string();
    let mut full: Vec<&str> = wrapper.iter().skip(1).copied().collect();
    full.extend_from_slice(&[program, "-p", &port_text, "-l", "127.0.0.1"]);
    full.extend_from_slice(args);
    let (launcher, full) = match wrapper.first() {
        Some(launcher) => (*launcher, &full[..]),
        None => (program, &full[1..]),
    };
    let child = Command::new(launcher)
        .args(full)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {program}: {error} (run the tests through ./ebb test, which installs it)"));
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            // Ready means a real reply, not just an accepted connection.
            stream
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            if stream.write_all(b"version\r\n").is_ok() {
                let mut reply = [0; 64];
                if matches!(stream.read(&mut reply), Ok(n) if n > 0) {
                    return server;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "{program} did not answer on port {port} within 10 s"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Our server, one core unless `args` say otherwise.
pub fn start_ours(args: &[&str]) -> Server {
    let mut full = vec!["-t", "1"];
    full.extend_from_slice(args);
    start(env!("CARGO_BIN_EXE_memcached"), &full)
}

/// Our server, one core unless `args` say otherwise, allowed at most
/// `open_files` file descriptors (`RLIMIT_NOFILE`, set by `prlimit`, which
/// then runs the server in its own process).
pub fn start_ours_with_file_limit(open_files: u32, args: &[&str]) -> Server {
    let limit = format!("--nofile={open_files}");
    let mut full = vec!["-t", "1"];
    full.extend_from_slice(args);
    start_wrapped(
        &["prlimit", &limit, "--"],
        env!("CARGO_BIN_EXE_memcached"),
        &full,
    )
}

/// Our server, one core unless `args` say otherwise, with the environment
/// variable assignments `vars` (`NAME=VALUE`, set by `env`, which then
/// runs the server in its own process).
pub fn start_ours_with_env(vars: &[&str], args: &[&str]) -> Server {
    let mut wrapper = vec!["env"];
    wrapper.extend_from_slice(vars);
    let mut full = vec!["-t", "1"];
    full.extend_from_slice(args);
    start_wrapped(&wrapper, env!("CARGO_BIN_EXE_memcached"), &full)
}

/// Debian's memcached 1.6, one thread, no UDP.
pub fn start_stock(args: &[&str]) -> Server {
    assert!(
        std::path::Path::new(STOCK_MEMCACHED).exists(),
        "{STOCK_MEMCACHED} is missing: run the tests through ./ebb test, which installs Debian's memcached"
    );
    let mut full = vec!["-t", "1", "-U", "0"];
    full.extend_from_slice(args);
    start(STOCK_MEMCACHED, &full)
}

/// A client connection that sends one request at a time and returns
/// exactly that request's reply, however it was split into reads. After
/// each request it sends a sentinel whose reply is known (`mn` in text,
/// NOOP in binary) and reads up to the sentinel's reply.
pub struct Client {
    stream: TcpStream,
}

const TEXT_SENTINEL: &[u8] = b"mn\r\n";
const TEXT_SENTINEL_REPLY: &[u8] = b"MN\r\n";

/// A binary NOOP request with opaque 0xEBB5E771.
pub const BINARY_SENTINEL: [u8; 24] = [
    0x80, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xEB, 0xB5, 0xE7, 0x71, 0, 0, 0, 0, 0, 0, 0, 0,
];

impl Client {
    /// Connects to `server`.
    pub fn connect(server: &Server) -> Client {
        Client::connect_to(server.port)
    }

    /// Connects to port `port` on 127.0.0.1 (a native server's forwarded
    /// port).
    pub fn connect_to(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client { stream }
    }

    fn read_until(&mut self, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
        let mut reply = Vec::new();
        let mut chunk = [0; 65536];
        while !done(&reply) {
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => reply.extend_from_slice(&chunk[..n]),
                Err(error) => panic!(
                    "reading a reply: {error}; so far: {:?}",
                    String::from_utf8_lossy(&reply)
                ),
            }
        }
        reply
    }

    /// Sends a text request (with its data block, if any) and returns its
    /// whole reply, possibly empty (noreply). If the server closed the
    /// connection, returns what it sent before closing.
    pub fn text(&mut self, request: &[u8]) -> Vec<u8> {
        self.stream.write_all(request).unwrap();
        let _ = self.stream.write_all(TEXT_SENTINEL);
        let mut reply = self.read_until(|reply| reply.ends_with(TEXT_SENTINEL_REPLY));
        if reply.ends_with(TEXT_SENTINEL_REPLY) {
            reply.truncate(reply.len() - TEXT_SENTINEL_REPLY.len());
        }
        reply
    }

    /// Sends a text request alone (no sentinel, so that nothing else is in
    /// flight while the server answers it) and returns its reply, which
    /// must end with `last_line`.
    pub fn text_alone(&mut self, request: &[u8], last_line: &[u8]) -> Vec<u8> {
        self.stream.write_all(request).unwrap();
        self.read_until(|reply| reply.ends_with(last_line))
    }

    /// Sends a binary request and returns its whole reply (the responses
    /// before the sentinel's).
    pub fn binary(&mut self, request: &[u8]) -> Vec<u8> {
        self.stream.write_all(request).unwrap();
        let _ = self.stream.write_all(&BINARY_SENTINEL);
        let mut reply = self.read_until(|reply| reply.len() >= 24 && sentinel_at_end(reply));
        if sentinel_at_end(&reply) {
            reply.truncate(reply.len() - 24);
        }
        reply
    }

    /// Sends raw bytes without a sentinel.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads whatever arrives until the server closes or `timeout` passes.
    pub fn read_to_close(&mut self, timeout: Duration) -> (Vec<u8>, bool) {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let mut reply = Vec::new();
        let mut chunk = [0; 65536];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return (reply, true),
                Ok(n) => reply.extend_from_slice(&chunk[..n]),
                Err(_) => return (reply, false),
            }
        }
    }
}

fn sentinel_at_end(reply: &[u8]) -> bool {
    // A NOOP response: magic 0x81, opcode 0x0a, our opaque.
    let Some(tail) = reply.len().checked_sub(24).map(|start| &reply[start..]) else {
        return false;
    };
    tail[0] == 0x81 && tail[1] == 0x0a && tail[12..16] == BINARY_SENTINEL[12..16]
}
