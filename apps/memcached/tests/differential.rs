//! Differential tests: scripted sessions of text and meta requests sent to
//! Debian's memcached 1.6.18 and to ours, replies compared byte for byte
//! after normalising what legitimately differs:
//!
//! * CAS values become `#N`, N numbering each server's distinct values in
//!   order of appearance, so the relationships between them (same item,
//!   new value after a change) are still compared;
//! * TTLs and ages (`t`, `l`, `exp=`, `la=`) may differ by one second
//!   (the servers' clocks tick at different moments);
//! * `stats` values that describe the process (pid, times, memory, buffer
//!   and connection bookkeeping) are replaced by `*`.
//!
//! Scripts live in `tests/data/*.txt`, one request per line with C
//! escapes (`\r`, `\n`, `\t`, `\0`, `\\`) and expansions: `{N*c}` (c
//! repeated N times), `{now+S}` (Unix time in S seconds), `{cas:last}`
//! (the last CAS value this server sent) and `{cas:N}` (the value shown
//! as `#N`). `#sleep SECS` pauses; other lines starting with `#` are
//! comments.

mod common;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{start_ours, start_stock, Client, Server};

/// Both servers run with the smallest item size memcached allows with
/// its default slab settings adjusted to it (`-I 1k`).
const STOCK_ARGS: &[&str] = &["-u", "root", "-I", "1k", "-o", "slab_chunk_max=1024"];
const OUR_ARGS: &[&str] = &["-I", "1k"];

/// One step of a script.
enum Step {
    Request(String),
    Sleep(Duration),
}

fn load(name: &str) -> Vec<Step> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    text.lines()
        .filter(|line| !line.is_empty())
        .filter_map(|line| {
            if let Some(secs) = line.strip_prefix("#sleep ") {
                Some(Step::Sleep(Duration::from_secs_f64(
                    secs.trim().parse().unwrap(),
                )))
            } else if line.starts_with('#') {
                None
            } else {
                Some(Step::Request(line.to_string()))
            }
        })
        .collect()
}

/// Per-server state of the normalisation.
#[derive(Default)]
struct CasMap {
    ordinal: HashMap<u64, usize>,
    values: Vec<u64>,
    last: u64,
}

impl CasMap {
    fn name(&mut self, cas: u64) -> String {
        self.last = cas;
        let next = self.values.len() + 1;
        let n = *self.ordinal.entry(cas).or_insert(next);
        if n == next {
            self.values.push(cas);
        }
        format!("#{n}")
    }
}

fn unescape(line: &str, cas: &CasMap) -> Vec<u8> {
    let expanded = expand(line, cas);
    let mut out = Vec::with_capacity(expanded.len());
    let mut chars = expanded.bytes();
    while let Some(b) = chars.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        out.push(match chars.next() {
            Some(b'r') => b'\r',
            Some(b'n') => b'\n',
            Some(b't') => b'\t',
            Some(b'0') => 0,
            Some(other) => other,
            None => b'\\',
        });
    }
    out
}

fn expand(line: &str, cas: &CasMap) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .map(|i| open + i)
            .expect("unclosed {");
        let inner = &rest[open + 1..close];
        if let Some(secs) = inner.strip_prefix("now+") {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs();
            write!(out, "{}", now + secs.parse::<u64>().unwrap()).unwrap();
        } else if inner == "cas:last" {
            write!(out, "{}", cas.last).unwrap();
        } else if let Some(n) = inner.strip_prefix("cas:") {
            let n: usize = n.parse().unwrap();
            write!(out, "{}", cas.values.get(n - 1).copied().unwrap_or(0)).unwrap();
        } else if let Some((count, c)) = inner.split_once('*') {
            out.push_str(&c.repeat(count.parse().unwrap()));
        } else {
            panic!("unknown expansion {{{inner}}}");
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// `stats` values that describe the process rather than the protocol.
const VOLATILE_STATS: &[&str] = &[
    "pid",
    "uptime",
    "time",
    "libevent",
    "rusage_user",
    "rusage_system",
    "curr_connections",
    "total_connections",
    "connection_structures",
    "response_obj_oom",
    "response_obj_count",
    "response_obj_bytes",
    "read_buf_count",
    "read_buf_bytes",
    "read_buf_bytes_free",
    "read_buf_oom",
    "reserved_fds",
    "bytes_read",
    "bytes_written",
    "bytes",
    "hash_power_level",
    "hash_bytes",
    "lru_crawler_starts",
    "lru_maintainer_juggles",
    "crawler_items_checked",
    "lrutail_reflocked",
    "moves_to_cold",
    "moves_to_warm",
    "moves_within_lru",
    "cmd_meta",
    // Our store counts every replacement of an item, including incr/decr
    // in place, which memcached does not.
    "total_items",
];

/// Replaces CAS values in `reply` by their ordinals.
fn normalise(reply: &[u8], cas: &mut CasMap) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split("\r\n").enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        let words: Vec<&str> = line.split(' ').collect();
        let normalised: Vec<String> = match words.first().copied() {
            Some("VALUE") if words.len() == 5 => {
                let mut w: Vec<String> = words.iter().map(|w| w.to_string()).collect();
                if let Ok(value) = words[4].parse() {
                    w[4] = cas.name(value);
                }
                w
            }
            Some("HD" | "VA" | "EN" | "NF" | "NS" | "EX") => words
                .iter()
                .map(|w| match w.strip_prefix('c').and_then(|n| n.parse().ok()) {
                    Some(value) => format!("c{}", cas.name(value)),
                    None => w.to_string(),
                })
                .collect(),
            Some("ME") => words
                .iter()
                .map(
                    |w| match w.strip_prefix("cas=").and_then(|n| n.parse().ok()) {
                        Some(value) => format!("cas={}", cas.name(value)),
                        None => w.to_string(),
                    },
                )
                .collect(),
            Some("STAT") if words.len() == 3 && VOLATILE_STATS.contains(&words[1]) => {
                vec!["STAT".into(), words[1].into(), "*".into()]
            }
            _ => words.iter().map(|w| w.to_string()).collect(),
        };
        out.push_str(&normalised.join(" "));
    }
    out
}

/// Runs `steps` against `server`; returns each request and its
/// normalised reply.
fn run(server: &Server, steps: &[Step]) -> Vec<(String, String)> {
    let mut client = Client::connect(server);
    let mut cas = CasMap::default();
    let mut transcript = Vec::new();
    for step in steps {
        match step {
            Step::Sleep(duration) => thread::sleep(*duration),
            Step::Request(line) => {
                let request = unescape(line, &cas);
                let reply = client.text(&request);
                transcript.push((line.clone(), normalise(&reply, &mut cas)));
            }
        }
    }
    transcript
}

/// Numbers that may differ by one second between the servers.
fn fuzzy_equal(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (wa, wb): (Vec<&str>, Vec<&str>) = (
        a.split([' ', '\n']).collect(),
        b.split([' ', '\n']).collect(),
    );
    wa.len() == wb.len()
        && wa.iter().zip(&wb).all(|(x, y)| {
            x == y
                || ["t", "l", "exp=", "la="].iter().any(|prefix| {
                    let parse = |w: &str| {
                        w.strip_prefix(prefix)
                            .and_then(|n| n.trim_end_matches('\r').parse::<i64>().ok())
                    };
                    matches!((parse(x), parse(y)), (Some(p), Some(q)) if (p - q).abs() <= 1)
                })
        })
}

fn differential(script: &str) {
    let steps = load(script);
    let stock = start_stock(STOCK_ARGS);
    let ours = start_ours(OUR_ARGS);
    let (expected, actual) = thread::scope(|scope| {
        let stock_run = scope.spawn(|| run(&stock, &steps));
        let ours_run = scope.spawn(|| run(&ours, &steps));
        (stock_run.join().unwrap(), ours_run.join().unwrap())
    });
    let mut report = String::new();
    let mut mismatches = 0;
    for (i, ((request, want), (_, got))) in expected.iter().zip(&actual).enumerate() {
        if !fuzzy_equal(want, got) {
            mismatches += 1;
            writeln!(
                report,
                "#{} {request}\n  memcached: {want:?}\n  ours:      {got:?}",
                i + 1
            )
            .unwrap();
        }
    }
    if std::env::var_os("DIFFERENTIAL_TRANSCRIPT").is_some() {
        for (request, reply) in &expected {
            eprintln!("{request}  =>  {reply:?}");
        }
    }
    assert!(
        mismatches == 0,
        "{script}: {mismatches} of {} replies differ from memcached 1.6.18:\n{report}",
        expected.len()
    );
}

#[test]
fn text_storage_retrieval_and_arithmetic() {
    differential("text_basic.txt");
}

#[test]
fn text_errors_and_item_size_limit() {
    differential("text_errors.txt");
}

#[test]
fn meta_commands() {
    differential("meta.txt");
}

#[test]
fn expiry_and_flush_all() {
    differential("expiry.txt");
}

#[test]
fn stats_counters_match() {
    // A fresh pair of servers, so the counters start equal.
    let steps: Vec<Step> = [
        "set a 0 0 1\\r\\n1\\r\\n",
        "get a b a\\r\\n",
        "gets a\\r\\n",
        "incr a 5\\r\\n",
        "decr b 1\\r\\n",
        "delete a\\r\\n",
        "delete a\\r\\n",
        "touch b 10\\r\\n",
        "flush_all\\r\\n",
        "cas a 0 0 1 1\\r\\nx\\r\\n",
        "stats\\r\\n",
        "stats settings extra\\r\\n",
        "stats detail on\\r\\n",
    ]
    .iter()
    .map(|line| Step::Request(line.to_string()))
    .collect();
    let stock = start_stock(STOCK_ARGS);
    let ours = start_ours(OUR_ARGS);
    let expected = run(&stock, &steps[..11]);
    let actual = run(&ours, &steps[..11]);
    for ((request, want), (_, got)) in expected.iter().zip(&actual) {
        assert!(
            fuzzy_equal(want, got),
            "{request}\n  memcached: {want:?}\n  ours:      {got:?}"
        );
    }
}

#[test]
fn a_line_too_long_closes_the_connection_as_memcached_does() {
    let stock = start_stock(STOCK_ARGS);
    let ours = start_ours(OUR_ARGS);
    for server in [&stock, &ours] {
        let mut client = Client::connect(server);
        client.send_raw(&[b'x'; 4096]);
        let (reply, closed) = client.read_to_close(Duration::from_secs(3));
        assert!(
            reply.is_empty() && closed,
            "port {}: {reply:?} closed={closed}",
            server.port
        );
        // A large multiget line is kept, and answered once complete.
        let mut client = Client::connect(server);
        let mut line = b"get ".to_vec();
        line.extend(std::iter::repeat_n(&b"key "[..], 2000).flatten());
        client.send_raw(&line);
        thread::sleep(Duration::from_millis(100));
        assert_eq!(client.text(b"\r\n"), b"END\r\n", "port {}", server.port);
        // quit closes without a reply.
        let mut client = Client::connect(server);
        client.send_raw(b"quit\r\n");
        assert_eq!(
            client.read_to_close(Duration::from_secs(3)),
            (Vec::new(), true)
        );
    }
}
