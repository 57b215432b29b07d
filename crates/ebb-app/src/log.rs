//! Leveled messages: `ebb_app::error!`, `warn!`, `info!`, `debug!`, as
//! `NAME: error: MESSAGE` lines on standard error (the serial console
//! natively). The application chooses the level (memcached's `-v`).

use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

/// How much to say, most important first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    /// Something failed.
    Error = 1,
    /// Something is off but the application goes on.
    Warn = 2,
    /// What the application does (the default level).
    Info = 3,
    /// Details for whoever debugs it.
    Debug = 4,
}

static MAX_LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Messages above `level` are dropped from now on.
pub fn set_level(level: Level) {
    MAX_LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether a message at `level` is printed.
#[must_use]
pub fn enabled(level: Level) -> bool {
    level as u8 <= MAX_LEVEL.load(Ordering::Relaxed)
}

/// Prints `message` at `level`, prefixed with the application's name.
pub fn log(level: Level, message: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let name = crate::name();
    match level {
        Level::Error => crate::platform::eprint(format_args!("{name}: error: {message}\n")),
        Level::Warn => crate::platform::eprint(format_args!("{name}: warning: {message}\n")),
        Level::Info | Level::Debug => crate::platform::eprint(format_args!("{name}: {message}\n")),
    }
}

/// Logs an error.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Error, format_args!($($arg)*)) };
}

/// Logs a warning.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Warn, format_args!($($arg)*)) };
}

/// Logs what the application does.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Info, format_args!($($arg)*)) };
}

/// Logs a detail.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Debug, format_args!($($arg)*)) };
}
