//! `./ebb bench threadtest`: Hoard's `threadtest` and a cross-thread
//! producer/consumer benchmark, for four allocators in the same run.
//!
//! threadtest (Berger et al., *Hoard*, ASPLOS 2000, `benchmarks/threadtest`):
//! `t` threads; each allocates `N/t` 8-byte objects (a `Foo { x, y }` as in
//! the original), then frees them all; `i` iterations. Configuration I is
//! `N = 100000, i = 1000`, configuration II is `N = 100, i = 1000000`, each
//! at `t = 1` and `t = 2`.
//!
//! xthread (larson-like): one thread allocates objects of mixed sizes and
//! hands them over a single-producer/single-consumer ring to a thread on the
//! other CPU, which reads and frees them: every free is a remote free.
//!
//! Allocators: ours (`ebb_mem::hosted::HostedAllocator`), the system
//! allocator (glibc), jemalloc (`tikv-jemallocator`) and mimalloc (`mimalloc`
//! crate), all called through `GlobalAlloc` by the same generic code, with
//! every pointer passed through `std::hint::black_box`. The harness itself
//! (thread stacks, pointer arrays, the ring) uses the system allocator.
//! Threads are pinned to CPUs. Each cell is the median of 5 runs.
//!
//! Flags: `--quick` (tiny sizes, for smoke tests), `--runs K`,
//! `--only NAME[,NAME..]` (some allocators, e.g. `ours` under callgrind, or
//! `ours,jemalloc` side by side), `--cell I_1|I_2|II_1|II_2|xthread`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use ebb_bench::report::{median, output_dir, Report};
use ebb_mem::hosted::HostedAllocator;

static OURS: HostedAllocator = HostedAllocator::new();
static GLIBC: System = System;
static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ALLOCATORS: [&str; 4] = ["ours", "glibc", "jemalloc", "mimalloc"];

/// The object of the original threadtest.
#[repr(C)]
struct Foo {
    x: i32,
    y: i32,
}

/// Pins the calling thread to `cpu` (modulo the CPUs this process may
/// use); runs unpinned if that fails.
fn pin(cpu: usize) {
    let allowed = ebb_testbed::pin::allowed_cpus().unwrap_or_default();
    let target = if allowed.is_empty() {
        cpu
    } else {
        allowed[cpu % allowed.len()]
    };
    if ebb_testbed::pin::pin_current_thread(target).is_err() {
        eprintln!("threadtest: sched_setaffinity failed; running unpinned");
    }
}

/// One threadtest worker: `iterations` times, allocate `ptrs.len()` objects,
/// then free them.
#[inline(never)]
fn worker<A: GlobalAlloc>(a: &A, ptrs: &mut [*mut u8], iterations: usize) {
    let layout = Layout::new::<Foo>();
    for _ in 0..iterations {
        for slot in ptrs.iter_mut() {
            // SAFETY: `layout` has a non-zero size.
            let p = unsafe { a.alloc(layout) };
            if p.is_null() {
                std::process::abort();
            }
            // SAFETY: `p` is a fresh allocation for a `Foo`.
            unsafe { p.cast::<Foo>().write(Foo { x: 14, y: 29 }) };
            *slot = black_box(p);
        }
        for &p in ptrs.iter() {
            // SAFETY: `p` was allocated above with `layout` and is freed once.
            unsafe { a.dealloc(black_box(p), layout) };
        }
    }
}

/// Seconds for one threadtest run with `threads` threads.
fn threadtest<A: GlobalAlloc + Sync>(
    a: &'static A,
    threads: usize,
    n: usize,
    iterations: usize,
) -> f64 {
    let start_line = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let start_line = &start_line;
                s.spawn(move || {
                    pin(t);
                    let mut ptrs = vec![std::ptr::null_mut::<u8>(); n / threads];
                    start_line.wait();
                    let t0 = Instant::now();
                    worker(a, &mut ptrs, iterations);
                    (t0, Instant::now())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("threadtest worker panicked"))
            .collect()
    });
    span_seconds(&spans)
}

/// Seconds from the first start to the last end, as measured by the
/// workers themselves (the coordinating thread may not be scheduled when
/// they start: the machine has 2 CPUs).
fn span_seconds(spans: &[(Instant, Instant)]) -> f64 {
    let start = spans.iter().map(|s| s.0).min().expect("no worker");
    let end = spans.iter().map(|s| s.1).max().expect("no worker");
    (end - start).as_secs_f64()
}

/// A bounded single-producer/single-consumer ring of pointers.
struct Ring {
    slots: Box<[AtomicUsize]>,
    head: Padded<AtomicUsize>,
    tail: Padded<AtomicUsize>,
}

#[repr(align(128))]
struct Padded<T>(T);

impl Ring {
    fn new(capacity: usize) -> Self {
        Ring {
            slots: (0..capacity).map(|_| AtomicUsize::new(0)).collect(),
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
        }
    }
}

/// Object sizes the producer cycles through (all small classes).
const XSIZES: [usize; 8] = [8, 16, 32, 48, 64, 96, 128, 256];

fn producer<A: GlobalAlloc>(a: &A, ring: &Ring, total: usize) {
    let cap = ring.slots.len();
    let mut tail = 0usize;
    let mut head_cache = 0usize;
    for i in 0..total {
        let size = XSIZES[i % XSIZES.len()];
        let layout = Layout::from_size_align(size, 8).expect("valid layout");
        // SAFETY: non-zero size.
        let p = unsafe { a.alloc(layout) };
        if p.is_null() {
            std::process::abort();
        }
        // SAFETY: at least 8 bytes: the object carries its own size.
        unsafe { p.cast::<usize>().write(size) };
        let p = black_box(p);
        while tail - head_cache == cap {
            head_cache = ring.head.0.load(Ordering::Acquire);
            std::hint::spin_loop();
        }
        ring.slots[tail % cap].store(p as usize, Ordering::Relaxed);
        tail += 1;
        ring.tail.0.store(tail, Ordering::Release);
    }
}

fn consumer<A: GlobalAlloc>(a: &A, ring: &Ring, total: usize) {
    let cap = ring.slots.len();
    let mut head = 0usize;
    let mut tail_cache = 0usize;
    while head < total {
        while head == tail_cache {
            tail_cache = ring.tail.0.load(Ordering::Acquire);
            std::hint::spin_loop();
        }
        let p = black_box(ring.slots[head % cap].load(Ordering::Relaxed) as *mut u8);
        head += 1;
        ring.head.0.store(head, Ordering::Release);
        // SAFETY: the producer wrote the size in the first word.
        let size = unsafe { p.cast::<usize>().read() };
        let layout = Layout::from_size_align(size, 8).expect("valid layout");
        // SAFETY: allocated by the producer with this layout, freed once.
        unsafe { a.dealloc(p, layout) };
    }
}

/// Seconds to pass `total` objects from a producer on CPU 0 to a consumer
/// on CPU 1.
fn xthread<A: GlobalAlloc + Sync>(a: &'static A, total: usize) -> f64 {
    let ring = Ring::new(4096);
    let start_line = Barrier::new(2);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let (ring, start_line) = (&ring, &start_line);
        let p = s.spawn(move || {
            pin(0);
            start_line.wait();
            let t0 = Instant::now();
            producer(a, ring, total);
            (t0, Instant::now())
        });
        let c = s.spawn(move || {
            pin(1);
            start_line.wait();
            let t0 = Instant::now();
            consumer(a, ring, total);
            (t0, Instant::now())
        });
        vec![
            p.join().expect("producer panicked"),
            c.join().expect("consumer panicked"),
        ]
    });
    span_seconds(&spans)
}

#[derive(Clone, Copy)]
enum Cell {
    Threadtest {
        name: &'static str,
        threads: usize,
        n: usize,
        iterations: usize,
    },
    Xthread {
        total: usize,
    },
}

impl Cell {
    fn name(&self) -> &'static str {
        match self {
            Cell::Threadtest { name, .. } => name,
            Cell::Xthread { .. } => "xthread",
        }
    }

    fn run(&self, allocator: &str) -> f64 {
        match *self {
            Cell::Threadtest {
                threads,
                n,
                iterations,
                ..
            } => match allocator {
                "ours" => threadtest(&OURS, threads, n, iterations),
                "glibc" => threadtest(&GLIBC, threads, n, iterations),
                "jemalloc" => threadtest(&JEMALLOC, threads, n, iterations),
                "mimalloc" => threadtest(&MIMALLOC, threads, n, iterations),
                _ => unreachable!(),
            },
            Cell::Xthread { total } => match allocator {
                "ours" => xthread(&OURS, total),
                "glibc" => xthread(&GLIBC, total),
                "jemalloc" => xthread(&JEMALLOC, total),
                "mimalloc" => xthread(&MIMALLOC, total),
                _ => unreachable!(),
            },
        }
    }

    fn describe(&self) -> String {
        match *self {
            Cell::Threadtest {
                threads,
                n,
                iterations,
                ..
            } => {
                format!("threadtest N={n} i={iterations} t={threads}, 8-byte objects")
            }
            Cell::Xthread { total } => {
                format!("producer/consumer, {total} objects of 8..256 bytes, ring of 4096")
            }
        }
    }
}

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-threadtest",
    about = "./ebb bench threadtest: our allocator against glibc, jemalloc and mimalloc"
)]
struct Options {
    /// Smaller cells, for a quick look.
    #[arg(long)]
    quick: bool,
    /// Runs per cell and allocator (the median is reported).
    #[arg(long, value_name = "K", default_value = "5")]
    runs: std::num::NonZeroUsize,
    /// Only these allocators: ours, glibc, jemalloc, mimalloc (comma-separated).
    #[arg(long, value_name = "LIST")]
    only: Option<String>,
    /// Only this cell: I_1, I_2, II_1, II_2 or xthread.
    #[arg(long, value_name = "NAME")]
    cell: Option<String>,
}

fn parse_args() -> Options {
    <Options as clap::Parser>::parse()
}

fn cells(quick: bool) -> Vec<Cell> {
    let (n1, i1, n2, i2, x) = if quick {
        (10_000, 10, 100, 10_000, 200_000)
    } else {
        (100_000, 1000, 100, 1_000_000, 20_000_000)
    };
    vec![
        Cell::Threadtest {
            name: "I_1",
            threads: 1,
            n: n1,
            iterations: i1,
        },
        Cell::Threadtest {
            name: "I_2",
            threads: 2,
            n: n1,
            iterations: i1,
        },
        Cell::Threadtest {
            name: "II_1",
            threads: 1,
            n: n2,
            iterations: i2,
        },
        Cell::Threadtest {
            name: "II_2",
            threads: 2,
            n: n2,
            iterations: i2,
        },
        Cell::Xthread { total: x },
    ]
}

/// A grouped bar chart: one group per cell, one bar per allocator, bar
/// height = time relative to the fastest allocator of the cell.
fn svg_chart(
    cells: &[Cell],
    allocators: &[&str],
    seconds: &dyn Fn(&str, &str) -> f64,
    subtitle: &str,
) -> String {
    const COLORS: [&str; 4] = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e"];
    let (w, h) = (900.0, 460.0);
    let (left, right, top, bottom) = (70.0, 20.0, 60.0, 80.0);
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let rel = |c: &str, a: &str| {
        let best = allocators
            .iter()
            .map(|b| seconds(c, b))
            .fold(f64::INFINITY, f64::min);
        seconds(c, a) / best
    };
    let max_rel = cells
        .iter()
        .flat_map(|c| allocators.iter().map(move |a| rel(c.name(), a)))
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max);
    let y_max = (max_rel * 1.15).ceil().max(2.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="17" text-anchor="middle">threadtest and cross-thread frees: time relative to the fastest (lower is better)</text>"#,
        w / 2.0
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="44" font-size="12" text-anchor="middle" fill="#555">{subtitle}</text>"##,
        w / 2.0
    );
    // Axis and grid.
    // `y_max` is a small positive whole number (at least 2).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let steps = y_max as usize;
    for i in 0..=steps {
        let v = i as f64;
        let y = top + plot_h - v / y_max * plot_h;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{v:.0}x</text>"##,
            w - right,
            left - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="#333"/>"##,
        top + plot_h
    );
    let group_w = plot_w / cells.len() as f64;
    let bar_w = group_w * 0.8 / allocators.len() as f64;
    for (gi, c) in cells.iter().enumerate() {
        let gx = left + gi as f64 * group_w + group_w * 0.1;
        for (ai, a) in allocators.iter().enumerate() {
            let r = rel(c.name(), a);
            if !r.is_finite() {
                continue;
            }
            let bh = (r / y_max * plot_h).min(plot_h);
            let x = gx + ai as f64 * bar_w;
            let y = top + plot_h - bh;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{a} {}: {:.3} s ({r:.2}x)</title></rect>"#,
                bar_w - 2.0,
                COLORS[ai % COLORS.len()],
                c.name(),
                seconds(c.name(), a)
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{:.2}s</text>"#,
                x + bar_w / 2.0 - 1.0,
                y - 3.0,
                seconds(c.name(), a)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
            gx + group_w * 0.4,
            top + plot_h + 18.0,
            c.name()
        );
    }
    // Legend.
    for (ai, a) in allocators.iter().enumerate() {
        let x = left + ai as f64 * 150.0;
        let y = h - 28.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="14" height="14" fill="{}"/><text x="{}" y="{y}" font-size="13">{a}</text>"#,
            y - 11.0,
            COLORS[ai % COLORS.len()],
            x + 20.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn main() {
    let opts = parse_args();
    let allocators: Vec<&str> = ALLOCATORS
        .iter()
        .copied()
        .filter(|a| {
            opts.only
                .as_deref()
                .is_none_or(|o| o.split(',').any(|n| n == *a))
        })
        .collect();
    if allocators.is_empty() {
        eprintln!("threadtest: --only must name some of {ALLOCATORS:?} (comma-separated)");
        std::process::exit(2);
    }
    let cells: Vec<Cell> = cells(opts.quick)
        .into_iter()
        .filter(|c| opts.cell.as_deref().is_none_or(|n| n == c.name()))
        .collect();
    let mut results: Vec<(String, String, f64)> = Vec::new();
    for cell in &cells {
        eprintln!("threadtest: {}", cell.describe());
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); allocators.len()];
        // Interleave allocators run by run, so drifting machine load hits
        // all of them alike.
        for _ in 0..opts.runs.get() {
            for (ai, a) in allocators.iter().enumerate() {
                samples[ai].push(cell.run(a));
            }
        }
        for (ai, a) in allocators.iter().enumerate() {
            let m = median(&mut samples[ai]);
            eprintln!(
                "  {a:>9}: {m:.4} s  (runs: {:?})",
                samples[ai]
                    .iter()
                    .map(|v| (v * 1e4).round() / 1e4)
                    .collect::<Vec<_>>()
            );
            results.push((cell.name().to_owned(), (*a).to_owned(), m));
        }
    }
    let seconds = |c: &str, a: &str| {
        results
            .iter()
            .find(|(rc, ra, _)| rc == c && ra == a)
            .map_or(f64::NAN, |r| r.2)
    };

    let mut report = Report::new("threadtest");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut line = String::from("./ebb bench threadtest");
    if !args.is_empty() {
        line.push_str(" -- ");
        line.push_str(&args.join(" "));
    }
    report.command(line);
    let note_runs = format!("median of {} runs", opts.runs.get());
    for cell in &cells {
        for a in &allocators {
            report.metric(
                format!("{a}_{}_s", cell.name()),
                seconds(cell.name(), a),
                "s",
                format!("{}; {note_runs}", cell.describe()),
            );
        }
    }
    if allocators.contains(&"ours") && allocators.len() > 1 {
        for cell in &cells {
            let best_other = allocators
                .iter()
                .filter(|a| **a != "ours")
                .map(|a| seconds(cell.name(), a))
                .fold(f64::INFINITY, f64::min);
            let ratio = seconds(cell.name(), "ours") / best_other;
            let target = if cell.name() == "xthread" {
                "target <= 1.2"
            } else {
                "target < 1.0"
            };
            report.metric(
                format!("ratio_{}", cell.name()),
                ratio,
                "x",
                format!("ours / best of glibc, jemalloc, mimalloc; {target}"),
            );
        }
    }
    let scale = if opts.quick {
        "--quick sizes"
    } else {
        "full sizes"
    };
    let svg = svg_chart(
        &cells,
        &allocators,
        &seconds,
        &format!("{scale}; {note_runs} per bar; threads pinned; bar label = seconds"),
    );
    match report.finish() {
        Ok(_) => {}
        Err(e) => {
            eprintln!("threadtest: {e}");
            std::process::exit(1);
        }
    }
    let path = output_dir().join("threadtest.svg");
    match std::fs::write(&path, svg) {
        Ok(()) => println!("  wrote {}", path.display()),
        Err(e) => {
            eprintln!("threadtest: cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
    }
}
