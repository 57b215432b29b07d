//! A frontend for nodes started on this machine by the program itself
//! (tests, and hosted nodes in one process): node 0's Messenger and the
//! registry of nodes, which expects nodes 1 to N with a range of global
//! ids each and listens where it is told. Started on the calling core.
//!
//! `ebb_cluster::frontend` is the frontend of real clusters (a launcher,
//! a map, QEMU); this is the same registry without them, so that tests of
//! a distributed application do not each write it out.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::net::SocketAddr;
use core::ops::Range;

use ebb_core::{EbbError, NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};
use ebb_net::NetError;

use crate::{
    acceptor, create_messenger, Frontend, FrontendError, MessengerRef, MessengerSettings,
    FRONTEND_NODE,
};

/// The frontend, on the core that started it.
pub struct LocalFrontend {
    /// Node 0's Messenger.
    pub messenger: MessengerRef,
    /// The registry of nodes.
    pub registry: Arc<Frontend>,
    /// Where its Messenger listens.
    pub addr: SocketAddr,
    /// Node k's global ids are `ranges[k - 1]`.
    pub ranges: Vec<Range<u32>>,
}

/// Why a [`LocalFrontend`] could not start.
#[derive(Debug)]
pub enum LocalFrontendError {
    /// The Messenger or the registry's Ebb could not be made.
    Ebb(EbbError),
    /// The ids of every node do not fit.
    Ids(FrontendError),
    /// It could not listen.
    Listen(NetError),
}

impl fmt::Display for LocalFrontendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocalFrontendError::Ebb(error) => write!(f, "the frontend's Ebbs: {error}"),
            LocalFrontendError::Ids(error) => write!(f, "the nodes' global ids: {error}"),
            LocalFrontendError::Listen(error) => write!(f, "the frontend cannot listen: {error}"),
        }
    }
}

impl core::error::Error for LocalFrontendError {}

impl LocalFrontend {
    /// Expects nodes 1 to `nodes` (`ids_per_node` global ids each, from
    /// the whole global range) and listens on `listen` (port 0: any).
    ///
    /// # Errors
    ///
    /// See [`LocalFrontendError`].
    pub fn start(
        listen: SocketAddr,
        nodes: u32,
        ids_per_node: u32,
    ) -> Result<LocalFrontend, LocalFrontendError> {
        let messenger = create_messenger(MessengerSettings::new(FRONTEND_NODE))
            .map_err(LocalFrontendError::Ebb)?;
        let registry = Frontend::new(FIRST_GLOBAL_ID..MAX_EBB_IDS);
        registry.serve(messenger).map_err(LocalFrontendError::Ebb)?;
        let ranges = (1..=nodes)
            .map(|node| registry.expect(NodeId(node), ids_per_node))
            .collect::<Result<Vec<_>, _>>()
            .map_err(LocalFrontendError::Ids)?;
        let addr =
            ebb_net::listen(listen, acceptor(messenger)).map_err(LocalFrontendError::Listen)?;
        Ok(LocalFrontend {
            messenger,
            registry,
            addr,
            ranges,
        })
    }

    /// Node `node` is gone, as a launcher would say when its VM ends:
    /// forgotten by the registry and lost to the Messenger (which tells
    /// the other nodes).
    pub fn lose(&self, node: NodeId) {
        self.registry.forget(node);
        if let Ok(rep) = self.messenger.get() {
            rep.lose_node(node);
        }
    }
}
