//! Ebbflow's own network stack (`ebb-netstack`) inside a Linux process,
//! over a TAP device, driven by the hosted platform's event loop — the
//! third platform of DESIGN §4. An application written against `ebb-net`
//! runs on it unchanged: [`install`] makes the stack core 0's `NetStack`.
//!
//! ```no_run
//! let mut config = ebb_hosted::Config::default();
//! ebb_userstack::install(&mut config, ebb_userstack::Options::new("ebb0")).unwrap();
//! ebb_hosted::run(config, || { /* ebb_net::udp_bind(...) */ }).unwrap();
//! ```
//!
//! Applications get it with `--tap NAME` through `ebb-app`
//! ([`TapArgs`]).
//!
//! This crate is hosted-only and is where the stack touches the machine
//! (the TAP file's `open`, `ioctl`, `read`, `writev`); the protocol logic
//! stays in the `no_std`, unsafe-free `ebb-netstack`.

mod driver;
mod options;
mod tap;

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use ebb_core::CoreId;
use ebb_hosted::NetStackFactory;
use ebb_net::{AcceptFn, NetError, NetStack, TcpConnection, TcpHandler, UdpHandler, UdpSocket};

pub use driver::UserStack;
pub use options::{parse_cidr, parse_mac, Options, TapArgs};
pub use tap::{TapDevice, TapFile, TapStats};

/// Attaches to the TAP device `options.tap` now (so a missing device or
/// permission fails before the node starts) and sets `config` so that core
/// 0's network stack is ours over it. Other cores get a stack that refuses
/// every call with a message: one TAP queue, one core.
///
/// # Errors
///
/// If the TAP device cannot be attached (no `/dev/net/tun`, not root, a
/// bad name).
pub fn install(config: &mut ebb_hosted::Config, options: Options) -> io::Result<()> {
    let file = TapFile::open(&options.tap).map_err(|error| {
        io::Error::new(
            error.kind(),
            format!("attaching to TAP device {}: {error}", options.tap),
        )
    })?;
    let waiting = Mutex::new(Some(file));
    config.net_stack = Some(NetStackFactory(Arc::new(move |core: CoreId| {
        let file = if core.0 == 0 {
            waiting.lock().ok().and_then(|mut file| file.take())
        } else {
            None
        };
        match file {
            Some(file) => {
                let user = UserStack::start(file, &options);
                CURRENT.with(|current| *current.borrow_mut() = Some(Rc::clone(&user)));
                Box::new(user.stack().clone()) as Box<dyn NetStack>
            }
            None => Box::new(NotThisCore),
        }
    })));
    Ok(())
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<UserStack>>> = const { RefCell::new(None) };
}

/// The user-space stack of the calling core, if it runs one (for counters
/// and tests).
#[must_use]
pub fn current() -> Option<Rc<UserStack>> {
    CURRENT.with(|current| current.borrow().clone())
}

/// The `NetStack` of cores other than 0.
struct NotThisCore;

const NOT_THIS_CORE: &str = "the user-space stack runs on core 0 only (one TAP queue)";

impl NetStack for NotThisCore {
    fn listen(&self, _: SocketAddr, _: AcceptFn) -> Result<SocketAddr, NetError> {
        Err(NetError::Unsupported(NOT_THIS_CORE))
    }

    fn connect(&self, _: SocketAddr, _: Box<dyn TcpHandler>) -> Result<TcpConnection, NetError> {
        Err(NetError::Unsupported(NOT_THIS_CORE))
    }

    fn udp_bind(&self, _: SocketAddr, _: Box<dyn UdpHandler>) -> Result<UdpSocket, NetError> {
        Err(NetError::Unsupported(NOT_THIS_CORE))
    }
}
