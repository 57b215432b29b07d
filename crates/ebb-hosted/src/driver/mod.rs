//! How a hosted core sleeps and receives completions: io_uring, or epoll
//! where io_uring is unavailable (old kernels, seccomp filters).

mod epoll;
mod poll_window;
mod uring;

pub(crate) use uring::{OpToken, Reactor};

use std::io;
use std::rc::Rc;
use std::str::FromStr;

use ebb_core::CoreId;
use ebb_event::CoreDriver;

use crate::HostedPlatform;

/// `Config::poll_max_us`' default.
pub(crate) const DEFAULT_POLL_MAX_US: u64 = poll_window::DEFAULT_MAX_NS / 1_000;

/// Which kernel interface the event loops use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// io_uring if the kernel allows it, else epoll.
    #[default]
    Auto,
    /// io_uring (fails if unavailable).
    IoUring,
    /// epoll.
    Epoll,
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "auto" => Ok(Backend::Auto),
            "io-uring" | "io_uring" | "uring" => Ok(Backend::IoUring),
            "epoll" => Ok(Backend::Epoll),
            other => Err(format!(
                "unknown backend '{other}': expected auto, io-uring or epoll"
            )),
        }
    }
}

/// A core's driver, and its io_uring reactor if it has one.
type Created = io::Result<(Box<dyn CoreDriver>, Option<Rc<Reactor>>)>;

/// Builds the driver of `core` for `backend` (`Auto` tries io_uring
/// first), and returns its io_uring reactor if it has one (networking
/// needs it). An io_uring core polls its ring for up to `poll_max_us`
/// before it sleeps; an epoll core always sleeps at once (polling there
/// would be a system call per look).
pub(crate) fn create(
    backend: Backend,
    platform: &'static HostedPlatform,
    core: CoreId,
    poll_max_us: u64,
) -> Created {
    let uring = || -> Created {
        let driver = uring::UringDriver::new(platform, core, poll_max_us.saturating_mul(1_000))?;
        let reactor = driver.reactor();
        Ok((Box::new(driver), Some(reactor)))
    };
    let epoll = || -> Created { Ok((Box::new(epoll::EpollDriver::new(platform, core)?), None)) };
    match backend {
        Backend::Epoll => epoll(),
        Backend::IoUring => uring(),
        Backend::Auto => uring().or_else(|_| epoll()),
    }
}
