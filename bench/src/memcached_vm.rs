//! The arithmetic of `./ebb bench memcached-vm`, apart from the guests:
//! a sweep's points and what is read from them (the throughput within the
//! SLA, the maximum sustained throughput, their ratio, the point at half
//! the maximum), and the choices of the scaling runs (the `--cores` list,
//! the accelerator, where QEMU runs, how many connections the load
//! generator opens).
//!
//! A point is *sustained* when the server kept up: achieved ≥ 95 % of
//! offered, no errors. It is *within the SLA* when it is sustained and its
//! p99 is at most the SLA. Achieved rates are compared, never offered
//! ones: an offered rate the server did not carry says nothing of it.

/// Achieved over offered at or above which a point is sustained.
pub const SUSTAINED: f64 = 0.95;

/// How far (as a fraction of the rate) a measured point's offered load
/// may be from half the maximum and still stand for it. The schedule's
/// steps are ×1.4 apart and 1.4² ≈ 2, so the step two below the maximum
/// is usually within a few per cent of half of it; past this tolerance
/// one more point is measured at exactly half.
pub const HALF_LOAD_TOLERANCE: f64 = 0.10;

/// The most vCPUs `--cores` takes: the native image's own limit on cores
/// (`MAX_CORES` in `crates/ebb-native/src/arch/x86_64/cpu.rs`).
pub const MAX_VCPUS: u16 = 64;

/// Fewest connections of the load generator: the head-to-head's 4.
pub const MIN_CONNECTIONS: usize = 4;

/// Connections per vCPU of the scaling runs.
pub const CONNECTIONS_PER_VCPU: usize = 4;

/// One measured offered load.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The step of the shared schedule, `None` for a point off it (the
    /// refining step, or a point at half the maximum).
    pub step: Option<usize>,
    /// Offered ops/s (as the generator scheduled them).
    pub offered: f64,
    /// Achieved ops/s.
    pub achieved: f64,
    /// Median latency, µs from the scheduled send.
    pub p50_us: f64,
    /// 99th percentile, µs from the scheduled send.
    pub p99_us: f64,
    /// QEMU's host CPU per reply, µs.
    pub cpu_us: f64,
    /// Sustained: achieved ≥ 95 % of offered, no errors.
    pub sustained: bool,
    /// Sustained and within the SLA.
    pub ok: bool,
}

impl Point {
    /// Whether a point with these figures is sustained.
    pub fn is_sustained(offered: f64, achieved: f64, errors: u64) -> bool {
        achieved >= SUSTAINED * offered && errors == 0
    }
}

/// One sweep: its points on and off the schedule, and the point that
/// stands for half its maximum (kept apart: an extra point measured there
/// must not move the throughput within the SLA, which the head-to-head's
/// `ratio` is taken from).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sweep {
    /// The schedule's points and the refining step, in the order measured.
    pub points: Vec<Point>,
    /// [`sla_qps`] of `points`.
    pub sla_qps: f64,
    /// The point at half of [`max_sustained_qps`], if anything was
    /// sustained.
    pub half_load: Option<Point>,
}

impl Sweep {
    /// [`max_sustained_qps`] of the points.
    pub fn max_sustained_qps(&self) -> f64 {
        max_sustained_qps(&self.points)
    }

    /// [`sla_fraction`] of the points.
    pub fn sla_fraction(&self) -> f64 {
        sla_fraction(&self.points)
    }

    /// The p99 at half the maximum, µs; `NaN` without one. A window in
    /// which no request got a reply (the guest stalled for longer than the
    /// window and the drain) has no latencies, and the generator reports
    /// its p99 as 0: every request there waited longer than the window,
    /// so it counts as infinite.
    pub fn p99_at_half_us(&self) -> f64 {
        self.half_load.as_ref().map_or(f64::NAN, |point| {
            if point.achieved > 0.0 {
                point.p99_us
            } else {
                f64::INFINITY
            }
        })
    }
}

/// The highest achieved rate within the SLA; 0 when no point is.
pub fn sla_qps(points: &[Point]) -> f64 {
    points
        .iter()
        .filter(|p| p.ok)
        .map(|p| p.achieved)
        .fold(0.0, f64::max)
}

/// The highest achieved rate of a sustained point, whatever its p99: the
/// most the server carried in this sweep. 0 when no point is sustained.
/// It can be below the true maximum by up to one step of the schedule
/// (×1.4): the sweep does not refine it.
pub fn max_sustained_qps(points: &[Point]) -> f64 {
    points
        .iter()
        .filter(|p| p.sustained)
        .map(|p| p.achieved)
        .fold(0.0, f64::max)
}

/// How much of what the server can carry it carries within the SLA:
/// [`sla_qps`] / [`max_sustained_qps`], both of the same sweep. 1 means
/// its p99 stays within the SLA up to saturation; a server whose tail
/// passes the SLA early scores low however fast it is. `NaN` when nothing
/// was sustained.
pub fn sla_fraction(points: &[Point]) -> f64 {
    let max = max_sustained_qps(points);
    if max > 0.0 {
        sla_qps(points) / max
    } else {
        f64::NAN
    }
}

/// Where the p99 at half the maximum comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum HalfLoad<'a> {
    /// A measured point whose offered load is within
    /// [`HALF_LOAD_TOLERANCE`] of half the maximum: the nearest one.
    Measured(&'a Point),
    /// No point is that close: measure one at this offered rate.
    Measure(f64),
    /// Nothing was sustained, so there is no maximum to halve.
    NoMaximum,
}

/// The point that stands for half of `points`' maximum sustained
/// throughput: the one whose offered load is nearest to half by ratio
/// (so a point ×1.1 above is as near as one ÷1.1 below), if within a
/// ratio of 1 + [`HALF_LOAD_TOLERANCE`] either way; else the rate to
/// measure. Points whose window
/// got no reply at all do not count: they measured no latency.
pub fn half_load(points: &[Point]) -> HalfLoad<'_> {
    let max = max_sustained_qps(points);
    if max <= 0.0 {
        return HalfLoad::NoMaximum;
    }
    let half = max / 2.0;
    let distance = |p: &Point| (p.offered / half).ln().abs();
    let nearest = points
        .iter()
        .filter(|p| p.offered > 0.0 && p.achieved > 0.0)
        .min_by(|a, b| distance(a).total_cmp(&distance(b)));
    match nearest {
        Some(point) if distance(point) <= HALF_LOAD_TOLERANCE.ln_1p() => HalfLoad::Measured(point),
        _ => HalfLoad::Measure(half),
    }
}

/// The median of the values that are numbers; `NaN` when none is (a run
/// without the figure does not drag the median).
pub fn median_of_numbers(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut numbers: Vec<f64> = values.into_iter().filter(|v| !v.is_nan()).collect();
    crate::report::median(&mut numbers)
}

/// `--cores`: vCPU counts separated by commas (`1,2,4`), each 1 to
/// [`MAX_VCPUS`], one of them 1 (speedups are relative to one vCPU).
/// Returned ascending, each once.
pub fn parse_core_list(text: &str) -> Result<Vec<u16>, String> {
    if text.trim().is_empty() {
        return Err(
            "--cores needs vCPU counts, like 1,2,4; to skip the scaling runs, use --no-scaling"
                .to_owned(),
        );
    }
    let mut counts = Vec::new();
    for word in text.split(',').map(str::trim) {
        let count = word
            .parse::<u16>()
            .ok()
            .filter(|n| (1..=MAX_VCPUS).contains(n))
            .ok_or_else(|| {
                format!("--cores {text}: '{word}' is not a vCPU count from 1 to {MAX_VCPUS}")
            })?;
        counts.push(count);
    }
    counts.sort_unstable();
    counts.dedup();
    if counts.first() != Some(&1) {
        return Err(format!(
            "--cores {text} needs 1 among the counts: each speedup is relative to one vCPU"
        ));
    }
    Ok(counts)
}

/// The accelerator asked for with `--accel`, or what this host offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelChoice {
    /// QEMU's emulator, on any host.
    Tcg,
    /// Hardware virtualization, where the CPU has it (vmx or svm) and
    /// /dev/kvm exists.
    Kvm,
}

/// QEMU's name for the accelerator: `asked`, or `detected` (what
/// `ebb_testbed::qemu::accel` picks) without `--accel`. KVM is refused
/// unless `kvm_usable`: a /dev/kvm without vmx or svm underneath is a
/// software hypervisor that runs guest kernel code far slower than TCG.
pub fn choose_accel(
    asked: Option<AccelChoice>,
    detected: &'static str,
    kvm_usable: bool,
) -> Result<&'static str, String> {
    match asked {
        None => Ok(detected),
        Some(AccelChoice::Tcg) => Ok("tcg"),
        Some(AccelChoice::Kvm) if kvm_usable => Ok("kvm"),
        Some(AccelChoice::Kvm) => Err(
            "--accel kvm needs hardware virtualization: this host's /proc/cpuinfo shows \
             no vmx or svm flag, or /dev/kvm is missing (a /dev/kvm without them runs \
             guest kernel code far slower than TCG); use --accel tcg"
                .to_owned(),
        ),
    }
}

/// The load generator's connections for a guest with `vcpus` vCPUs:
/// [`CONNECTIONS_PER_VCPU`] per vCPU, at least [`MIN_CONNECTIONS`]. The
/// TAP device spreads flows over its queues by a hash of their addresses
/// and ports (then by the queue that last sent them), so each queue — each
/// core of ours — sees only the connections that land on it: a few per
/// queue keep every queue busy despite the hash's unevenness, and one vCPU
/// gets the head-to-head's 4, so its scaling point is the head-to-head's
/// setup.
pub fn generator_connections(vcpus: u16) -> usize {
    (CONNECTIONS_PER_VCPU * usize::from(vcpus)).max(MIN_CONNECTIONS)
}

/// The host CPUs QEMU may run on (`taskset -c`) with `vcpus` vCPUs on a
/// host with `host_cpus` CPUs, the generator keeping CPU 0 (the bench's
/// `CLIENT_CPU`): CPUs 1 to `vcpus` when the host has that many besides
/// CPU 0 (one vCPU: CPU 1 alone, the head-to-head's placement); else every
/// CPU, shared with the generator (on a 2-CPU host, 2 and more vCPUs).
pub fn qemu_host_cpus(vcpus: u16, host_cpus: usize) -> String {
    let vcpus = usize::from(vcpus);
    if host_cpus > vcpus {
        if vcpus == 1 {
            "1".to_owned()
        } else {
            format!("1-{vcpus}")
        }
    } else if host_cpus <= 1 {
        "0".to_owned()
    } else {
        format!("0-{}", host_cpus - 1)
    }
}

/// What the scaling figures mean on a host with `host_cpus` CPUs whose
/// largest guest has `max_vcpus` vCPUs (the report's label).
pub fn host_cpu_note(host_cpus: usize, max_vcpus: u16) -> String {
    let shared = format!(
        "this host has {host_cpus} CPU{}, shared by QEMU's vCPU threads, its I/O thread and the load generator",
        if host_cpus == 1 { "" } else { "s" }
    );
    if usize::from(max_vcpus) < host_cpus {
        format!("{shared}; every guest's vCPUs fit beside the generator's CPU")
    } else {
        format!(
            "{shared}: from {host_cpus} vCPUs up, the vCPUs and the generator take turns on \
             the host's CPUs, so speedups there are bounded by the host, not by the guest"
        )
    }
}

/// The order of the vCPU counts in scaling round `round`: ascending in
/// even rounds, descending in odd ones, so no count always meets the host
/// first (as the head-to-head alternates its guests).
pub fn round_order(counts: &[u16], round: usize) -> Vec<u16> {
    let mut order = counts.to_vec();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// Whether another scaling round fits: started after `elapsed` of the
/// scaling phase, it would end near `elapsed + last_round`, which must
/// stay within `budget`. The first round always runs.
pub fn another_round_fits(
    rounds_done: usize,
    elapsed: std::time::Duration,
    last_round: std::time::Duration,
    budget: std::time::Duration,
) -> bool {
    rounds_done == 0 || elapsed + last_round <= budget
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn point(step: usize, offered: f64, achieved: f64, p99_us: f64) -> Point {
        let sustained = Point::is_sustained(offered, achieved, 0);
        Point {
            step: Some(step),
            offered,
            achieved,
            p50_us: p99_us / 4.0,
            p99_us,
            cpu_us: 50.0,
            sustained,
            ok: sustained && p99_us <= 5000.0,
        }
    }

    /// A sweep on the ×1.4 schedule from 500: within the SLA up to step 5
    /// (2,689 ops/s), sustained up to step 10 (14,458), then saturated.
    fn sweep() -> Vec<Point> {
        let mut points = Vec::new();
        for step in 0..13u8 {
            let offered = 500.0 * 1.4f64.powi(i32::from(step));
            let (achieved, p99) = match step {
                0..=5 => (offered, 1000.0),
                6..=10 => (offered * 0.99, 9000.0),
                _ => (14_600.0, 80_000.0),
            };
            points.push(point(usize::from(step), offered, achieved, p99));
        }
        points
    }

    #[test]
    fn the_fraction_is_the_sla_throughput_over_the_highest_sustained() {
        let points = sweep();
        let sla = 500.0 * 1.4f64.powi(5);
        let max = 500.0 * 1.4f64.powi(10) * 0.99;
        assert!((sla_qps(&points) - sla).abs() < 1e-6);
        assert!((max_sustained_qps(&points) - max).abs() < 1e-6);
        assert!((sla_fraction(&points) - sla / max).abs() < 1e-9);
        // The saturated steps achieved more than the last sustained one
        // (14,600 against 14,313) but were not sustained: they do not count.
        assert!(max < 14_600.0);
    }

    #[test]
    fn a_server_within_the_sla_up_to_saturation_scores_one() {
        let points: Vec<Point> = [1000.0, 2000.0, 3000.0, 4000.0]
            .into_iter()
            .enumerate()
            .map(|(step, offered)| point(step, offered, 0.99 * offered, 100.0))
            .collect();
        assert_eq!(sla_fraction(&points), 1.0);
    }

    #[test]
    fn nothing_sustained_has_no_fraction_and_no_half_load() {
        let points = vec![point(0, 500.0, 100.0, 100.0)];
        assert_eq!(sla_qps(&points), 0.0);
        assert_eq!(max_sustained_qps(&points), 0.0);
        assert!(sla_fraction(&points).is_nan());
        assert_eq!(half_load(&points), HalfLoad::NoMaximum);
        assert!(sla_fraction(&[]).is_nan());
    }

    #[test]
    fn half_load_takes_the_step_two_below_the_maximum() {
        let points = sweep();
        // Half of 14,313 is 7,157; step 8 offers 7,379 (3 % above).
        match half_load(&points) {
            HalfLoad::Measured(point) => assert_eq!(point.step, Some(8)),
            other => panic!("expected a measured point, got {other:?}"),
        }
    }

    #[test]
    fn half_load_prefers_the_nearer_point_by_ratio() {
        // Half of 10,000 is 5,000: 4,550 is 9 % below it (÷1.0989) and
        // 5,490 9.8 % above (×1.098): by ratio the upper one is nearer,
        // by difference the lower one.
        let points = vec![
            point(0, 4_550.0, 4_550.0, 100.0),
            point(1, 5_490.0, 5_490.0, 100.0),
            point(2, 10_000.0, 10_000.0, 100.0),
        ];
        assert_eq!(half_load(&points), HalfLoad::Measured(&points[1]));
        // ÷1.105 is past the tolerance of ×1.1 either way.
        let points = vec![
            point(0, 4_525.0, 4_525.0, 100.0),
            point(2, 10_000.0, 10_000.0, 100.0),
        ];
        assert_eq!(half_load(&points), HalfLoad::Measure(5_000.0));
    }

    #[test]
    fn half_load_far_from_every_point_is_measured_at_exactly_half() {
        // The maximum from a refining step between two schedule steps:
        // half of it (4,695) is ÷1.17 from one neighbour, ×1.19 from the
        // other.
        let points = vec![
            point(0, 4_000.0, 4_000.0, 100.0),
            point(1, 5_600.0, 5_600.0, 100.0),
            point(2, 7_840.0, 7_840.0, 100.0),
            point(3, 10_976.0, 9_000.0, 100.0),
            Point {
                step: None,
                ..point(0, 9_390.0, 9_390.0, 100.0)
            },
        ];
        assert_eq!(half_load(&points), HalfLoad::Measure(9_390.0 / 2.0));
    }

    #[test]
    fn a_window_without_replies_does_not_stand_for_half_load() {
        // The step at half (7,379) stalled: no reply in its window, p99
        // reported as 0.
        let mut points = sweep();
        points[8] = point(8, points[8].offered, 0.0, 0.0);
        assert_eq!(
            half_load(&points),
            HalfLoad::Measure(points[10].achieved / 2.0)
        );
        let stalled = Sweep {
            half_load: Some(points[8].clone()),
            ..Sweep::default()
        };
        assert_eq!(stalled.p99_at_half_us(), f64::INFINITY);
    }

    #[test]
    fn sweeps_read_their_half_load_point() {
        let mut sweep = Sweep {
            points: sweep(),
            ..Sweep::default()
        };
        assert!(sweep.p99_at_half_us().is_nan());
        sweep.half_load = Some(point(8, 7_379.0, 7_379.0, 4_321.0));
        assert_eq!(sweep.p99_at_half_us(), 4_321.0);
        assert!(sweep.sla_fraction() > 0.18 && sweep.sla_fraction() < 0.19);
    }

    #[test]
    fn medians_skip_runs_without_the_figure() {
        assert_eq!(median_of_numbers([3.0, f64::NAN, 1.0, 2.0]), 2.0);
        assert!(median_of_numbers([f64::NAN]).is_nan());
    }

    #[test]
    fn core_lists_are_sorted_once_and_need_one() {
        assert_eq!(parse_core_list("1,2,4"), Ok(vec![1, 2, 4]));
        assert_eq!(parse_core_list(" 4, 1 ,2,2"), Ok(vec![1, 2, 4]));
        assert_eq!(parse_core_list("1"), Ok(vec![1]));
        assert_eq!(parse_core_list("1,2,4,6"), Ok(vec![1, 2, 4, 6]));
        assert!(parse_core_list("").unwrap_err().contains("--no-scaling"));
        assert!(parse_core_list("2,4")
            .unwrap_err()
            .contains("needs 1 among the counts"));
        for bad in ["0,1", "1,x", "1,,2", "1,65", "1;2"] {
            assert!(
                parse_core_list(bad)
                    .unwrap_err()
                    .contains("is not a vCPU count"),
                "{bad}"
            );
        }
    }

    #[test]
    fn kvm_is_refused_where_it_is_not_hardware() {
        assert_eq!(choose_accel(None, "tcg", false), Ok("tcg"));
        assert_eq!(choose_accel(None, "kvm", true), Ok("kvm"));
        assert_eq!(choose_accel(Some(AccelChoice::Tcg), "kvm", true), Ok("tcg"));
        assert_eq!(choose_accel(Some(AccelChoice::Kvm), "kvm", true), Ok("kvm"));
        let refused = choose_accel(Some(AccelChoice::Kvm), "tcg", false).unwrap_err();
        assert!(refused.contains("vmx or svm") && refused.contains("--accel tcg"));
    }

    #[test]
    fn connections_spread_over_the_queues() {
        assert_eq!(generator_connections(1), 4);
        assert_eq!(generator_connections(2), 8);
        assert_eq!(generator_connections(4), 16);
        assert_eq!(generator_connections(6), 24);
    }

    #[test]
    fn qemu_keeps_off_the_generators_cpu_only_where_the_host_has_room() {
        // This machine: 2 CPUs.
        assert_eq!(qemu_host_cpus(1, 2), "1");
        assert_eq!(qemu_host_cpus(2, 2), "0-1");
        assert_eq!(qemu_host_cpus(4, 2), "0-1");
        // A bigger KVM host for EbbRT's 6-core experiment.
        assert_eq!(qemu_host_cpus(6, 8), "1-6");
        assert_eq!(qemu_host_cpus(6, 6), "0-5");
        assert_eq!(qemu_host_cpus(1, 1), "0");
    }

    #[test]
    fn the_host_note_names_the_cpu_count() {
        let note = host_cpu_note(2, 4);
        assert!(note.starts_with("this host has 2 CPUs, shared by QEMU's vCPU threads"));
        assert!(note.contains("bounded by the host"), "{note}");
        let roomy = host_cpu_note(16, 6);
        assert!(
            roomy.contains("16 CPUs") && roomy.contains("fit beside"),
            "{roomy}"
        );
    }

    #[test]
    fn rounds_alternate_and_stop_at_the_budget() {
        assert_eq!(round_order(&[1, 2, 4], 0), vec![1, 2, 4]);
        assert_eq!(round_order(&[1, 2, 4], 1), vec![4, 2, 1]);
        let minute = Duration::from_secs(60);
        assert!(another_round_fits(0, 10 * minute, 10 * minute, 5 * minute));
        assert!(another_round_fits(1, minute, 2 * minute, 5 * minute));
        assert!(!another_round_fits(1, 3 * minute, 3 * minute, 5 * minute));
    }
}
