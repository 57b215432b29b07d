//! The result of a run: figures, a table for people, flat JSON.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::engine::ThreadStats;
use crate::histogram::Histogram;

/// Achieved below this fraction of offered is warned about.
pub const SHORTFALL: f64 = 0.95;

/// What a run measured. Rates and counts are for the measurement window
/// (after the warm-up) unless named `_total`; latencies are in microseconds.
#[derive(Debug, Clone)]
pub struct Summary {
    /// `closed` or `open`.
    pub mode: &'static str,
    /// `text` or `binary`.
    pub protocol: &'static str,
    /// The server address as given.
    pub server: String,
    /// Generator threads.
    pub threads: usize,
    /// Connections per thread.
    pub connections: usize,
    /// Pipeline depth per connection.
    pub depth: usize,
    /// The workload, in words.
    pub workload: String,
    /// Length of the measurement window (s).
    pub window_s: f64,
    /// Open loop: the requested rate.
    pub target_qps: Option<f64>,
    /// Requests offered per second: scheduled in the window (open loop) or
    /// sent in the window (closed loop).
    pub offered_qps: f64,
    /// Replies per second to requests of the window, received before its
    /// end.
    pub achieved_qps: f64,
    /// Requests offered in the window.
    pub offered: u64,
    /// Requests sent in the window.
    pub sent: u64,
    /// Gets among them.
    pub gets: u64,
    /// Sets among them.
    pub sets: u64,
    /// Replies to requests of the window (what `achieved_qps` counts).
    pub replies: u64,
    /// Gets that hit.
    pub hits: u64,
    /// Gets that missed.
    pub misses: u64,
    /// Sets stored.
    pub stored: u64,
    /// Error replies.
    pub errors: u64,
    /// Every request sent (warm-up, window; preload excluded).
    pub sent_total: u64,
    /// Every reply received (warm-up, window, drain; preload excluded).
    pub replies_total: u64,
    /// Hits among all replies.
    pub hits_total: u64,
    /// Misses among all replies.
    pub misses_total: u64,
    /// Errors among all replies.
    pub errors_total: u64,
    /// Open loop: requests sent more than 1 ms after their scheduled time
    /// (the connections were full or the generator was busy).
    pub late_sends: u64,
    /// Open loop: the largest delay from scheduled to actual send (µs).
    pub max_send_lag_us: f64,
    /// Open loop: requests scheduled in the window and never sent.
    pub unsent_at_end: u64,
    /// Requests of the window still without a reply at its end.
    pub unanswered_at_end: u64,
    /// Requests still without a reply after the drain.
    pub unanswered_after_drain: u64,
    /// Mean latency (µs).
    pub avg_us: f64,
    /// Smallest latency (µs).
    pub min_us: f64,
    /// Median latency (µs).
    pub p50_us: f64,
    /// 90th percentile (µs).
    pub p90_us: f64,
    /// 99th percentile (µs).
    pub p99_us: f64,
    /// 99.9th percentile (µs).
    pub p999_us: f64,
    /// Largest latency (µs).
    pub max_us: f64,
    /// The generator threads' user CPU time in the window (s).
    pub cpu_user_s: f64,
    /// Their system CPU time (s).
    pub cpu_sys_s: f64,
    /// Their CPU use as a percentage of one CPU.
    pub cpu_percent: f64,
    /// Their CPU time per reply (µs).
    pub cpu_us_per_request: f64,
    /// Keys set by the preload (0 without `--preload`).
    pub preload_keys: u64,
    /// Replies to the preload.
    pub preload_replies: u64,
    /// Error replies to the preload.
    pub preload_errors: u64,
    /// Preload wall time (s).
    pub preload_s: f64,
    /// The latency histogram (ns).
    pub histogram: Histogram,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl Summary {
    /// Builds the summary of `cfg`'s run from the merged thread figures.
    pub fn new(cfg: &Config, s: &ThreadStats) -> Self {
        let window = cfg.duration.as_secs_f64();
        let per_sec = |n: u64| n as f64 / window;
        let cpu = s.cpu.total();
        let workload = format!(
            "keys {} B x {} (uniform), values {} B, update {}",
            cfg.key_size, cfg.keys, cfg.value_size, cfg.update
        );
        let h = &s.hist;
        Summary {
            mode: if cfg.is_open_loop() { "open" } else { "closed" },
            protocol: cfg.protocol.name(),
            server: cfg.server.clone(),
            threads: cfg.threads,
            connections: cfg.connections,
            depth: cfg.depth,
            workload,
            window_s: window,
            target_qps: cfg.rate,
            offered_qps: per_sec(s.offered_window),
            achieved_qps: per_sec(s.window.replies),
            offered: s.offered_window,
            sent: s.sent_window,
            gets: s.gets_window,
            sets: s.sets_window,
            replies: s.window.replies,
            hits: s.window.hits,
            misses: s.window.misses,
            stored: s.window.stored,
            errors: s.window.errors,
            sent_total: s.sent_total,
            replies_total: s.total.replies,
            hits_total: s.total.hits,
            misses_total: s.total.misses,
            errors_total: s.total.errors,
            late_sends: s.late,
            max_send_lag_us: us(s.max_lag_ns),
            unsent_at_end: s.unsent_at_end,
            unanswered_at_end: s.unanswered_at_end,
            unanswered_after_drain: s.unanswered_after_drain,
            avg_us: h.mean() / 1000.0,
            min_us: us(h.min()),
            p50_us: us(h.percentile(50.0)),
            p90_us: us(h.percentile(90.0)),
            p99_us: us(h.percentile(99.0)),
            p999_us: us(h.percentile(99.9)),
            max_us: us(h.max()),
            cpu_user_s: s.cpu.user,
            cpu_sys_s: s.cpu.sys,
            cpu_percent: cpu / window * 100.0,
            cpu_us_per_request: if s.window.replies == 0 {
                0.0
            } else {
                cpu * 1e6 / s.window.replies as f64
            },
            preload_keys: s.preload_sent,
            preload_replies: s.preload.replies,
            preload_errors: s.preload.errors,
            preload_s: s.preload_secs,
            histogram: s.hist.clone(),
        }
    }

    /// Whether achieved fell below 95 % of offered.
    pub fn shortfall(&self) -> bool {
        self.achieved_qps < SHORTFALL * self.offered_qps
    }

    /// Things a reader must not miss: a rate shortfall, errors, lost replies.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.shortfall() {
            w.push(format!(
                "ACHIEVED RATE {:.0}/s IS BELOW 95% OF OFFERED {:.0}/s ({:.1}%): the server or \
                 the generator could not keep up; latencies are measured from scheduled send \
                 times and include the queueing",
                self.achieved_qps,
                self.offered_qps,
                100.0 * self.achieved_qps / self.offered_qps.max(f64::MIN_POSITIVE)
            ));
        }
        if self.late_sends > 0 {
            w.push(format!(
                "{} requests were sent more than 1 ms after their scheduled time (max {:.0} µs): \
                 all connections were full (raise --connections or --depth) or the generator \
                 was saturated",
                self.late_sends, self.max_send_lag_us
            ));
        }
        if self.unsent_at_end > 0 {
            w.push(format!(
                "{} scheduled requests were never sent before the end",
                self.unsent_at_end
            ));
        }
        if self.errors_total > 0 || self.preload_errors > 0 {
            w.push(format!(
                "the server answered {} requests with errors ({} in the preload)",
                self.errors_total, self.preload_errors
            ));
        }
        if self.unanswered_after_drain > 0 {
            w.push(format!(
                "{} requests had no reply after the drain",
                self.unanswered_after_drain
            ));
        }
        if self.histogram.overflows() > 0 {
            w.push(format!(
                "{} latencies exceeded 60 s (recorded as 60 s+)",
                self.histogram.overflows()
            ));
        }
        w
    }

    /// The table for people.
    pub fn table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "ebb-loadgen: {} loop, memcached {}, {} thread(s) x {} connection(s) x depth {} -> {}",
            self.mode, self.protocol, self.threads, self.connections, self.depth, self.server
        );
        let _ = writeln!(o, "  workload   {}", self.workload);
        let _ = writeln!(o, "  window     {:.2} s after warm-up", self.window_s);
        if let Some(t) = self.target_qps {
            let _ = writeln!(o, "  target     {t:>12.0} req/s");
        }
        let _ = writeln!(o, "  offered    {:>12.0} req/s", self.offered_qps);
        let _ = writeln!(
            o,
            "  achieved   {:>12.0} req/s ({:.1}% of offered)",
            self.achieved_qps,
            100.0 * self.achieved_qps / self.offered_qps.max(f64::MIN_POSITIVE)
        );
        let _ = writeln!(
            o,
            "  latency    avg {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1} µs",
            self.avg_us, self.p50_us, self.p90_us, self.p99_us, self.p999_us, self.max_us
        );
        let _ = writeln!(
            o,
            "  replies    {} ({} gets: {} hits, {} misses; {} sets stored; {} errors)",
            self.replies, self.gets, self.hits, self.misses, self.stored, self.errors
        );
        let _ = writeln!(
            o,
            "  totals     {} sent, {} replies, {} errors (warm-up and drain included)",
            self.sent_total, self.replies_total, self.errors_total
        );
        if self.mode == "open" {
            let _ = writeln!(
                o,
                "  schedule   {} late sends (>1 ms), max lag {:.0} µs, {} unsent, {} unanswered at end",
                self.late_sends, self.max_send_lag_us, self.unsent_at_end, self.unanswered_at_end
            );
        }
        if self.preload_keys > 0 {
            let _ = writeln!(
                o,
                "  preload    {} keys in {:.2} s ({} errors)",
                self.preload_keys, self.preload_s, self.preload_errors
            );
        }
        let _ = writeln!(
            o,
            "  cpu        {:.1}% of one CPU (user {:.2} s, sys {:.2} s), {:.2} µs per request",
            self.cpu_percent, self.cpu_user_s, self.cpu_sys_s, self.cpu_us_per_request
        );
        o
    }

    /// Flat JSON: numbers (and a few strings) under plain keys.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_owned(), v);
        };
        put("mode", json!(self.mode));
        put("protocol", json!(self.protocol));
        put("server", json!(self.server));
        put("workload", json!(self.workload));
        put("threads", json!(self.threads));
        put("connections", json!(self.connections));
        put("depth", json!(self.depth));
        put("window_s", json!(self.window_s));
        put(
            "target_qps",
            self.target_qps.map_or(Value::Null, Value::from),
        );
        put("offered_qps", Value::from(self.offered_qps));
        put("achieved_qps", Value::from(self.achieved_qps));
        put("rate_shortfall", json!(u8::from(self.shortfall())));
        for (k, v) in [
            ("offered", self.offered),
            ("sent", self.sent),
            ("gets", self.gets),
            ("sets", self.sets),
            ("replies", self.replies),
            ("hits", self.hits),
            ("misses", self.misses),
            ("stored", self.stored),
            ("errors", self.errors),
            ("sent_total", self.sent_total),
            ("replies_total", self.replies_total),
            ("hits_total", self.hits_total),
            ("misses_total", self.misses_total),
            ("errors_total", self.errors_total),
            ("late_sends", self.late_sends),
            ("unsent_at_end", self.unsent_at_end),
            ("unanswered_at_end", self.unanswered_at_end),
            ("unanswered_after_drain", self.unanswered_after_drain),
            ("preload_keys", self.preload_keys),
            ("preload_replies", self.preload_replies),
            ("preload_errors", self.preload_errors),
        ] {
            put(k, json!(v));
        }
        for (k, v) in [
            ("max_send_lag_us", self.max_send_lag_us),
            ("avg_us", self.avg_us),
            ("min_us", self.min_us),
            ("p50_us", self.p50_us),
            ("p90_us", self.p90_us),
            ("p99_us", self.p99_us),
            ("p999_us", self.p999_us),
            ("max_us", self.max_us),
            ("cpu_user_s", self.cpu_user_s),
            ("cpu_sys_s", self.cpu_sys_s),
            ("cpu_percent", self.cpu_percent),
            ("cpu_us_per_request", self.cpu_us_per_request),
            ("preload_s", self.preload_s),
        ] {
            put(k, Value::from(v));
        }
        Value::Object(m)
    }
}
