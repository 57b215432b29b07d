//! Admin commands memcached 1.6.18 accepts and this server does not
//! implement (issue 15, defect 11): each is refused with a
//! `SERVER_ERROR` naming it, not `ERROR` (a command never heard of) and
//! not `OK` (a pretence), and the connection goes on. `watch` is
//! implemented for its `fetchers` and `mutations` streams (`tests/watch.rs`),
//! `lru_crawler` and `lru` as far as the store can honour them
//! (`tests/lru_commands.rs`); the rest of them are refused the same way.

mod handler_support;

use handler_support::Harness;

#[test]
fn watch_takes_fetchers_and_mutations_and_refuses_other_streams() {
    let harness = Harness::text();
    let replies = harness.run(
        b"watch evictions\r\nwatch fetchers sysevents\r\nwatch bogus\r\n\
          watch fetchers mutations\r\nwatch\r\n",
    );
    assert_eq!(
        replies,
        "SERVER_ERROR watch stream not supported\r\n\
         SERVER_ERROR watch stream not supported\r\n\
         ERROR\r\n\
         OK\r\n\
         OK\r\n"
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
