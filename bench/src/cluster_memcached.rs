//! What `./ebb bench cluster-memcached` measures with, apart from booting
//! clusters: which server each key goes to, driving a set of servers as
//! one client, and the bounded search for the throughput at the SLA.
//!
//! A client of a cluster is several [`ebb_loadgen`] runs at once, one per
//! [`Target`] (a server and the keys sent to it, with its share of the
//! rate): open-loop Poisson arrivals split at random by key are again
//! Poisson streams, so this is exactly the offered load of one routing
//! client, timed by the same engine on both clusters. The Linux cluster's
//! targets come from libmemcached's ketama ([`ketama_targets`]); an
//! Ebbflow cluster is asked through every node for every key, and
//! [`owner_targets`] splits each node's keys into those it owns (local)
//! and the rest (forwarded: remote), so their latencies can be set side
//! by side.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ebb_loadgen::ketama::Ketama;
use ebb_loadgen::workload::KeySpace;
use ebb_loadgen::{Config, Histogram, Summary};

/// p99 bound of the SLA under TCG, µs (issue 17: 5 ms).
pub const SLA_P99_US: f64 = 5000.0;
/// A run keeps up when it achieves at least this share of what it offered.
pub const SUSTAINED: f64 = 0.95;

/// Which keys a target's requests use, relative to the server asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locality {
    /// The client picked the server for the key (ketama): always its own.
    Routed,
    /// Keys the asked node owns.
    Local,
    /// Keys another node owns: the asked node forwards them.
    Remote,
}

/// One server and what a client sends it.
#[derive(Clone, Debug)]
pub struct Target {
    /// The server.
    pub server: SocketAddr,
    /// Its keys, indexes into the key space.
    pub keys: Arc<[u64]>,
    /// Its share of the aggregate rate (the shares of a set add up to 1).
    pub share: f64,
    /// Whether its keys are the asked node's own.
    pub locality: Locality,
}

/// The targets of a client hashing keys across `servers` with
/// libmemcached's ketama: each server gets the keys ketama gives it and
/// the share of the requests those keys draw (keys are picked uniformly).
pub fn ketama_targets(servers: &[SocketAddr], keys: &KeySpace) -> Result<Vec<Target>, String> {
    let ketama = Ketama::new(servers).ok_or("no servers")?;
    split(keys, ketama.servers(), |key| ketama.server_of(key))
        .into_iter()
        .zip(servers)
        .map(|(owned, &server)| target(server, owned, keys.len(), 1.0, Locality::Routed))
        .collect()
}

/// The targets of a client asking every one of `nodes` equally for every
/// key, when `owner` gives the index (into `nodes`) of the node owning a
/// key: per node, its own keys and the others', each with the share of
/// requests it draws (a node gets `1/n` of them).
pub fn owner_targets(
    nodes: &[SocketAddr],
    keys: &KeySpace,
    owner: impl Fn(&[u8]) -> usize,
) -> Result<Vec<Target>, String> {
    if nodes.is_empty() {
        return Err("no nodes".to_owned());
    }
    let owned = split(keys, nodes.len(), owner);
    let per_node = 1.0 / nodes.len() as f64;
    let mut targets = Vec::new();
    for (i, &node) in nodes.iter().enumerate() {
        let others: Vec<u64> = owned
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .flat_map(|(_, keys)| keys.iter().copied())
            .collect();
        for (keys_here, locality) in [
            (owned[i].clone(), Locality::Local),
            (others, Locality::Remote),
        ] {
            if !keys_here.is_empty() {
                targets.push(target(node, keys_here, keys.len(), per_node, locality)?);
            }
        }
    }
    Ok(targets)
}

/// The key indexes of `keys` each of `servers` servers gets from `place`.
fn split(keys: &KeySpace, servers: usize, place: impl Fn(&[u8]) -> usize) -> Vec<Vec<u64>> {
    let mut owned = vec![Vec::new(); servers];
    for i in 0..keys.len() {
        let server = place(keys.key(i));
        if let Some(list) = owned.get_mut(server) {
            list.push(ebb_loadgen::u64_of(i));
        }
    }
    owned
}

fn target(
    server: SocketAddr,
    owned: Vec<u64>,
    total: usize,
    scale: f64,
    locality: Locality,
) -> Result<Target, String> {
    if owned.is_empty() {
        return Err(format!("{server} is given no key of {total}"));
    }
    Ok(Target {
        server,
        share: scale * owned.len() as f64 / total as f64,
        keys: owned.into(),
        locality,
    })
}

/// One measured offered load of a whole cluster.
#[derive(Clone, Debug, Default)]
pub struct Point {
    /// Offered ops/s, summed over the targets.
    pub offered: f64,
    /// Achieved ops/s (replies within the window), summed.
    pub achieved: f64,
    /// Error replies and failed requests.
    pub errors: u64,
    /// Median latency of every request, µs (from the scheduled send).
    pub p50_us: f64,
    /// 99th percentile of every request, µs.
    pub p99_us: f64,
    /// `(p50, p99)` µs of the requests for the asked node's own keys
    /// (`None` when the targets had none).
    pub local: Option<(f64, f64)>,
    /// `(p50, p99)` µs of the requests for other nodes' keys.
    pub remote: Option<(f64, f64)>,
}

impl Point {
    /// Kept up with the offered load without errors.
    pub fn sustained(&self) -> bool {
        self.errors == 0 && self.achieved >= SUSTAINED * self.offered
    }

    /// Sustained with p99 within `sla_us`.
    pub fn within(&self, sla_us: f64) -> bool {
        self.sustained() && self.p99_us <= sla_us
    }

    /// Sums `summaries` (one per target, same order as `targets`).
    pub fn merge(targets: &[Target], summaries: &[Summary]) -> Point {
        let mut all = Histogram::new();
        let mut local = Histogram::new();
        let mut remote = Histogram::new();
        let mut point = Point::default();
        for (target, summary) in targets.iter().zip(summaries) {
            point.offered += summary.offered_qps;
            point.achieved += summary.achieved_qps;
            point.errors += summary.errors_total;
            all.merge(&summary.histogram);
            match target.locality {
                Locality::Local => local.merge(&summary.histogram),
                Locality::Remote => remote.merge(&summary.histogram),
                Locality::Routed => {}
            }
        }
        let us = |h: &Histogram, p: f64| h.percentile(p) as f64 / 1000.0;
        let pair = |h: &Histogram| (h.count() > 0).then(|| (us(h, 50.0), us(h, 99.0)));
        point.p50_us = us(&all, 50.0);
        point.p99_us = us(&all, 99.0);
        point.local = pair(&local);
        point.remote = pair(&remote);
        point
    }
}

/// Runs `base` against every target at once, each at its share of `rate`
/// (open loop) with its keys; `preload` sets each target's keys first
/// instead of measuring (then `rate` is ignored). Returns the summaries in
/// the targets' order.
pub fn drive(
    targets: &[Target],
    base: &Config,
    rate: f64,
    preload: bool,
) -> Result<Vec<Summary>, String> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = targets
            .iter()
            .map(|target| {
                let mut cfg = base.clone();
                cfg.server = target.server.to_string();
                cfg.only_keys = Some(Arc::clone(&target.keys));
                cfg.rate = Some((rate * target.share).max(1.0));
                if preload {
                    cfg.preload = true;
                    cfg.depth = cfg.depth.min(4);
                    cfg.duration = Duration::from_millis(100);
                    cfg.warmup = Duration::ZERO;
                }
                scope.spawn(move || {
                    ebb_loadgen::run(&cfg).map_err(|e| format!("{}: {e}", target.server))
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| {
                run.join()
                    .map_err(|_| "a load generator panicked".to_owned())?
            })
            .collect()
    })
}

/// Requests a measured window should hold at low rates.
pub const MIN_SAMPLES: f64 = 1000.0;

/// The measured window at `rate`: long enough for [`MIN_SAMPLES`]
/// requests (a p99 of fewer is only the largest few), at least `window`,
/// at most 4 × `window`.
pub fn window_for(window: Duration, rate: f64) -> Duration {
    let needed = Duration::from_secs_f64(MIN_SAMPLES / rate.max(1.0));
    needed.clamp(window, window * 4)
}

/// The bounded search for the highest throughput within the SLA: offered
/// load from `start` up by `factor` until a step is not within the SLA (at
/// most `max_steps` steps), then `refine` geometric bisections between the
/// highest step within and the first beyond. At most `max_steps + refine`
/// measurements.
#[derive(Clone, Copy, Debug)]
pub struct Search {
    /// The first offered load, ops/s.
    pub start: f64,
    /// The factor between steps of the ramp.
    pub factor: f64,
    /// Most steps of the ramp.
    pub max_steps: usize,
    /// Bisections after the ramp.
    pub refine: usize,
    /// Times a ramp step past the SLA is measured again before the ramp
    /// ends there: one p99 spike (a host hiccup in a 2 s window) must not
    /// end a run at a fraction of what it sustains. The same for every
    /// cluster, so the comparison stays fair.
    pub confirm: usize,
}

/// What a search measured.
#[derive(Clone, Debug, Default)]
pub struct Found {
    /// Every measurement, in order.
    pub points: Vec<Point>,
    /// The highest achieved throughput among points within the SLA (0 when
    /// none was).
    pub sla_qps: f64,
    /// The search never left the SLA: `sla_qps` is only a lower bound.
    pub capped: bool,
}

impl Found {
    /// The point of highest achieved throughput within the SLA, if any.
    pub fn best_within(&self, sla_us: f64) -> Option<&Point> {
        self.points
            .iter()
            .filter(|p| p.within(sla_us))
            .max_by(|a, b| a.achieved.total_cmp(&b.achieved))
    }
}

impl Search {
    /// Runs the search with `measure(offered rate)`.
    pub fn run(
        &self,
        sla_us: f64,
        mut measure: impl FnMut(f64) -> Result<Point, String>,
    ) -> Result<Found, String> {
        let mut found = Found::default();
        let mut within = None;
        let mut beyond = None;
        let mut rate = self.start;
        for _ in 0..self.max_steps {
            let mut ok = false;
            for _ in 0..=self.confirm {
                let point = measure(rate)?;
                ok = point.within(sla_us);
                found.points.push(point);
                if ok {
                    break;
                }
            }
            if ok {
                within = Some(rate);
                rate *= self.factor;
            } else {
                beyond = Some(rate);
                break;
            }
        }
        match (within, beyond) {
            (Some(mut low), Some(mut high)) => {
                for _ in 0..self.refine {
                    let middle = (low * high).sqrt();
                    let point = measure(middle)?;
                    if point.within(sla_us) {
                        low = middle;
                    } else {
                        high = middle;
                    }
                    found.points.push(point);
                }
            }
            (_, None) => found.capped = true,
            (None, Some(_)) => {}
        }
        found.sla_qps = found
            .points
            .iter()
            .filter(|p| p.within(sla_us))
            .map(|p| p.achieved)
            .fold(0.0, f64::max);
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_loadgen::SizeDist;

    /// A server that keeps up to `capacity` ops/s with p99 growing as it
    /// fills, and falls behind beyond.
    fn model(capacity: f64) -> impl FnMut(f64) -> Result<Point, String> {
        move |rate| {
            let load = rate / capacity;
            Ok(Point {
                offered: rate,
                achieved: rate.min(capacity),
                p50_us: 100.0,
                p99_us: if load < 1.0 {
                    500.0 / (1.0 - load)
                } else {
                    1e6
                },
                ..Point::default()
            })
        }
    }

    const SEARCH: Search = Search {
        start: 500.0,
        factor: 2.0,
        max_steps: 12,
        refine: 4,
        confirm: 0,
    };

    /// `search` over a 10,000 ops/s server whose third measurement
    /// spikes past the SLA once; the measurements made and what it found.
    fn with_one_spike(search: Search) -> (usize, Found) {
        let mut calls = 0;
        let mut measure = model(10_000.0);
        let found = search
            .run(SLA_P99_US, |rate| {
                calls += 1;
                let mut point = measure(rate)?;
                if calls == 3 {
                    point.p99_us = 9_000.0;
                }
                Ok(point)
            })
            .expect("search");
        (calls, found)
    }

    #[test]
    fn one_spike_past_the_sla_is_measured_again_before_the_ramp_ends() {
        let (calls, found) = with_one_spike(Search {
            confirm: 1,
            ..SEARCH
        });
        // 500, 1,000, 2,000 (spike), 2,000 again, 4,000, 8,000, 16,000
        // twice, then 4 bisections.
        assert_eq!(calls, 8 + 4);
        assert!(
            (8_000.0..=9_000.0).contains(&found.sla_qps),
            "{}",
            found.sla_qps
        );
        // Without confirming, the spike ends the run at 1,000.
        let (_, found) = with_one_spike(SEARCH);
        assert!(found.sla_qps < 2_000.0, "{}", found.sla_qps);
    }

    #[test]
    fn the_search_finds_the_rate_where_p99_reaches_the_sla() {
        // p99 = 5 ms at 90 % of a 10,000 ops/s capacity.
        let mut calls = 0;
        let mut measure = model(10_000.0);
        let found = SEARCH
            .run(SLA_P99_US, |rate| {
                calls += 1;
                measure(rate)
            })
            .expect("search");
        // 500 … 8,000 within, 16,000 beyond, then 4 bisections.
        assert_eq!(calls, 6 + 4);
        assert!(!found.capped);
        assert!(
            (8_000.0..=9_000.0).contains(&found.sla_qps),
            "{}",
            found.sla_qps
        );
        assert!(found.points.iter().all(|p| p.offered <= 16_000.0));
    }

    #[test]
    fn the_search_is_bounded_and_says_when_it_never_left_the_sla() {
        let found = SEARCH.run(SLA_P99_US, model(1e12)).expect("search");
        assert_eq!(found.points.len(), SEARCH.max_steps);
        assert!(found.capped);
        assert_eq!(found.sla_qps, 500.0 * 2f64.powi(11));
    }

    #[test]
    fn a_cluster_beyond_the_sla_at_once_scores_zero_and_errors_count_against() {
        let found = SEARCH.run(SLA_P99_US, model(100.0)).expect("search");
        assert_eq!((found.points.len(), found.sla_qps), (1, 0.0));
        let failing = |rate: f64| {
            Ok(Point {
                offered: rate,
                achieved: rate,
                errors: 1,
                ..Point::default()
            })
        };
        assert_eq!(
            SEARCH.run(SLA_P99_US, failing).expect("search").sla_qps,
            0.0
        );
        let broken = SEARCH.run(SLA_P99_US, |_| Err("guest died".to_owned()));
        assert_eq!(broken.expect_err("error").as_str(), "guest died");
    }

    #[test]
    fn low_rates_get_longer_windows_within_four_times() {
        let second = Duration::from_secs(1);
        assert_eq!(window_for(second, 100.0), 4 * second);
        assert_eq!(window_for(second, 500.0), 2 * second);
        assert_eq!(window_for(second, 50_000.0), second);
        assert_eq!(window_for(second, 0.0), 4 * second);
    }

    fn servers() -> Vec<SocketAddr> {
        ["10.96.0.2:11211", "10.96.0.3:11211", "10.96.0.4:11211"]
            .map(|s| s.parse().expect("address"))
            .to_vec()
    }

    #[test]
    fn ketama_targets_cover_every_key_once_with_shares_adding_up() {
        let keys = KeySpace::new(3000, SizeDist::Etc).expect("keys");
        let targets = ketama_targets(&servers(), &keys).expect("targets");
        let ketama = Ketama::new(&servers()).expect("ketama");
        let mut seen = vec![0; keys.len()];
        for (s, target) in targets.iter().enumerate() {
            assert_eq!(target.server, servers()[s]);
            for &k in target.keys.iter() {
                let k = usize::try_from(k).expect("index");
                seen[k] += 1;
                assert_eq!(ketama.server_of(keys.key(k)), s);
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        let total: f64 = targets.iter().map(|t| t.share).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn owner_targets_give_each_node_its_own_keys_and_the_rest() {
        let keys = KeySpace::new(300, SizeDist::Fixed(10)).expect("keys");
        let owner = |key: &[u8]| usize::from(key[key.len() - 1] % 3);
        let targets = owner_targets(&servers(), &keys, owner).expect("targets");
        assert_eq!(targets.len(), 6);
        for pair in targets.chunks(2) {
            let (local, remote) = (&pair[0], &pair[1]);
            assert_eq!(
                (local.locality, remote.locality),
                (Locality::Local, Locality::Remote)
            );
            assert_eq!(local.keys.len() + remote.keys.len(), 300);
            assert!((local.share + remote.share - 1.0 / 3.0).abs() < 1e-9);
        }
        assert_eq!(
            owner_targets(&[], &keys, owner).expect_err("no nodes"),
            "no nodes"
        );
    }
}
