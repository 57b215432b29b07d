//! What a platform provides on each core.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::net::SocketAddr;

use ebb_core::{Ebb, EbbError, FaultContext};

use crate::{NetError, TcpConnection, TcpHandler, UdpHandler, UdpSocket};

/// Makes the handler of each accepted connection (on the core that accepted
/// it). Shared by every core that listens, hence `Send + Sync`.
pub type AcceptFn = Arc<dyn Fn(&TcpConnection) -> Box<dyn TcpHandler> + Send + Sync>;

/// One core's network stack.
pub trait NetStack {
    /// Listens on `addr` on this core; connections accepted here get their
    /// handlers from `accept`. Returns the bound address (the port chosen,
    /// if `addr` asked for port 0).
    fn listen(&self, addr: SocketAddr, accept: AcceptFn) -> Result<SocketAddr, NetError>;

    /// Stops listening on `addr`'s port on this core (its established
    /// connections stay), so that the port may be listened on again.
    /// Stacks that cannot say `Unsupported`.
    fn unlisten(&self, addr: SocketAddr) -> Result<(), NetError> {
        let _ = addr;
        Err(NetError::Unsupported("unlisten"))
    }

    /// Connects to `addr`; the connection lives on this core.
    fn connect(
        &self,
        addr: SocketAddr,
        handler: Box<dyn TcpHandler>,
    ) -> Result<TcpConnection, NetError>;

    /// Binds a UDP socket on this core.
    fn udp_bind(
        &self,
        addr: SocketAddr,
        handler: Box<dyn UdpHandler>,
    ) -> Result<UdpSocket, NetError>;
}

/// The network Ebb (reserved id 2): one [`NetStack`] per core, installed by
/// the platform when the core starts.
pub struct NetworkEbb;

impl Ebb for NetworkEbb {
    type Rep = Box<dyn NetStack>;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static Self::Rep, EbbError> {
        Err(EbbError::Fault {
            id: ctx.id,
            reason: "this core has no network stack: the platform installs one at core start",
        })
    }
}
