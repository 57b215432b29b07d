//! How a hosted core sleeps and receives completions: io_uring, or epoll
//! where io_uring is unavailable (old kernels, seccomp filters).

mod epoll;
mod uring;

use std::io;
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

/// Builds the driver of `core` for `backend`; `Auto` tries io_uring first.
pub(crate) fn create(
    backend: Backend,
    platform: &'static HostedPlatform,
    core: CoreId,
) -> io::Result<(Box<dyn CoreDriver>, Backend)> {
    match backend {
        Backend::Epoll => Ok((
            Box::new(epoll::EpollDriver::new(platform, core)?),
            Backend::Epoll,
        )),
        Backend::IoUring => Ok((
            Box::new(uring::UringDriver::new(platform, core)?),
            Backend::IoUring,
        )),
        Backend::Auto => match uring::UringDriver::new(platform, core) {
            Ok(driver) => Ok((Box::new(driver), Backend::IoUring)),
            Err(_) => Ok((
                Box::new(epoll::EpollDriver::new(platform, core)?),
                Backend::Epoll,
            )),
        },
    }
}
