//! The platform's leveled logger: a `log::Log` over the 16550 serial
//! console (`console.rs`), so the runtime writes `log::warn!` and friends
//! and `log=LEVEL` on the command line (default info; `verbose` = debug)
//! chooses what reaches COM1. Lines keep the console's established shapes,
//! which the launcher's tests and `./ebb bench boot` read:
//!
//! | level | line |
//! | --- | --- |
//! | error | `ebbflow: error: MESSAGE` |
//! | warn | `ebbflow: warning: MESSAGE` |
//! | info | `ebbflow: MESSAGE` |
//! | debug | `ebbflow native: MESSAGE` (the `-v` boot summary) |
//! | trace | `ebbflow trace: MESSAGE` |
//!
//! Exception and panic reports bypass the logger (`console::emergency`):
//! they must get out whatever the level and whoever holds the console.

use log::{Level, LevelFilter, Log, Metadata, Record};

use ebb_boot_abi::LogLevel;

struct SerialLogger;

impl Log for SerialLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let prefix = match record.level() {
            Level::Error => "ebbflow: error: ",
            Level::Warn => "ebbflow: warning: ",
            Level::Info => "ebbflow: ",
            Level::Debug => "ebbflow native: ",
            Level::Trace => "ebbflow trace: ",
        };
        crate::println!("{prefix}{}", record.args());
    }

    fn flush(&self) {}
}

static LOGGER: SerialLogger = SerialLogger;

/// Installs the logger at the info level (before the command line is
/// read). Runs once, on core 0, after the console.
pub fn init() {
    // Fails only if a logger is installed already: then it stays.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(LevelFilter::Info);
}

/// Sets the level from the command line (`PlatformOptions::log_level`).
pub fn set_level(level: LogLevel) {
    log::set_max_level(match level {
        LogLevel::Off => LevelFilter::Off,
        LogLevel::Error => LevelFilter::Error,
        LogLevel::Warn => LevelFilter::Warn,
        LogLevel::Info => LevelFilter::Info,
        LogLevel::Debug => LevelFilter::Debug,
        LogLevel::Trace => LevelFilter::Trace,
    });
}
