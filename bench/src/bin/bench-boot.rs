//! `./ebb bench boot`: how fast a native image boots under QEMU (TCG here).
//!
//! * `boot_to_main_ms_1`, `boot_to_main_ms_4`: the guest's own measure, by
//!   its TSC, from the image's first instruction (the PVH entry) to the
//!   application's `main`, with every core started (`cores=1`, `cores=4`);
//!   q35, 512 MiB. The guest prints it with `-v` ("entry to main").
//! * `qemu_wall_ms_1`, `qemu_wall_ms_4`: QEMU's process from start to exit
//!   for an application that exits at once (`hello --help` returns from
//!   `main` without running the node), as `./ebb run` measures it around
//!   the QEMU process.
//! * `image_bytes`: hello's image as booted, stripped of the line tables
//!   that only the host uses to symbolize crash reports
//!   (`objcopy --strip-all`); `image_file_bytes` with them.
//!
//! Each figure is the median of 7 runs, 1 and 4 cores alternating, after a
//! run that builds the image; the minimum is reported too, since the
//! machine is shared and a busy host slows a TCG guest down a lot.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use ebb_bench::report::{median, minimum, workspace_root, Report};

const RUNS: usize = 7;

/// One boot: the guest's entry-to-main and QEMU's wall time, in ms.
struct Boot {
    to_main_ms: f64,
    qemu_wall_ms: f64,
}

fn ebb_run(root: &Path, cores: usize) -> Command {
    let mut command = Command::new("cargo");
    command
        .args(["run", "--quiet", "--release", "-p", "ebb-cli", "--"])
        .args([
            "run",
            "hello",
            "--native",
            "--machine",
            "q35",
            "--mem",
            "512M",
        ])
        .args(["--cores", &cores.to_string(), "--timeout", "120", "-v"])
        .args(["--", "--help"])
        .current_dir(root)
        .env("EBB_ROOT", root);
    command
}

fn boot(root: &Path, cores: usize) -> Result<Boot, String> {
    let output = ebb_run(root, cores)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "hello --native --cores {cores} failed ({}):\n{stdout}\n{stderr}",
            output.status
        ));
    }
    let to_main_ms = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("ebbflow native: entry to main "))
        .and_then(|rest| rest.strip_suffix(" ms"))
        .and_then(|ms| ms.parse::<f64>().ok())
        .ok_or_else(|| format!("no 'entry to main' line:\n{stdout}"))?;
    let qemu_wall_ms = stderr
        .lines()
        .find_map(|line| line.strip_prefix("ebb: QEMU exited with status "))
        .and_then(|rest| rest.split(" after ").nth(1))
        .and_then(|rest| rest.strip_suffix(" s"))
        .and_then(|s| s.parse::<f64>().ok())
        .map(|s| s * 1e3)
        .ok_or_else(|| format!("no 'QEMU exited' line:\n{stderr}"))?;
    Ok(Boot {
        to_main_ms,
        qemu_wall_ms,
    })
}

fn image_sizes(root: &Path) -> Result<(u64, u64), String> {
    let image = root.join("target/native/x86_64-unknown-none/release/hello");
    let stripped: PathBuf = root.join("target/bench/hello.stripped");
    std::fs::create_dir_all(root.join("target/bench")).map_err(|e| e.to_string())?;
    let status = Command::new("objcopy")
        .arg("--strip-all")
        .arg(&image)
        .arg(&stripped)
        .status()
        .map_err(|e| format!("objcopy (binutils) is missing: {e}"))?;
    if !status.success() {
        return Err(format!("objcopy --strip-all {} failed", image.display()));
    }
    let size = |path: &Path| {
        std::fs::metadata(path)
            .map(|m| m.len())
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    Ok((size(&stripped)?, size(&image)?))
}

fn run() -> Result<(), String> {
    let root = workspace_root();
    // Builds the image (and ebb-cli); not measured.
    boot(&root, 1)?;
    let (mut main_1, mut main_4, mut wall_1, mut wall_4) = (vec![], vec![], vec![], vec![]);
    for _ in 0..RUNS {
        let one = boot(&root, 1)?;
        main_1.push(one.to_main_ms);
        wall_1.push(one.qemu_wall_ms);
        let four = boot(&root, 4)?;
        main_4.push(four.to_main_ms);
        wall_4.push(four.qemu_wall_ms);
    }
    let (image_bytes, image_file_bytes) = image_sizes(&root)?;
    let how = format!("median of {RUNS} runs, q35, TCG, 512 MiB");
    let mut report = Report::new("boot");
    report
        .metric(
            "boot_to_main_ms_1",
            median(&mut main_1.clone()),
            "ms",
            format!("{how}; guest TSC from the PVH entry to main, 1 core"),
        )
        .metric(
            "boot_to_main_ms_4",
            median(&mut main_4.clone()),
            "ms",
            format!("{how}; same, 4 cores started"),
        )
        .metric(
            "qemu_wall_ms_1",
            median(&mut wall_1.clone()),
            "ms",
            format!("{how}; QEMU start to exit, hello --help, 1 vCPU"),
        )
        .metric(
            "qemu_wall_ms_4",
            median(&mut wall_4.clone()),
            "ms",
            format!("{how}; same, 4 vCPUs"),
        )
        .metric(
            "boot_to_main_ms_1_min",
            minimum(&main_1),
            "ms",
            "fastest of the same runs",
        )
        .metric(
            "boot_to_main_ms_4_min",
            minimum(&main_4),
            "ms",
            "fastest of the same runs",
        )
        .metric(
            "image_bytes",
            image_bytes as f64,
            "bytes",
            "hello's image as booted: objcopy --strip-all",
        )
        .metric(
            "image_file_bytes",
            image_file_bytes as f64,
            "bytes",
            "hello's image with the line tables used to symbolize crash reports",
        )
        .command("./ebb run hello --native --machine q35 --mem 512M --cores 1 --timeout 120 -v -- --help")
        .command("./ebb run hello --native --machine q35 --mem 512M --cores 4 --timeout 120 -v -- --help")
        .command("objcopy --strip-all target/native/x86_64-unknown-none/release/hello");
    let path = report.finish()?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The command line: no options.
#[derive(clap::Parser)]
#[command(
    name = "bench-boot",
    about = "./ebb bench boot: native boot times (hello under QEMU)"
)]
struct Args {}

fn main() -> ExitCode {
    <Args as clap::Parser>::parse();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("boot: {error}");
            ExitCode::FAILURE
        }
    }
}
