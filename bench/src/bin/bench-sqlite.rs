//! `./ebb bench sqlite`: SQLite, unchanged, on Ebbflow against SQLite on
//! Linux (issue 18, "Benchmarks"), the same programs from the same
//! sources in one run:
//!
//! - **Linux guest vs native.** The project's comparison Linux guest
//!   (Debian's cloud kernel, q35, one vCPU, 512 MiB, TCG) runs the
//!   programs built for Linux (gcc, glibc) with the database on a tmpfs;
//!   Ebbflow's native image runs the same sources built with Ebbflow's
//!   musl, the database on its in-memory file system; the same QEMU, the
//!   same virtual hardware. One guest boot runs every program in turn
//!   (`ebb_testbed::linux_guest::run_batch`); natively each program is
//!   its own image (`./ebb run c-program --native`). A boot is not timed:
//!   every figure is what the program measures itself on the guest's
//!   monotonic clock.
//! - **Linux process vs hosted.** The same programs as Linux processes on
//!   the host, glibc against Ebbflow's musl with the hosted personality,
//!   the database in a directory on the host's `/dev/shm` (a tmpfs, as in
//!   the guest; a disk's fsync would swamp the difference).
//!
//! Programs: `sqlite-kv` (records, then `--runs` runs of `--operations`
//! operations, Zipf keys, each operation a transaction) at 50 % and 100 %
//! reads; `speedtest1 --size N`, SQLite's own benchmark; and
//! `syscall_cost` (getpid through syscall(2)). Every platform must print
//! the same sqlite-kv checksums and speedtest1 tests, or the bench fails.
//!
//! Keys: `ratio_5050`, `ratio_read` (median run time in the Linux guest /
//! natively; targets ≥ 1.5 and ≥ 1.0), `p95_ours`, `p95_linux`,
//! `stdev_ratio` (the guest's run-time deviation / native's, 50/50),
//! `speedtest1_ratio` (guest total / native total), `syscall_ns_native`,
//! `syscall_ns_hosted`, `syscall_ns_linux_guest`,
//! `syscall_ns_linux_process`, and the hosted pair's `hosted_ratio_5050`,
//! `hosted_ratio_read` (Linux process / hosted); CDFs of the run times in
//! `target/bench/sqlite-5050.svg` and `sqlite-read.svg`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use ebb_bench::plot::{cdf_points, cdf_svg_of, Curve};
use ebb_bench::report::{exit_code, median, output_dir, percentile, workspace_root};
use ebb_bench::sqlite_runs::{
    parse_kv, parse_speedtest_total, parse_syscall_ns, section, speedtest_tests, stdev, KvRuns,
};
use ebb_bench::vm::{load_average, report_with_load};
use ebb_cbuild::posix_programs::{self, Dirs};
use ebb_cbuild::sqlite;
use ebb_testbed::child::run_bounded;
use ebb_testbed::linux_guest::{self, default_cache_dir, GuestSettings};
use ebb_testbed::Need;

/// The workload, the same everywhere.
#[derive(Clone, Copy)]
struct Workload {
    records: u32,
    operations: u32,
    runs: u32,
    speedtest_size: u32,
    syscalls: u32,
}

impl Workload {
    fn kv_args(&self, reads: u32, database: &str) -> Vec<String> {
        [
            "--records".to_owned(),
            self.records.to_string(),
            "--operations".to_owned(),
            self.operations.to_string(),
            "--runs".to_owned(),
            self.runs.to_string(),
            "--reads".to_owned(),
            reads.to_string(),
            database.to_owned(),
        ]
        .to_vec()
    }

    fn speedtest_args(&self, database: &str) -> Vec<String> {
        vec![
            "--size".to_owned(),
            self.speedtest_size.to_string(),
            database.to_owned(),
        ]
    }
}

/// One program built three ways.
struct Program {
    ebbflow: PathBuf,
    linux: PathBuf,
    native_inputs: String,
}

/// The three programs.
struct Programs {
    kv: Program,
    speedtest: Program,
    syscall_cost: Program,
}

/// What one platform printed for every program.
struct Outputs {
    kv50: KvRuns,
    kv100: KvRuns,
    speedtest: String,
    syscall_ns: f64,
}

/// Both guests' virtual hardware: the comparison guest's shape
/// (`GuestSettings::default()`: q35, one vCPU, 512 MiB) under TCG, which
/// the native runs are told explicitly, so that a host with KVM does not
/// compare KVM against TCG.
const ACCEL: &str = "tcg";
const MEMORY: &str = "512M";
const VCPUS: u16 = 1;

/// One program's limit natively or hosted; the guest's whole batch has
/// four of them.
const PROGRAM_LIMIT: Duration = Duration::from_secs(900);

fn build(root: &Path) -> Result<Programs, String> {
    eprintln!("sqlite: building SQLite, sqlite-kv, speedtest1 and syscall_cost (minutes the first time)...");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let dirs = Dirs::under(root, &target);
    let joined = |inputs: &[PathBuf]| {
        inputs
            .iter()
            .map(|input| input.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    };
    let on_sqlite = sqlite::prepare(&dirs, false).map_err(|e| format!("building SQLite: {e}"))?;
    let find = |name: &str| {
        on_sqlite
            .iter()
            .find(|program| program.name == name)
            .map(|program| Program {
                ebbflow: program.ebbflow.clone(),
                linux: program.linux.clone(),
                native_inputs: joined(&program.native_inputs),
            })
            .ok_or_else(|| format!("SQLite's build made no {name}"))
    };
    let (kv, speedtest) = (find("sqlite-kv")?, find("speedtest1")?);
    let (_, posix) =
        posix_programs::prepare(&dirs).map_err(|e| format!("building syscall_cost: {e}"))?;
    let cost = posix
        .into_iter()
        .find(|program| program.name == "syscall_cost")
        .ok_or("no syscall_cost among the POSIX programs")?;
    Ok(Programs {
        kv,
        speedtest,
        syscall_cost: Program {
            native_inputs: joined(&cost.native_inputs),
            ebbflow: cost.ebbflow,
            linux: cost.linux,
        },
    })
}

/// Runs `command` bounded; what it printed, or an error with it.
fn output_of(mut command: Command, what: &str) -> Result<String, String> {
    let finished = run_bounded(&mut command, PROGRAM_LIMIT);
    let text = format!("{}{}", finished.stdout, finished.stderr);
    if !finished.status.success() {
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        return Err(format!(
            "{what} failed ({}):\n{}",
            finished.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    Ok(text)
}

fn kv_of(text: &str, what: &str) -> Result<KvRuns, String> {
    parse_kv(text).ok_or_else(|| format!("{what} printed no runs and checksums:\n{text}"))
}

/// Every program natively, each its own image.
fn run_native(root: &Path, programs: &Programs, workload: &Workload) -> Result<Outputs, String> {
    let native = |program: &Program, args: &[String], what: &str| {
        eprintln!("sqlite: {what} natively...");
        let mut command = Command::new(root.join("ebb"));
        command
            .args(["run", "c-program", "--native", "--timeout", "900"])
            .args(["--machine", "q35", "--accel", ACCEL, "--mem", MEMORY])
            .args(["--cores", &VCPUS.to_string(), "--"])
            .args(args)
            .env("EBB_C_PROGRAM", &program.native_inputs);
        output_of(command, &format!("{what} natively"))
    };
    let kv50 = native(
        &programs.kv,
        &workload.kv_args(50, "/tmp/kv.db"),
        "sqlite-kv 50/50",
    )?;
    let kv100 = native(
        &programs.kv,
        &workload.kv_args(100, "/tmp/kv.db"),
        "sqlite-kv reads",
    )?;
    let speedtest = native(
        &programs.speedtest,
        &workload.speedtest_args("/tmp/speedtest1.db"),
        "speedtest1",
    )?;
    let cost = native(
        &programs.syscall_cost,
        &[workload.syscalls.to_string()],
        "syscall_cost",
    )?;
    Ok(Outputs {
        kv50: kv_of(&kv50, "sqlite-kv natively")?,
        kv100: kv_of(&kv100, "sqlite-kv natively")?,
        speedtest,
        syscall_ns: parse_syscall_ns(&cost).ok_or("syscall_cost printed no figure natively")?,
    })
}

/// Every program as a process on the host: `pick` chooses the build.
fn run_processes(
    programs: &Programs,
    workload: &Workload,
    pick: fn(&Program) -> &Path,
    what: &str,
) -> Result<Outputs, String> {
    let dir = Path::new("/dev/shm").join(format!("ebb-bench-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let result = (|| {
        let run = |program: &Program, args: Vec<String>, name: &str| {
            eprintln!("sqlite: {name} as a {what}...");
            let mut command = Command::new(pick(program));
            command.args(args).current_dir(&dir);
            output_of(command, &format!("{name} as a {what}"))
        };
        let database = |name: &str| dir.join(name).display().to_string();
        let kv50 = run(
            &programs.kv,
            workload.kv_args(50, &database("kv50.db")),
            "sqlite-kv 50/50",
        )?;
        let kv100 = run(
            &programs.kv,
            workload.kv_args(100, &database("kv100.db")),
            "sqlite-kv reads",
        )?;
        let speedtest = run(
            &programs.speedtest,
            workload.speedtest_args(&database("speedtest1.db")),
            "speedtest1",
        )?;
        let cost = run(
            &programs.syscall_cost,
            vec![workload.syscalls.to_string()],
            "syscall_cost",
        )?;
        Ok(Outputs {
            kv50: kv_of(&kv50, what)?,
            kv100: kv_of(&kv100, what)?,
            speedtest,
            syscall_ns: parse_syscall_ns(&cost)
                .ok_or_else(|| format!("syscall_cost printed no figure as a {what}"))?,
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Every program in one boot of the Linux guest.
fn run_linux_guest(programs: &Programs, workload: &Workload) -> Result<Outputs, String> {
    eprintln!("sqlite: the Linux guest (built once, then cached in target/linux-guest)...");
    let built = linux_guest::build_or_reuse(&default_cache_dir(), false)?;
    let files = [
        ("usr/bin/sqlite-kv", programs.kv.linux.as_path()),
        ("usr/bin/speedtest1", programs.speedtest.linux.as_path()),
        (
            "usr/bin/syscall_cost",
            programs.syscall_cost.linux.as_path(),
        ),
    ];
    let words = |args: Vec<String>| args.join(" ");
    let script = format!(
        "set -e\ncd /tmp\n\
         echo '== kv50'\n/usr/bin/sqlite-kv {}\n\
         echo '== kv100'\n/usr/bin/sqlite-kv {}\n\
         echo '== speedtest1'\n/usr/bin/speedtest1 {}\n\
         echo '== syscall_cost'\n/usr/bin/syscall_cost {}\n\
         echo '== end'\n",
        words(workload.kv_args(50, "/tmp/kv50.db")),
        words(workload.kv_args(100, "/tmp/kv100.db")),
        words(workload.speedtest_args("/tmp/speedtest1.db")),
        workload.syscalls
    );
    let image = linux_guest::with_batch(&built.image, "sqlite", &files, &script)?;
    let settings = GuestSettings {
        timeout_secs: 4 * PROGRAM_LIMIT.as_secs(),
        memory: MEMORY.to_owned(),
        cpus: VCPUS,
        accel: ACCEL.to_owned(),
        ..GuestSettings::default()
    };
    eprintln!("sqlite: every program in the Linux guest...");
    let lines = linux_guest::run_batch(&image, &settings, 4 * PROGRAM_LIMIT)?;
    let console = lines.join("\n") + "\n";
    let part = |name: &str| {
        section(&console, &format!("== {name}\n"), "== ")
            .ok_or_else(|| format!("the guest printed no {name} section:\n{console}"))
    };
    Ok(Outputs {
        kv50: kv_of(part("kv50")?, "sqlite-kv in the Linux guest")?,
        kv100: kv_of(part("kv100")?, "sqlite-kv in the Linux guest")?,
        speedtest: part("speedtest1")?.to_owned(),
        syscall_ns: parse_syscall_ns(part("syscall_cost")?)
            .ok_or("syscall_cost printed no figure in the Linux guest")?,
    })
}

/// The same checksums and tests everywhere, or an error naming the odd one.
fn check_same(all: &[(&str, &Outputs)]) -> Result<(), String> {
    let (first_name, first) = all[0];
    for &(name, outputs) in &all[1..] {
        for (mix, a, b) in [
            ("50/50", &first.kv50, &outputs.kv50),
            ("reads", &first.kv100, &outputs.kv100),
        ] {
            if a.checksums != b.checksums {
                return Err(format!(
                    "sqlite-kv {mix}: {first_name} printed '{}', {name} '{}'",
                    a.checksums, b.checksums
                ));
            }
        }
        if speedtest_tests(&first.speedtest) != speedtest_tests(&outputs.speedtest) {
            return Err(format!(
                "speedtest1 ran other tests on {name} than on {first_name}"
            ));
        }
    }
    Ok(())
}

fn total(outputs: &Outputs, name: &str) -> Result<f64, String> {
    parse_speedtest_total(&outputs.speedtest)
        .ok_or_else(|| format!("speedtest1 printed no TOTAL on {name}"))
}

fn median_of(runs: &KvRuns) -> f64 {
    median(&mut runs.run_ms.clone())
}

fn p95_of(runs: &KvRuns) -> f64 {
    let mut sorted = runs.run_ms.clone();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, 95.0)
}

fn write_cdf(name: &str, title: &str, curves: &[(&str, &str, &KvRuns)]) -> Result<(), String> {
    let curves: Vec<Curve> = curves
        .iter()
        .map(|&(label, color, runs)| Curve {
            label: label.to_owned(),
            color: color.to_owned(),
            points: cdf_points(&runs.run_ms),
        })
        .collect();
    let path = output_dir().join(format!("{name}.svg"));
    std::fs::create_dir_all(output_dir()).map_err(|e| format!("creating target/bench: {e}"))?;
    std::fs::write(&path, cdf_svg_of(title, "runs", "ms", &curves))
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("  wrote {}", path.display());
    Ok(())
}

fn bench(workload: Workload) -> Result<(), String> {
    ebb_testbed::require(&[Need::Qemu]).map_err(|skip| format!("cannot run: {skip}"))?;
    let load_start = load_average();
    let root = workspace_root();
    let programs = build(&root)?;
    let native = run_native(&root, &programs, &workload)?;
    let guest = run_linux_guest(&programs, &workload)?;
    let hosted = run_processes(&programs, &workload, |p| &p.ebbflow, "hosted process")?;
    let process = run_processes(&programs, &workload, |p| &p.linux, "Linux process")?;
    check_same(&[
        ("the Linux guest", &guest),
        ("native", &native),
        ("hosted", &hosted),
        ("a Linux process", &process),
    ])?;

    let mut report = report_with_load("sqlite", ACCEL, load_start);
    let runs = format!("median of {} runs", workload.runs);
    let ratio = |linux: &KvRuns, ours: &KvRuns| median_of(linux) / median_of(ours);
    report
        .metric(
            "ratio_5050",
            ratio(&guest.kv50, &native.kv50),
            "x",
            format!("Linux guest / native run time, 50% reads, {runs} (target >= 1.5)"),
        )
        .metric(
            "ratio_read",
            ratio(&guest.kv100, &native.kv100),
            "x",
            "the same, 100% reads (target >= 1.0)",
        )
        .metric(
            "median_ms_linux_5050",
            median_of(&guest.kv50),
            "ms",
            runs.clone(),
        )
        .metric(
            "median_ms_ours_5050",
            median_of(&native.kv50),
            "ms",
            runs.clone(),
        )
        .metric(
            "median_ms_linux_read",
            median_of(&guest.kv100),
            "ms",
            runs.clone(),
        )
        .metric(
            "median_ms_ours_read",
            median_of(&native.kv100),
            "ms",
            runs.clone(),
        )
        .metric(
            "p95_linux",
            p95_of(&guest.kv50),
            "ms",
            "95th percentile run time, Linux guest, 50/50",
        )
        .metric(
            "p95_ours",
            p95_of(&native.kv50),
            "ms",
            "95th percentile run time, native, 50/50",
        )
        .metric(
            "stdev_ratio",
            stdev(&guest.kv50.run_ms) / stdev(&native.kv50.run_ms),
            "x",
            "run-time standard deviation, Linux guest / native, 50/50",
        )
        .metric(
            "speedtest1_ratio",
            total(&guest, "the Linux guest")? / total(&native, "native")?,
            "x",
            format!(
                "speedtest1 --size {} total, Linux guest / native",
                workload.speedtest_size
            ),
        )
        .metric(
            "speedtest1_s_linux",
            total(&guest, "the Linux guest")?,
            "s",
            "",
        )
        .metric("speedtest1_s_ours", total(&native, "native")?, "s", "")
        .metric(
            "syscall_ns_native",
            native.syscall_ns,
            "ns",
            "getpid through syscall(2), natively (a function call)",
        )
        .metric(
            "syscall_ns_linux_guest",
            guest.syscall_ns,
            "ns",
            "getpid in the Linux guest (a system call under TCG)",
        )
        .metric(
            "syscall_ns_hosted",
            hosted.syscall_ns,
            "ns",
            "getpid on the hosted personality (dispatch, then Linux)",
        )
        .metric(
            "syscall_ns_linux_process",
            process.syscall_ns,
            "ns",
            "getpid in a Linux process on the host",
        )
        .metric(
            "hosted_ratio_5050",
            ratio(&process.kv50, &hosted.kv50),
            "x",
            format!("Linux process / hosted run time on the host, 50% reads, {runs}"),
        )
        .metric(
            "hosted_ratio_read",
            ratio(&process.kv100, &hosted.kv100),
            "x",
            "the same, 100% reads",
        )
        .metric(
            "records",
            f64::from(workload.records),
            "",
            "sqlite-kv --records",
        )
        .metric(
            "operations",
            f64::from(workload.operations),
            "",
            "sqlite-kv --operations, per run",
        )
        .metric("runs", f64::from(workload.runs), "", "sqlite-kv --runs");
    report.finish()?;

    write_cdf(
        "sqlite-5050",
        "sqlite-kv 50% reads",
        &[
            ("Linux guest", "#d62728", &guest.kv50),
            ("Ebbflow native", "#1f77b4", &native.kv50),
            ("Linux process", "#ff7f0e", &process.kv50),
            ("Ebbflow hosted", "#2ca02c", &hosted.kv50),
        ],
    )?;
    write_cdf(
        "sqlite-read",
        "sqlite-kv 100% reads",
        &[
            ("Linux guest", "#d62728", &guest.kv100),
            ("Ebbflow native", "#1f77b4", &native.kv100),
            ("Linux process", "#ff7f0e", &process.kv100),
            ("Ebbflow hosted", "#2ca02c", &hosted.kv100),
        ],
    )?;
    Ok(())
}

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-sqlite",
    about = "./ebb bench sqlite: SQLite unchanged natively and hosted against the same SQLite on Linux (a guest under the same QEMU, and a process)"
)]
struct Args {
    /// sqlite-kv's table size.
    #[arg(long, default_value_t = 10_000)]
    records: u32,
    /// sqlite-kv's operations per run.
    #[arg(long, default_value_t = 2_000)]
    operations: u32,
    /// sqlite-kv's runs per mix (the medians are over these).
    #[arg(long, default_value_t = 20)]
    runs: u32,
    /// speedtest1's --size.
    #[arg(long, default_value_t = 10)]
    speedtest_size: u32,
    /// getpid calls timed by syscall_cost.
    #[arg(long, default_value_t = 200_000)]
    syscalls: u32,
    /// A short run: 3 runs of 500 operations, speedtest1 --size 2.
    #[arg(long)]
    quick: bool,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let workload = if args.quick {
        Workload {
            records: 2_000,
            operations: 500,
            runs: 3,
            speedtest_size: 2,
            syscalls: 20_000,
        }
    } else {
        Workload {
            records: args.records,
            operations: args.operations,
            runs: args.runs,
            speedtest_size: args.speedtest_size,
            syscalls: args.syscalls,
        }
    };
    exit_code("sqlite", bench(workload))
}
