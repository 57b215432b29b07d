//! A core driver over epoll: the wake-up eventfd and a timerfd for
//! deadlines (epoll's own timeout has only millisecond resolution).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use ebb_core::CoreId;
use ebb_event::{CoreDriver, Instant};

use crate::{sys, HostedPlatform};

const WAKEUP: u64 = 1;
const TIMER: u64 = 2;

pub(crate) struct EpollDriver {
    platform: &'static HostedPlatform,
    core: CoreId,
    epoll: OwnedFd,
    timer: OwnedFd,
}

impl EpollDriver {
    pub fn new(platform: &'static HostedPlatform, core: CoreId) -> io::Result<Self> {
        let epoll = sys::epoll_create()?;
        let timer = sys::timerfd()?;
        sys::epoll_add(&epoll, platform.wakeup_fd(core).as_raw_fd(), WAKEUP)?;
        sys::epoll_add(&epoll, timer.as_raw_fd(), TIMER)?;
        Ok(EpollDriver {
            platform,
            core,
            epoll,
            timer,
        })
    }

    fn wait(&self, timeout_ms: libc::c_int) {
        match sys::epoll_wait(&self.epoll, timeout_ms) {
            Ok(tokens) => {
                for token in tokens {
                    match token {
                        WAKEUP => {
                            sys::eventfd_drain(self.platform.wakeup_fd(self.core).as_raw_fd());
                        }
                        _ => {
                            sys::eventfd_drain(self.timer.as_raw_fd());
                        }
                    }
                }
            }
            Err(error) => panic!("epoll_wait failed on core {}: {error}", self.core),
        }
    }
}

impl CoreDriver for EpollDriver {
    fn dispatch(&self) {}

    fn halt(&self, deadline: Option<Instant>) {
        if let Err(error) = sys::timerfd_set(&self.timer, deadline.map(|deadline| deadline.0)) {
            panic!("timerfd_settime failed on core {}: {error}", self.core);
        }
        self.wait(-1);
    }
}
