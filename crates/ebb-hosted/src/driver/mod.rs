//! How a hosted core sleeps and receives completions: io_uring, or epoll
//! where io_uring is unavailable (old kernels, seccomp filters).

mod epoll;
mod uring;

pub(crate) use uring::{OpToken, Reactor};

use std::io;
use std::rc::Rc;
use std::str::FromStr;

use ebb_core::CoreId;
use ebb_event::CoreDriver;

use crate::HostedPlatform;

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
/// needs it).
pub(crate) fn create(backend: Backend, platform: &'static HostedPlatform, core: CoreId) -> Created {
    let uring = || -> Created {
        let driver = uring::UringDriver::new(platform, core)?;
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
