//! The platform's network interface for applications: ebb-net's API
//! (re-exported as [`api`]) plus what differs between platforms, decided
//! here once: which address "listen by default" means, and on which cores
//! a listener can run (the user-space stack serves one TAP queue from
//! core 0; kernel sockets and the native stack serve every core).

use alloc::boxed::Box;
use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use ebb_core::CoreId;
use ebb_event::{core_count, spawn_task_on};
pub use ebb_net as api;
use ebb_net::{AcceptFn, NetError, UdpHandler};

use crate::PlatformKind;

/// A listener, as [`listen`] set it up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listening {
    /// The bound address (the port chosen, with port 0).
    pub addr: SocketAddr,
    /// How many cores accept connections on it.
    pub cores: usize,
}

/// The address a server listens on unless told otherwise: the loopback
/// interface with kernel sockets (as memcached's `-l` advises), every
/// address of the stack's own interface on our stack (native, user-space),
/// whose only address is the one the network gave it.
#[must_use]
pub fn default_listen_ip() -> IpAddr {
    match crate::platform_kind() {
        PlatformKind::Hosted => IpAddr::V4(Ipv4Addr::LOCALHOST),
        PlatformKind::UserStack | PlatformKind::Native => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    }
}

/// Listens for TCP connections on `addr` on every core that has a network
/// stack; call it from inside the node (a task). With port 0 the platform
/// picks the port.
///
/// # Errors
///
/// The stack refused (address in use, no such address).
pub async fn listen(addr: SocketAddr, accept: AcceptFn) -> Result<Listening, NetError> {
    if crate::platform_kind() == PlatformKind::UserStack {
        let bound = spawn_task_on(CoreId(0), async move { ebb_net::listen(addr, accept) })
            .map_err(|_| NetError::NotOnCore)?
            .await
            .map_err(|_| NetError::NotOnCore)??;
        return Ok(Listening {
            addr: bound,
            cores: 1,
        });
    }
    let bound = ebb_net::listen_on_all_cores(addr, accept).await?;
    Ok(Listening {
        addr: bound,
        cores: core_count(),
    })
}

/// Binds a UDP socket on `addr` on core 0 (every platform has a stack
/// there) with the handler `make` builds there, and returns its address.
///
/// # Errors
///
/// The stack refused.
pub async fn udp_bind(
    addr: SocketAddr,
    make: impl FnOnce() -> Box<dyn UdpHandler> + Send + 'static,
) -> Result<SocketAddr, NetError> {
    spawn_task_on(CoreId(0), async move {
        ebb_net::udp_bind(addr, make()).map(|socket| socket.local_addr())
    })
    .map_err(|_| NetError::NotOnCore)?
    .await
    .map_err(|_| NetError::NotOnCore)?
}
