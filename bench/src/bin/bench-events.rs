//! `./ebb bench events`: the event loop's costs on the hosted platform.
//!
//! * Local spawn throughput on one core: 1 000 000 closures queued in
//!   rounds of 10 000 by a task that yields until each round has run. The
//!   same workload runs on tokio's current-thread runtime (`spawn_local` in
//!   a `LocalSet`), pinned to the same CPU, alternating with ours, 5 runs
//!   each; `ratio_vs_tokio` is our median throughput over tokio's. Our
//!   `spawn` queues a plain closure (an event), the unit Ebbflow code uses;
//!   `ratio_tasks_vs_tokio` does the same with our futures (`spawn_task`),
//!   the like-for-like unit.
//! * Cross-core round trip: core 0 sends an event to core 1, which sends
//!   one back; with both cores halting in between (wake-ups through the
//!   kernel) and with both polling (an idle handler keeps them awake).
//! * Timer lateness: 2 000 one-millisecond timers in sequence; how late
//!   each callback ran after its deadline.

use std::cell::Cell;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant as StdInstant};

use ebb_bench::report::{median, percentile, Report};
use ebb_core::CoreId;
use ebb_event::{
    add_idle_handler, now, oneshot, remove_idle_handler, shutdown, spawn, spawn_on, spawn_task,
    timer_after, yield_now,
};
use ebb_hosted::Config;

const ITEMS: u64 = 1_000_000;
const ROUND: u64 = 10_000;
const RUNS: usize = 5;
const ROUND_TRIPS: usize = 20_000;
const TIMERS: usize = 2_000;

fn node_config(cpus: Vec<usize>) -> Config {
    Config {
        cores: Some(cpus.len()),
        cpus: Some(cpus),
        handle_signals: false,
        ..Config::default()
    }
}

/// Runs `body` (an async task on core 0) on a node pinned to `cpus`, returns
/// what it sends back.
fn on_node<T: Send + 'static, F>(
    cpus: Vec<usize>,
    body: impl FnOnce() -> F + Send + 'static,
) -> Result<T, String>
where
    F: std::future::Future<Output = T> + 'static,
{
    let (tx, rx) = mpsc::channel();
    ebb_hosted::run(node_config(cpus), move || {
        spawn_task(async move {
            tx.send(body().await).expect("bench waits");
            shutdown(0).expect("first shutdown");
        });
    })
    .map_err(|e| e.to_string())?;
    rx.recv().map_err(|e| e.to_string())
}

#[derive(Clone, Copy)]
enum Unit {
    Event,
    Task,
}

/// Items per second on one core of ours.
fn ours(cpu: usize, unit: Unit) -> Result<f64, String> {
    on_node(vec![cpu], move || async move {
        let done = Rc::new(Cell::new(0u64));
        let start = StdInstant::now();
        let mut target = 0;
        while target < ITEMS {
            target += ROUND;
            for _ in 0..ROUND {
                let done = Rc::clone(&done);
                match unit {
                    Unit::Event => spawn(move || done.set(done.get() + 1)),
                    Unit::Task => drop(spawn_task(async move { done.set(done.get() + 1) })),
                }
            }
            while done.get() < target {
                yield_now().await;
            }
        }
        ITEMS as f64 / start.elapsed().as_secs_f64()
    })
}

/// Items per second on tokio's current-thread runtime, same workload.
fn tokio_baseline(cpu: usize) -> Result<f64, String> {
    std::thread::spawn(move || {
        // Best effort: a machine with one CPU runs both cores on it.
        let _ = ebb_testbed::pin::pin_current_thread(cpu);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| e.to_string())?;
        let local = tokio::task::LocalSet::new();
        Ok(local.block_on(&runtime, async {
            let done = Rc::new(Cell::new(0u64));
            let start = StdInstant::now();
            let mut target = 0;
            while target < ITEMS {
                target += ROUND;
                for _ in 0..ROUND {
                    let done = Rc::clone(&done);
                    drop(tokio::task::spawn_local(
                        async move { done.set(done.get() + 1) },
                    ));
                }
                while done.get() < target {
                    tokio::task::yield_now().await;
                }
            }
            ITEMS as f64 / start.elapsed().as_secs_f64()
        }))
    })
    .join()
    .map_err(|_| "the tokio thread panicked".to_owned())?
}

/// Round-trip times in ns between core 0 and core 1.
fn round_trips(polling: bool) -> Result<Vec<f64>, String> {
    on_node(vec![0, 1], move || async move {
        let mut idle = None;
        if polling {
            idle = Some(add_idle_handler(|| {}));
            let (tx, rx) = oneshot();
            spawn_on(CoreId(1), move || {
                add_idle_handler(|| {});
                tx.send(());
            })
            .expect("core 1 exists");
            rx.await.expect("core 1 answers");
        }
        let mut samples = Vec::with_capacity(ROUND_TRIPS);
        for _ in 0..ROUND_TRIPS {
            let (tx, rx) = oneshot();
            let start = now();
            spawn_on(CoreId(1), move || {
                spawn_on(CoreId(0), move || tx.send(())).expect("core 0 exists");
            })
            .expect("core 1 exists");
            rx.await.expect("the round trip completes");
            samples.push((now() - start).as_nanos() as f64);
        }
        if let Some(idle) = idle {
            remove_idle_handler(idle);
        }
        samples
    })
}

/// Lateness in µs of sequential 1 ms timers.
fn timer_lateness() -> Result<Vec<f64>, String> {
    on_node(vec![0], || async {
        let mut samples = Vec::with_capacity(TIMERS);
        for _ in 0..TIMERS {
            let (tx, rx) = oneshot();
            let deadline = now() + Duration::from_millis(1);
            timer_after(Duration::from_millis(1), move || tx.send(now()));
            let fired = rx.await.expect("the timer fires");
            samples.push((fired - deadline).as_nanos() as f64 / 1e3);
        }
        samples
    })
}

fn run() -> Result<(), String> {
    let cpu = 0;
    println!("events: local spawn throughput, {RUNS} alternating runs of {ITEMS} items each...");
    let (mut events, mut tasks, mut tokio) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..RUNS {
        events.push(ours(cpu, Unit::Event)?);
        tokio.push(tokio_baseline(cpu)?);
        tasks.push(ours(cpu, Unit::Task)?);
        println!(
            "  run {}: events {:.2} M/s, tasks {:.2} M/s, tokio {:.2} M/s",
            run + 1,
            events[run] / 1e6,
            tasks[run] / 1e6,
            tokio[run] / 1e6
        );
    }
    let (events, tasks, tokio) = (median(&mut events), median(&mut tasks), median(&mut tokio));

    println!("events: cross-core round trips ({ROUND_TRIPS} each, halting and polling)...");
    let mut halting = round_trips(false)?;
    halting.sort_by(f64::total_cmp);
    let mut polling = round_trips(true)?;
    polling.sort_by(f64::total_cmp);

    println!("events: timer lateness ({TIMERS} sequential 1 ms timers)...");
    let mut lateness = timer_lateness()?;
    lateness.sort_by(f64::total_cmp);

    let mut report = Report::new("events");
    report
        .metric(
            "local_spawn_per_s",
            events,
            "1/s",
            "events (closures) on one core, median of 5",
        )
        .metric(
            "tokio_spawn_per_s",
            tokio,
            "1/s",
            "tokio current-thread spawn_local, same workload, median of 5",
        )
        .metric(
            "ratio_vs_tokio",
            events / tokio,
            "x",
            "ours / tokio throughput; target >= 1.0",
        )
        .metric(
            "local_task_spawn_per_s",
            tasks,
            "1/s",
            "our futures (spawn_task) on one core, median of 5",
        )
        .metric(
            "ratio_tasks_vs_tokio",
            tasks / tokio,
            "x",
            "our tasks / tokio tasks",
        )
        .metric(
            "xcore_rtt_median_ns",
            percentile(&halting, 50.0),
            "ns",
            "core 0 -> 1 -> 0, both halting between",
        )
        .metric("xcore_rtt_p99_ns", percentile(&halting, 99.0), "ns", "same")
        .metric(
            "xcore_rtt_polling_median_ns",
            percentile(&polling, 50.0),
            "ns",
            "both cores polling (idle handlers)",
        )
        .metric(
            "xcore_rtt_polling_p99_ns",
            percentile(&polling, 99.0),
            "ns",
            "same",
        )
        .metric(
            "timer_lateness_p50_us",
            percentile(&lateness, 50.0),
            "us",
            "1 ms timers, fire time - deadline",
        )
        .metric(
            "timer_lateness_p99_us",
            percentile(&lateness, 99.0),
            "us",
            "same",
        )
        .command("./ebb bench events")
        .command(format!(
            "ours: 1-core hosted node pinned to CPU {cpu} (io_uring backend when available)"
        ))
        .command(format!(
            "tokio {}: current_thread runtime + LocalSet on a thread pinned to CPU {cpu}",
            tokio_version()
        ));
    let path = report.finish()?;
    println!("wrote {}", path.display());
    Ok(())
}

fn tokio_version() -> &'static str {
    "1.x (Cargo.lock)"
}

/// The command line: no options.
#[derive(clap::Parser)]
#[command(
    name = "bench-events",
    about = "./ebb bench events: the event loop against tokio"
)]
struct Args {}

fn main() -> ExitCode {
    <Args as clap::Parser>::parse();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("events: {error}");
            ExitCode::FAILURE
        }
    }
}
