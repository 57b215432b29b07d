//! Ebbflow benchmarks.
//!
//! Each benchmark is a binary in `bench/src/bin`, run as `./ebb bench NAME`.
//! They share [`report`]: a table for people on stdout and the figures in
//! `target/bench/NAME.json` (flat keys to numbers, plus the exact command lines
//! and the versions used), and small statistics and measurement helpers.
//! The Linux comparison guest, network namespaces, TAP devices, QEMU and
//! CPU pinning come from `ebb-testbed`. [`memcached`] starts ours and stock memcached and
//! measures them under `ebb-loadgen` (in a namespace or not), [`evict`]
//! times the `set`s that evict large values, and
//! [`tcp_sim`] times Ebbflow's TCP on the simulated link.
//! [`vm`] is what the VM benchmarks (netpipe, memcached-vm) share: both
//! guests on one TAP device, pinned QEMU and client, QEMU's CPU time;
//! [`insns`] makes the layer ranges and reads the counts of the QEMU
//! plugin that counts guest instructions (`./ebb bench insns`).
//! [`memcached_vm`] is the arithmetic of `./ebb bench memcached-vm`'s
//! sweeps (throughput within the SLA, maximum sustained, their fraction,
//! the point at half load) and the choices of its scaling runs.
//! [`plot`] draws throughput–p99 curves and latency CDFs; [`redis_vm`]
//! runs Debian's `redis-benchmark` for `./ebb bench redis-vm`.
//! [`cluster`] is what the cluster benchmarks share; [`messenger`] ties
//! the NodeAllocator to a Messenger frontend and reads
//! the native nodes' round trips (`./ebb bench messenger`);
//! [`cluster_memcached`] routes keys across a cluster's servers (ketama or
//! by owner) and searches for the throughput at the SLA (`./ebb bench
//! cluster-memcached`), whose Ebbflow side [`native_memcached_cluster`]
//! boots and drives.

pub mod cluster;
pub mod cluster_memcached;
pub mod evict;
pub mod insns;
pub mod memcached;
pub mod memcached_vm;
pub mod messenger;
pub mod native_memcached_cluster;
pub mod plot;
pub mod redis_hosted;
pub mod redis_vm;
pub mod report;
pub mod sqlite_runs;
pub mod tcp_sim;
pub mod vm;
