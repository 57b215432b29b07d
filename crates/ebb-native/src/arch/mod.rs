//! The CPU and the PC platform around it: the lowest layer. It calls no
//! other layer of this crate; where it must reach up (the boot sequence,
//! a core's loop, a page fault in a virtual region), an upper layer
//! registers a hook (see the crate README, "Layers").

pub mod x86_64;
