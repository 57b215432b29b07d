//! The functions applications call.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::net::SocketAddr;

use ebb_core::{CoreId, EbbId, EbbRef};
use ebb_event::{core_count, spawn_task_on};

use crate::{
    AcceptFn, NetError, NetStack, NetworkEbb, TcpConnection, TcpHandler, UdpHandler, UdpSocket,
};

/// The network Ebb.
#[allow(unsafe_code)]
// SAFETY: reserved id 2 belongs to the network stack and is used with no
// other Ebb type anywhere.
pub const NETWORK: EbbRef<NetworkEbb> = unsafe { EbbRef::reserved(EbbId::reserved(2)) };

fn stack() -> Result<&'static dyn NetStack, NetError> {
    NETWORK
        .get()
        .map(|rep| &**rep)
        .map_err(|_| NetError::NotOnCore)
}

/// Listens on `addr` on this core only.
pub fn listen(addr: SocketAddr, accept: AcceptFn) -> Result<SocketAddr, NetError> {
    stack()?.listen(addr, accept)
}

/// Stops listening on `addr` on this core (established connections
/// stay); the port is free again.
pub fn unlisten(addr: SocketAddr) -> Result<(), NetError> {
    stack()?.unlisten(addr)
}

/// Listens on `addr` on every core (each core accepts its own connections;
/// the platform spreads them). With port 0, core 0 picks the port and the
/// others join it. Returns the bound address.
pub async fn listen_on_all_cores(
    addr: SocketAddr,
    accept: AcceptFn,
) -> Result<SocketAddr, NetError> {
    let first = spawn_task_on(CoreId(0), {
        let accept = accept.clone();
        async move { listen(addr, accept) }
    })
    .map_err(|_| NetError::NotOnCore)?
    .await
    .map_err(|_| NetError::NotOnCore)??;
    let handles: Vec<_> = (1..core_count())
        .map(|core| {
            let accept = accept.clone();
            spawn_task_on(CoreId(core), async move { listen(first, accept) })
                .map_err(|_| NetError::NotOnCore)
        })
        .collect::<Result<_, _>>()?;
    for handle in handles {
        handle.await.map_err(|_| NetError::NotOnCore)??;
    }
    Ok(first)
}

/// Connects to `addr` from this core.
pub fn connect(addr: SocketAddr, handler: Box<dyn TcpHandler>) -> Result<TcpConnection, NetError> {
    stack()?.connect(addr, handler)
}

/// Binds a UDP socket on this core.
pub fn udp_bind(addr: SocketAddr, handler: Box<dyn UdpHandler>) -> Result<UdpSocket, NetError> {
    stack()?.udp_bind(addr, handler)
}
