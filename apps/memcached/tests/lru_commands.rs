//! `lru_crawler` and `lru` (issue 15, defect 11): accepted with memcached
//! 1.6.18's argument checks and replies where the store honours them
//! (`metadump` lists the items, `crawl` frees the dead ones), refused by
//! name where it cannot (see `src/protocol/text/lru.rs`).

mod common;

use common::{start_ours, start_stock, Client, Server};

/// Sends `request` alone and returns its reply as text. Not with a
/// sentinel: 1.6.18 reads nothing more on a connection until its metadump
/// is done. A reply ends at its first `\r\n` (metadump's item lines end
/// in `\n` alone) except for `get` and `stats`, which end with `END`.
fn ask(client: &mut Client, request: &str) -> String {
    let last_line: &[u8] = if request.starts_with("get") || request.starts_with("stats") {
        b"END\r\n"
    } else {
        b"\r\n"
    };
    String::from_utf8(client.text_alone(request.as_bytes(), last_line)).expect("a text reply")
}

/// Commands both servers answer the same way, byte for byte.
const SAME: &[&str] = &[
    "lru_crawler\r\n",
    "lru_crawler bogus\r\n",
    "lru_crawler crawl\r\n",
    "lru_crawler crawl all\r\n",
    "lru_crawler crawl 1\r\n",
    "lru_crawler crawl 1,2\r\n",
    "lru_crawler crawl 63\r\n",
    "lru_crawler crawl 0\r\n",
    "lru_crawler crawl 64\r\n",
    "lru_crawler crawl x\r\n",
    "lru_crawler crawl 1,x\r\n",
    "lru_crawler crawl all x\r\n",
    "lru_crawler crawl all noreply\r\n",
    "lru_crawler metadump\r\n",
    "lru_crawler metadump 99\r\n",
    "lru_crawler metadump 0\r\n",
    "lru_crawler metadump all x\r\n",
    "lru_crawler metadump 2\r\n",
    "lru_crawler sleep x\r\n",
    "lru_crawler sleep -1\r\n",
    "lru_crawler sleep 2000000\r\n",
    "lru_crawler tocrawl 10\r\n",
    "lru_crawler tocrawl 0\r\n",
    "lru_crawler tocrawl x\r\n",
    "lru_crawler enable\r\n",
    "lru_crawler disable\r\n",
    "lru_crawler disable\r\n",
    "lru_crawler crawl all\r\n",
    "lru_crawler metadump all\r\n",
    "lru_crawler enable\r\n",
    "lru_crawler enable\r\n",
    "lru mode flat\r\n",
    "lru mode bogus\r\n",
    "lru mode\r\n",
    "lru flat\r\n",
    "lru\r\n",
    "lru bogus 1\r\n",
    "lru temp_ttl x\r\n",
    "lru temp_ttl -1\r\n",
    "lru tune 50 50 2 2\r\n",
    "lru tune x 1 2 2\r\n",
    "version\r\n",
];

#[test]
fn lru_crawler_and_lru_replies_match_stock_memcached() {
    let ours = start_ours(&[]);
    let stock = start_stock(&["-u", "root"]);
    let (mut ours, mut stock) = (Client::connect(&ours), Client::connect(&stock));
    for request in SAME {
        let expected = ask_when_idle(&mut stock, request);
        let expected = expected.replace("VERSION 1.6.18", "VERSION");
        let got = ask(&mut ours, request).replace("VERSION 1.6.18", "VERSION");
        assert_eq!(got, expected, "{request:?}");
    }
}

/// Stock memcached's reply to `request` once its crawler is idle. Its
/// crawler is a thread of its own, so two of its replies are a matter of
/// timing that ours, which crawls within the request, never shows:
/// - a crawl or metadump asked for while the previous one still runs is
///   answered `BUSY currently processing crawler request` (memcached
///   1.6.18 `proto_text.c`, `process_lru_crawler_command`);
/// - `lru_crawler disable` answers `OK` as soon as it has asked the thread
///   to stop (`stop_item_crawler_thread(CRAWLER_NOWAIT)`), but only the
///   thread, as it exits, sets `settings.lru_crawler = false`
///   (`crawler.c`, end of `item_crawler_thread`). A crawl asked for in
///   between passes the "disabled" check, fails to start and is answered
///   `ERROR an unknown error happened` (`lru_crawler_crawl`'s
///   `CRAWLER_ERROR`). CI saw this once.
///
/// Both are transient and the requests idempotent, so either is asked
/// again (bounded); a reply that stays transient is returned as it is and
/// fails the comparison with its text.
fn ask_when_idle(stock: &mut Client, request: &str) -> String {
    const TRANSIENT: [&str; 2] = ["BUSY ", "ERROR an unknown error happened"];
    let mut reply = ask(stock, request);
    for _ in 0..100 {
        if !TRANSIENT.iter().any(|prefix| reply.starts_with(prefix)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        reply = ask(stock, request);
    }
    reply
}

#[test]
fn what_the_store_cannot_honour_is_refused_by_name() {
    let server = start_ours(&[]);
    let mut client = Client::connect(&server);
    let refusals = [
        (
            "lru_crawler sleep 100\r\n",
            "SERVER_ERROR lru_crawler sleep not supported\r\n",
        ),
        (
            "lru mode segmented\r\n",
            "SERVER_ERROR lru mode segmented not supported\r\n",
        ),
        (
            "lru temp_ttl 10\r\n",
            "SERVER_ERROR lru temp_ttl not supported\r\n",
        ),
        (
            "lru tune 10 20 2 2\r\n",
            "SERVER_ERROR lru tune not supported\r\n",
        ),
    ];
    for (request, reply) in refusals {
        assert_eq!(ask(&mut client, request), reply, "{request:?}");
    }
}

/// `key=k exp=… la=… cas=… fetch=… cls=… size=…` with the times, CAS and
/// size (which differ between the servers) replaced by their names.
fn normalize_dump(dump: &str) -> Vec<String> {
    let mut lines: Vec<String> = dump
        .lines()
        .map(|line| {
            line.split(' ')
                .map(|field| match field.split_once('=') {
                    Some(("exp", "-1")) => "exp=-1".to_string(),
                    Some((name @ ("exp" | "la" | "cas" | "size"), _)) => format!("{name}=_"),
                    _ => field.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    lines.sort();
    lines
}

fn dump_after_writes(server: &Server) -> Vec<String> {
    let mut client = Client::connect(server);
    assert_eq!(ask(&mut client, "set k 5 100 3\r\nabc\r\n"), "STORED\r\n");
    assert_eq!(ask(&mut client, "set a%b 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert_eq!(
        ask(&mut client, "get k\r\n"),
        "VALUE k 5 3\r\nabc\r\nEND\r\n"
    );
    normalize_dump(&ask(&mut client, "lru_crawler metadump all\r\n"))
}

#[test]
fn metadump_lists_the_items_as_stock_memcached_does() {
    let ours = dump_after_writes(&start_ours(&[]));
    let stock = dump_after_writes(&start_stock(&["-u", "root"]));
    assert_eq!(ours, stock);
    assert_eq!(
        ours,
        [
            "END",
            "key=a%25b exp=-1 la=_ cas=_ fetch=no cls=1 size=_",
            "key=k exp=_ la=_ cas=_ fetch=yes cls=1 size=_",
        ]
    );
}

/// The `curr_items` of `stats`.
fn current_items(client: &mut Client) -> u64 {
    let text = ask(client, "stats\r\n");
    let line = text
        .lines()
        .find(|line| line.starts_with("STAT curr_items "))
        .expect("curr_items");
    line["STAT curr_items ".len()..].parse().unwrap()
}

#[test]
fn crawl_frees_flushed_items() {
    let server = start_ours(&[]);
    let mut client = Client::connect(&server);
    for i in 0..100 {
        assert_eq!(
            ask(&mut client, &format!("set k{i} 0 0 1\r\nx\r\n")),
            "STORED\r\n"
        );
    }
    assert_eq!(ask(&mut client, "flush_all\r\n"), "OK\r\n");
    // Flushed items wait for a lookup, an eviction or a crawl to free them.
    assert_eq!(current_items(&mut client), 100);
    assert_eq!(ask(&mut client, "lru_crawler crawl all\r\n"), "OK\r\n");
    assert_eq!(current_items(&mut client), 0);
    assert_eq!(ask(&mut client, "lru_crawler metadump all\r\n"), "END\r\n");
}
