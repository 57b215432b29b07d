//! `./ebb bench ebbref`: what resolving an `EbbRef` costs.
//!
//! The figure that matters is exact: instructions per call, counted by
//! `valgrind --tool=callgrind`, of calling a small inlinable method through
//! an `EbbRef` minus calling it directly on a reference. Each variant runs
//! under callgrind at two call counts; the difference between the two
//! totals divided by the difference in calls is the per-call cost, with
//! start-up and tear-down cancelled out. Nanosecond timings of the same
//! loops (and of a `HashMap` lookup, the naive alternative) are reported
//! for information.

use std::cell::Cell;
use std::collections::HashMap;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use ebb_bench::report::{median, run_callgrind, Report};
use ebb_core::{
    enter_core, CoreId, EbbError, EbbRef, Multicore, MulticoreEbb, MulticoreRoot, Node,
};

/// The representative: one counter, bumped by a method small enough to
/// inline to one instruction.
struct Counter {
    value: Cell<u64>,
}

impl MulticoreEbb for Counter {
    type Root = ();

    fn create_rep(_: &'static MulticoreRoot<Self>, _: CoreId) -> Result<Self, EbbError> {
        Ok(Counter {
            value: Cell::new(0),
        })
    }
}

impl Counter {
    #[inline(always)]
    fn bump(&self) {
        self.value.set(self.value.get() + 1);
    }
}

type CounterRef = EbbRef<Multicore<Counter>>;

/// Calls through the EbbRef; `black_box` keeps the handle opaque in every
/// iteration, as a handle loaded from memory would be.
#[inline(never)]
fn through_ebbref(counter: CounterRef, calls: u64) {
    for _ in 0..calls {
        black_box(counter).rep().bump();
    }
}

/// The same calls on a plain reference, opaque in the same way.
#[inline(never)]
fn direct(rep: &Counter, calls: u64) {
    for _ in 0..calls {
        black_box(rep).bump();
    }
}

/// The naive alternative: a hash map from id to representative.
#[inline(never)]
fn through_hashmap(map: &HashMap<u32, &Counter>, id: u32, calls: u64) {
    for _ in 0..calls {
        map[&black_box(id)].bump();
    }
}

const SMALL: u64 = 1_000_000;
const LARGE: u64 = 3_000_000;
const TIMED_CALLS: u64 = 100_000_000;

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-ebbref",
    about = "./ebb bench ebbref: the cost of an EbbRef call"
)]
struct Args {
    /// Only make CALLS calls the MODE way (ebbref, direct or hashmap), for
    /// a profiler.
    #[arg(long, num_args = 2, value_names = ["MODE", "CALLS"])]
    probe: Option<Vec<String>>,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let result = match args.probe.as_deref() {
        Some([mode, calls]) => probe_mode(mode, calls),
        Some(_) => Err("--probe takes MODE and CALLS".to_owned()),
        None => run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ebbref: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Makes this thread core 0 of a one-core node with a warm counter Ebb,
/// and runs `body` with the handle and its representative.
fn with_counter<R>(body: impl FnOnce(CounterRef, &'static Counter) -> R) -> Result<R, String> {
    let node = Node::standalone(1);
    let counter = Multicore::<Counter>::create_on(node, ()).map_err(|e| e.to_string())?;
    let _core = enter_core(CoreId(0), node).map_err(|e| e.to_string())?;
    let rep = counter.get().map_err(|e| e.to_string())?;
    Ok(body(counter, rep))
}

fn probe_mode(mode: &str, calls: &str) -> Result<(), String> {
    let calls: u64 = calls
        .parse()
        .map_err(|_| format!("CALLS must be a number, not '{calls}'"))?;
    with_counter(|counter, rep| {
        match mode {
            "ebbref" => through_ebbref(counter, calls),
            "direct" => direct(rep, calls),
            "hashmap" => {
                let map = HashMap::from([(counter.id().raw(), rep)]);
                through_hashmap(&map, counter.id().raw(), calls);
            }
            other => return Err(format!("unknown mode '{other}'")),
        }
        black_box(rep.value.get());
        Ok(())
    })?
}

fn per_call_instructions(mode: &str) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let small = run_callgrind(&exe, &["--probe", mode, &SMALL.to_string()])?;
    let large = run_callgrind(&exe, &["--probe", mode, &LARGE.to_string()])?;
    Ok((large as f64 - small as f64) / (LARGE - SMALL) as f64)
}

fn time_ns(body: impl Fn()) -> f64 {
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            body();
            start.elapsed().as_nanos() as f64 / TIMED_CALLS as f64
        })
        .collect();
    median(&mut runs)
}

fn run() -> Result<(), String> {
    println!(
        "ebbref: counting instructions under callgrind ({SMALL} and {LARGE} calls per variant)..."
    );
    let ebbref = per_call_instructions("ebbref")?;
    let direct_instructions = per_call_instructions("direct")?;
    let extra = ebbref - direct_instructions;

    println!("ebbref: timing {TIMED_CALLS} calls per variant, median of 5...");
    let (ebbref_ns, direct_ns, hashmap_ns) = with_counter(|counter, rep| {
        let map = HashMap::from([(counter.id().raw(), rep)]);
        (
            time_ns(|| through_ebbref(counter, TIMED_CALLS)),
            time_ns(|| direct(rep, TIMED_CALLS)),
            time_ns(|| through_hashmap(&map, counter.id().raw(), TIMED_CALLS)),
        )
    })?;

    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut report = Report::new("ebbref");
    report
        .metric(
            "extra_instructions_per_call",
            extra,
            "instr",
            "EbbRef call minus direct call, per call (callgrind); target <= 3",
        )
        .metric(
            "ebbref_instructions_per_call",
            ebbref,
            "instr",
            "loop iteration through the EbbRef",
        )
        .metric(
            "direct_instructions_per_call",
            direct_instructions,
            "instr",
            "loop iteration on a reference",
        )
        .metric(
            "ebbref_ns",
            ebbref_ns,
            "ns",
            "per call, median of 5 x 1e8 calls",
        )
        .metric(
            "direct_ns",
            direct_ns,
            "ns",
            "per call, median of 5 x 1e8 calls",
        )
        .metric(
            "hashmap_ns",
            hashmap_ns,
            "ns",
            "per call via std HashMap<u32, &Rep>, median of 5",
        )
        .command(format!(
            "valgrind --tool=callgrind {} --probe ebbref|direct {SMALL}|{LARGE}",
            exe.display()
        ))
        .command("./ebb bench ebbref");
    let path = report.finish()?;
    println!("wrote {}", path.display());
    if extra > 3.0 {
        println!("note: above the target of 3 extra instructions per call");
    }
    Ok(())
}
