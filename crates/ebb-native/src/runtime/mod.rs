//! The top layer: the boot sequence that brings every layer up in order,
//! the node's event loop on every core ([`run`]), the per-core network
//! stacks over virtio-net, logging and the boot-phase timestamps. It
//! registers the hooks the layers below call (see the crate README,
//! "Layers").

#[cfg(target_os = "none")]
mod crash;
pub mod frame_kind;
#[cfg(target_os = "none")]
mod logger;
#[cfg(target_os = "none")]
pub mod net;
#[cfg(target_os = "none")]
mod net_cores;
#[cfg(target_os = "none")]
mod node;
#[cfg(target_os = "none")]
mod phases;
#[cfg(target_os = "none")]
mod startup;

#[cfg(target_os = "none")]
pub use node::*;
