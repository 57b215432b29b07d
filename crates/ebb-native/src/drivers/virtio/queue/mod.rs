//! Virtqueues, shared by every device: the split virtqueue (`split`,
//! virtio 1.2 §2.7, tested on the host against a model of the device
//! side in `split_tests`) and adaptive polling's decision when to mask a
//! queue's interrupt and poll it instead (`adaptive`, host-tested).

pub mod adaptive;
pub mod split;
#[cfg(all(test, not(target_os = "none")))]
mod split_tests;
