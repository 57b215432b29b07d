//! `ebb-idle-node`: runs a hosted node that does nothing, to show what an
//! idle node costs. With `--measure SECS` it prints the process's CPU time
//! over that many seconds and exits; without, it runs until Ctrl-C.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ebb_event::{core_count, shutdown, timer_after};
use ebb_hosted::{process_cpu_ns, PlatformArgs};

/// Runs a hosted node that does nothing, to show what an idle node costs.
#[derive(Debug, Parser)]
#[command(name = "ebb-idle-node")]
struct Cli {
    /// Print the process's CPU time over this many seconds, then exit
    /// (default: run until Ctrl-C)
    #[arg(long, value_name = "SECS", value_parser = parse_window)]
    measure: Option<Duration>,
    #[command(flatten)]
    platform: PlatformArgs,
}

fn parse_window(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs < 3600.0 => Ok(Duration::from_secs_f64(secs)),
        _ => Err(format!("seconds between 0 and 3600, not '{text}'")),
    }
}

/// Lets the cores finish starting before measuring.
const SETTLE: Duration = Duration::from_millis(200);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (config, measure) = (cli.platform.config(), cli.measure);
    let result = ebb_hosted::run(config, move || {
        println!("ready: {} cores idle", core_count());
        if let Some(window) = measure {
            timer_after(SETTLE, move || {
                let start = process_cpu_ns();
                timer_after(window, move || {
                    println!(
                        "idle_cpu_ns={} window_ns={}",
                        process_cpu_ns() - start,
                        window.as_nanos()
                    );
                    shutdown(0).expect("first shutdown");
                });
            });
        }
    });
    match result {
        Ok(code) => {
            println!("stopped with exit code {code}");
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        Err(error) => {
            eprintln!("ebb-idle-node: {error}");
            ExitCode::FAILURE
        }
    }
}
