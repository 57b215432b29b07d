//! The `ebb-loadgen` command (`./ebb loadgen -- ARGS`).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = ebb_loadgen::cli::Args::parse();
    let json = args.json.clone();
    let cfg = match args.into_config() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("ebb-loadgen: error: {e}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "ebb-loadgen: {} loop against {} for {:.1} s (+{:.1} s warm-up){}",
        if cfg.is_open_loop() { "open" } else { "closed" },
        cfg.server,
        cfg.duration.as_secs_f64(),
        cfg.warmup.as_secs_f64(),
        if cfg.preload { ", after a preload" } else { "" }
    );
    let summary = match ebb_loadgen::run(&cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ebb-loadgen: error: {e}");
            return ExitCode::from(1);
        }
    };
    print!("{}", summary.table());
    for w in summary.warnings() {
        eprintln!("ebb-loadgen: WARNING: {w}");
    }
    if let Some(path) = json {
        let mut text = serde_json::to_string_pretty(&summary.to_json()).unwrap_or_default();
        text.push('\n');
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("ebb-loadgen: error: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
        eprintln!("ebb-loadgen: wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
