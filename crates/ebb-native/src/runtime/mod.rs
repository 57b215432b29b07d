//! The top layer: the boot sequence that brings every layer up in order,
//! the node's event loop on every core ([`run`]), the per-core network
//! stacks over virtio-net, logging and the boot-phase timestamps. It
//! registers the hooks the layers below call (see the crate README,
//! "Layers").

pub mod frame_kind;
#[cfg(target_os = "none")]
pub(crate) mod logger;
#[cfg(target_os = "none")]
pub mod net;
#[cfg(target_os = "none")]
mod net_cores;
#[cfg(target_os = "none")]
mod node;
#[cfg(target_os = "none")]
pub(crate) mod phases;

#[cfg(target_os = "none")]
pub use node::*;
