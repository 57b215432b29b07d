//! The event bits of epoll(7) (`include/uapi/linux/eventpoll.h`), which
//! poll(2)'s `POLL*` bits equal for the events both have.

/// Readable (data, a connection to accept, the peer's end).
pub const EPOLLIN: u32 = 0x001;
/// Urgent data (never, here).
pub const EPOLLPRI: u32 = 0x002;
/// Writable.
pub const EPOLLOUT: u32 = 0x004;
/// An error is pending (always reported, asked for or not).
pub const EPOLLERR: u32 = 0x008;
/// Hung up: both directions are finished (always reported).
pub const EPOLLHUP: u32 = 0x010;
/// poll(2)'s invalid descriptor.
pub const POLLNVAL: u32 = 0x020;
/// The peer shut its writing side.
pub const EPOLLRDHUP: u32 = 0x2000;
/// Wake one waiter of several (accepted, no effect: one core).
pub const EPOLLEXCLUSIVE: u32 = 1 << 28;
/// Keep the system from suspending (accepted, no effect).
pub const EPOLLWAKEUP: u32 = 1 << 29;
/// Report once, then disarm until `EPOLL_CTL_MOD`.
pub const EPOLLONESHOT: u32 = 1 << 30;
/// Edge-triggered: report a change once, not a state.
pub const EPOLLET: u32 = 1 << 31;

/// The events reported whether asked for or not (epoll_ctl(2)).
pub const ALWAYS: u32 = EPOLLERR | EPOLLHUP;
