//! Admin commands memcached 1.6.18 accepts and this server does not
//! implement (issue 15, defect 11): each is refused with a
//! `SERVER_ERROR` naming it, not `ERROR` (a command never heard of) and
//! not `OK` (a pretence), and the connection goes on.

mod handler_support;

use handler_support::Harness;

#[test]
fn lru_crawler_lru_and_watch_are_refused_by_name() {
    let harness = Harness::text();
    let replies = harness.run(
        b"lru_crawler metadump all\r\nlru_crawler crawl 1\r\nlru mode flat\r\n\
          lru temp_ttl 10\r\nwatch fetchers mutations\r\nwatch\r\nversion\r\n",
    );
    assert_eq!(
        replies,
        "SERVER_ERROR lru_crawler not supported\r\n\
         SERVER_ERROR lru_crawler not supported\r\n\
         SERVER_ERROR lru not supported\r\n\
         SERVER_ERROR lru not supported\r\n\
         SERVER_ERROR watch not supported\r\n\
         SERVER_ERROR watch not supported\r\n\
         VERSION 1.6.18\r\n"
    );
}

#[test]
fn stats_detail_on_is_refused_and_off_and_dump_answer() {
    let harness = Harness::text();
    let replies = harness.run(b"stats detail on\r\nstats detail off\r\nstats detail dump\r\n");
    assert_eq!(
        replies,
        "SERVER_ERROR stats detail not supported\r\nOK\r\nEND\r\n"
    );
}
