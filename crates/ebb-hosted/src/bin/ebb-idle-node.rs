//! `ebb-idle-node`: runs a hosted node that does nothing, to show what an
//! idle node costs. With `--measure SECS` it prints the process's CPU time
//! over that many seconds and exits; without, it runs until Ctrl-C.

use std::process::ExitCode;
use std::time::Duration;

use ebb_event::{core_count, shutdown, timer_after};
use ebb_hosted::{process_cpu_ns, Config, OPTIONS_HELP};

const USAGE: &str = "usage: ebb-idle-node [--measure SECS] [PLATFORM OPTIONS]";

/// Lets the cores finish starting before measuring.
const SETTLE: Duration = Duration::from_millis(200);

fn main() -> ExitCode {
    let (config, rest) = match Config::from_args(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(error) => {
            eprintln!("ebb-idle-node: {error}\n{USAGE}\n{OPTIONS_HELP}");
            return ExitCode::from(2);
        }
    };
    let measure = match rest.as_slice() {
        [] => None,
        [flag, secs] if flag == "--measure" => match secs.parse::<f64>() {
            Ok(secs) if secs > 0.0 && secs < 3600.0 => Some(Duration::from_secs_f64(secs)),
            _ => {
                eprintln!(
                    "ebb-idle-node: --measure takes seconds between 0 and 3600, not '{secs}'"
                );
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("{USAGE}\n{OPTIONS_HELP}");
            return ExitCode::from(2);
        }
    };
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
