//! A core driver over io_uring: the core's wake-up eventfd is read through
//! the ring, and halting is one `io_uring_enter` with a timeout.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::io;
use std::os::fd::AsRawFd;

use ebb_core::CoreId;
use ebb_event::{CoreDriver, Instant, Platform};
use io_uring::{opcode, types, IoUring};

use crate::HostedPlatform;

const WAKEUP: u64 = 1;

pub(crate) struct UringDriver {
    platform: &'static HostedPlatform,
    core: CoreId,
    ring: RefCell<IoUring>,
    /// The ring may write here until the read completes, even after the
    /// driver is gone, so it is leaked (8 bytes per core).
    wakeup_buffer: &'static UnsafeCell<u64>,
    wakeup_armed: Cell<bool>,
}

impl UringDriver {
    pub fn new(platform: &'static HostedPlatform, core: CoreId) -> io::Result<Self> {
        let ring = IoUring::new(64)?;
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring lacks IORING_FEAT_EXT_ARG (Linux 5.11+)",
            ));
        }
        Ok(UringDriver {
            platform,
            core,
            ring: RefCell::new(ring),
            wakeup_buffer: Box::leak(Box::new(UnsafeCell::new(0))),
            wakeup_armed: Cell::new(false),
        })
    }

    fn reap(&self, ring: &mut IoUring) {
        for completion in ring.completion() {
            if completion.user_data() == WAKEUP {
                self.wakeup_armed.set(false);
            }
        }
    }
}

impl CoreDriver for UringDriver {
    fn dispatch(&self) {
        let mut ring = self.ring.borrow_mut();
        self.reap(&mut ring);
    }

    fn halt(&self, deadline: Option<Instant>) {
        let mut ring = self.ring.borrow_mut();
        if !self.wakeup_armed.get() {
            let fd = self.platform.wakeup_fd(self.core).as_raw_fd();
            let read = opcode::Read::new(types::Fd(fd), self.wakeup_buffer.get().cast(), 8)
                .build()
                .user_data(WAKEUP);
            // SAFETY: the buffer is leaked, so it outlives the read; the fd
            // lives as long as the platform, which is never freed.
            if unsafe { ring.submission().push(&read) }.is_ok() {
                self.wakeup_armed.set(true);
            }
        }
        let submitter = ring.submitter();
        let result = match deadline {
            None => submitter.submit_and_wait(1),
            Some(deadline) => {
                let wait = deadline.0.saturating_sub(self.platform.now().0);
                if wait == 0 {
                    submitter.submit()
                } else {
                    let timeout = types::Timespec::new()
                        .sec(wait / 1_000_000_000)
                        .nsec(u32::try_from(wait % 1_000_000_000).unwrap_or(0));
                    submitter.submit_with_args(1, &types::SubmitArgs::new().timespec(&timeout))
                }
            }
        };
        match result {
            Ok(_) => {}
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) => {}
            Err(error) => panic!("io_uring_enter failed on core {}: {error}", self.core),
        }
        self.reap(&mut ring);
    }
}
