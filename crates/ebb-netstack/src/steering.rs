//! Which core's stack owns a TCP connection, when one interface runs one
//! stack per core (DESIGN §4).
//!
//! A multi-queue NIC steers each flow to a queue, and a flow's connection
//! lives on the core of the queue its first segment arrived on. Steering
//! is not a promise: virtio-net's automatic steering follows the queue the
//! driver last sent a flow on, and a host's tun device forgets idle flows
//! after a few seconds and falls back to hashing (Linux
//! `drivers/net/tun.c`, `tun_automq_select_queue`). A segment can
//! therefore reach a core that does not have its connection. That core
//! asks the [`FlowDirectory`] which core does and forwards the frame
//! there, instead of answering with a RST (RFC 9293 §3.10.7.1) that would
//! kill a live connection.
//!
//! The directory is shared by all cores and read without locks: each
//! slot is a pair of atomics written by the core that claims the key (a
//! claim refuses a flow another core owns, see [`FlowDirectory::claim`]),
//! so a reader never waits, and nothing is ever freed under it (the slots
//! are inline), which is why no grace period (RCU's reclamation step) is
//! needed. Probing is bounded, so a lookup for a flow nobody owns (a
//! stray segment, a scan) costs at most [`MAX_PROBES`] loads.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::hash::BuildHasher;
use core::net::Ipv4Addr;
use core::sync::atomic::Ordering;

// The loom model (`RUSTFLAGS="--cfg loom" cargo test -p ebb-netstack --lib
// loom`) swaps in loom's atomics; the code is the same either way.
#[cfg(not(all(test, loom)))]
use core::{
    hint::spin_loop as wait_for_filler,
    sync::atomic::{fence, AtomicU32, AtomicU64},
};
#[cfg(all(test, loom))]
use loom::{
    sync::atomic::{fence, AtomicU32, AtomicU64},
    thread::yield_now as wait_for_filler,
};

use ebb_core::CoreId;
use ebb_iobuf::IoBuf;

/// A TCP flow as the stacks of one interface see it: they share the local
/// address, so the peer and the local port identify it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// The peer's address.
    pub remote: Ipv4Addr,
    /// The peer's port.
    pub remote_port: u16,
    /// Our port.
    pub local_port: u16,
}

impl FlowKey {
    /// The key in one word. 0.0.0.0 and 255.255.255.255 are never TCP
    /// peers (RFC 1122 §4.2.3.10), which leaves the all-zero and all-one
    /// words for the slot states below.
    fn packed(self) -> u64 {
        (u64::from(u32::from(self.remote)) << 32)
            | (u64::from(self.remote_port) << 16)
            | u64::from(self.local_port)
    }
}

/// A slot nobody has used: ends a probe.
const EMPTY: u64 = 0;
/// A slot whose key was removed: probes go past it; inserts reuse it.
const REMOVED: u64 = u64::MAX;
/// A slot being filled: its core is not written yet.
const FILLING: u64 = u64::MAX - 1;

/// The furthest a key sits from its home slot.
pub const MAX_PROBES: usize = 32;

struct Slot {
    key: AtomicU64,
    core: AtomicU32,
}

/// Flow → owning core, shared by the cores of one interface.
pub struct FlowDirectory {
    slots: Box<[Slot]>,
    hash: foldhash::fast::FixedState,
}

impl FlowDirectory {
    /// A directory with room for about `flows` connections (rounded up to
    /// a power of two, twice over, to keep probes short). `seed` keys the
    /// hash so that peers cannot aim at one run of slots.
    #[must_use]
    pub fn new(flows: usize, seed: u64) -> Self {
        let len = flows.saturating_mul(2).max(64).next_power_of_two();
        let slots: Vec<Slot> = (0..len)
            .map(|_| Slot {
                key: AtomicU64::new(EMPTY),
                core: AtomicU32::new(0),
            })
            .collect();
        FlowDirectory {
            slots: slots.into_boxed_slice(),
            hash: foldhash::fast::FixedState::with_seed(seed),
        }
    }

    fn probe(&self, key: u64) -> impl Iterator<Item = &Slot> {
        let mask = self.slots.len() - 1;
        let home = usize::try_from(self.hash.hash_one(key)).unwrap_or(0) & mask;
        (0..MAX_PROBES.min(self.slots.len())).map(move |i| &self.slots[(home + i) & mask])
    }

    /// Records that `core` owns `flow`, unless another core does.
    ///
    /// Two cores may claim one flow at once (both got a SYN for it, or
    /// both picked the same ephemeral port): each publishes its slot, then
    /// looks for the other's. Sequentially consistent ordering means at
    /// least one of them sees the other and backs off (both may; then the
    /// flow is free again and the segment that started it is handled
    /// afresh), so a flow never ends up with two owners.
    pub fn claim(&self, flow: FlowKey, core: CoreId) -> Claim {
        let key = flow.packed();
        for slot in self.probe(key) {
            match settled_key(slot) {
                k if k == key => return owned_by(slot, core),
                EMPTY => break,
                _ => {}
            }
        }
        let Some(mine) = self.probe(key).find(|slot| take_free(slot)) else {
            return Claim::Full;
        };
        mine.core.store(core_word(core), Ordering::Relaxed);
        mine.key.store(key, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        for slot in self.probe(key) {
            if core::ptr::eq(slot, mine) {
                continue;
            }
            match settled_key(slot) {
                k if k == key => {
                    let owner = slot.core.load(Ordering::Acquire);
                    mine.key.store(REMOVED, Ordering::Release);
                    return Claim::Taken(CoreId(owner as usize));
                }
                EMPTY => break,
                _ => {}
            }
        }
        Claim::Claimed
    }

    /// Forgets `flow` if `core` owns it (its connection is gone).
    pub fn remove(&self, flow: FlowKey, core: CoreId) {
        let key = flow.packed();
        for slot in self.probe(key) {
            match settled_key(slot) {
                k if k == key && slot.core.load(Ordering::Acquire) == core_word(core) => {
                    slot.key.store(REMOVED, Ordering::Release);
                    return;
                }
                EMPTY => return,
                _ => {}
            }
        }
    }

    /// The core that owns `flow`, if any. Never blocks.
    #[must_use]
    pub fn lookup(&self, flow: FlowKey) -> Option<CoreId> {
        let key = flow.packed();
        for slot in self.probe(key) {
            match slot.key.load(Ordering::Acquire) {
                k if k == key => {
                    let core = slot.core.load(Ordering::Acquire);
                    // The slot may have been removed and refilled between
                    // the two loads; then keep looking.
                    if slot.key.load(Ordering::Acquire) == key {
                        return usize::try_from(core).ok().map(CoreId);
                    }
                }
                EMPTY => return None,
                _ => {}
            }
        }
        None
    }
}

impl FlowDirectory {
    /// Flows recorded now (a scan: for tests and statistics, not for the
    /// packet path).
    #[must_use]
    pub fn len(&self) -> usize {
        self.slots
            .iter()
            .filter(|slot| {
                let key = slot.key.load(Ordering::Acquire);
                key != EMPTY && key != REMOVED && key != FILLING
            })
            .count()
    }

    /// Whether no flow is recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What [`FlowDirectory::claim`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The flow is this core's (now, or already).
    Claimed,
    /// Another core owns the flow: hand its segments there.
    Taken(CoreId),
    /// No free slot within [`MAX_PROBES`]: the connection works on its own
    /// core, but segments steered elsewhere will not find it.
    Full,
}

/// A slot's key once any fill in progress is done. A fill is a few
/// instructions on a core that is not preempted (native) or a thread the
/// scheduler will run again (hosted); past a bound, the slot counts as
/// another flow's.
fn settled_key(slot: &Slot) -> u64 {
    for _ in 0..1 << 20 {
        let key = slot.key.load(Ordering::SeqCst);
        if key != FILLING {
            return key;
        }
        wait_for_filler();
    }
    FILLING
}

fn owned_by(slot: &Slot, core: CoreId) -> Claim {
    let owner = slot.core.load(Ordering::Acquire);
    if owner == core_word(core) {
        Claim::Claimed
    } else {
        Claim::Taken(CoreId(owner as usize))
    }
}

/// Takes `slot` for filling if it is free.
fn take_free(slot: &Slot) -> bool {
    loop {
        let seen = slot.key.load(Ordering::Acquire);
        if seen != EMPTY && seen != REMOVED {
            return false;
        }
        if slot
            .key
            .compare_exchange(seen, FILLING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return true;
        }
    }
}

fn core_word(core: CoreId) -> u32 {
    u32::try_from(core.0).unwrap_or(u32::MAX)
}

/// What a stack that shares its interface with other cores' stacks needs:
/// the directory, and a way to hand a frame to another core's stack.
pub trait Steering {
    /// The interface's directory.
    fn directory(&self) -> &FlowDirectory;
    /// Hands a received frame (Ethernet header included) to `core`'s
    /// stack, which processes it as if its own queue had received it.
    fn forward(&self, core: CoreId, frame: &IoBuf);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(port: u16) -> FlowKey {
        FlowKey {
            remote: Ipv4Addr::new(10, 0, 0, 9),
            remote_port: port,
            local_port: 11211,
        }
    }

    fn claimed(dir: &FlowDirectory, port: u16, core: usize) -> bool {
        dir.claim(flow(port), CoreId(core)) == Claim::Claimed
    }

    #[test]
    fn claimed_flows_are_found_and_removed_ones_are_not() {
        let dir = FlowDirectory::new(16, 1);
        for port in 1000..1020 {
            assert!(claimed(&dir, port, usize::from(port % 4)));
        }
        for port in 1000..1020 {
            assert_eq!(dir.lookup(flow(port)), Some(CoreId(usize::from(port % 4))));
        }
        dir.remove(flow(1005), CoreId(1));
        assert_eq!(dir.lookup(flow(1005)), None);
        assert_eq!(dir.lookup(flow(1006)), Some(CoreId(2)));
        // Claiming again on the owner is a no-op; another core is refused,
        // and cannot remove it either.
        assert!(claimed(&dir, 1006, 2));
        assert_eq!(dir.claim(flow(1006), CoreId(3)), Claim::Taken(CoreId(2)));
        dir.remove(flow(1006), CoreId(3));
        assert_eq!(dir.lookup(flow(1006)), Some(CoreId(2)));
        assert_eq!(dir.len(), 19);
    }

    #[test]
    fn churn_reuses_removed_slots_and_a_full_directory_refuses() {
        let dir = FlowDirectory::new(32, 2);
        for round in 0..100u16 {
            for port in 0..32 {
                assert!(claimed(&dir, round * 32 + port, 1), "round {round}");
            }
            for port in 0..32 {
                dir.remove(flow(round * 32 + port), CoreId(1));
            }
        }
        let taken = (0..10_000).filter(|&p| claimed(&dir, p, 0)).count();
        assert!((32..=64).contains(&taken), "{taken} of 64 slots");
        assert_eq!(dir.claim(flow(60_000), CoreId(0)), Claim::Full);
        assert_eq!(dir.lookup(flow(60_000)), None);
    }

    #[cfg(not(miri))]
    #[test]
    fn readers_on_other_threads_see_owners_while_the_owner_churns() {
        extern crate std;
        use std::sync::Arc;
        let dir = Arc::new(FlowDirectory::new(1024, 3));
        for port in 0..200 {
            assert!(claimed(&dir, port, 1));
        }
        let writer = {
            let dir = Arc::clone(&dir);
            std::thread::spawn(move || {
                for round in 0..200u16 {
                    for port in 0..100 {
                        claimed(&dir, 1000 + (round % 7) * 100 + port, 2);
                    }
                    for port in 0..100 {
                        dir.remove(flow(1000 + (round % 7) * 100 + port), CoreId(2));
                    }
                }
            })
        };
        for _ in 0..200 {
            for port in 0..200 {
                assert_eq!(dir.lookup(flow(port)), Some(CoreId(1)));
            }
        }
        writer.join().unwrap();
    }

    #[cfg(not(miri))]
    #[test]
    fn cores_racing_for_one_flow_never_both_own_it() {
        extern crate std;
        use std::sync::{Arc, Barrier};
        let dir = Arc::new(FlowDirectory::new(64, 4));
        for round in 0..2000u16 {
            let barrier = Arc::new(Barrier::new(2));
            let racers: std::vec::Vec<_> = (0..2)
                .map(|core| {
                    let (dir, barrier) = (Arc::clone(&dir), Arc::clone(&barrier));
                    std::thread::spawn(move || {
                        barrier.wait();
                        dir.claim(flow(round), CoreId(core))
                    })
                })
                .collect();
            let results: std::vec::Vec<Claim> =
                racers.into_iter().map(|r| r.join().unwrap()).collect();
            let winners = results.iter().filter(|c| **c == Claim::Claimed).count();
            assert!(winners <= 1, "round {round}: {results:?}");
            let owner = dir.lookup(flow(round));
            assert_eq!(owner.is_some(), winners == 1, "round {round}: {results:?}");
            if let Some(owner) = owner {
                dir.remove(flow(round), owner);
            }
        }
    }

    /// Two cores claim one flow at once, in every interleaving loom finds
    /// (the slots are loom atomics; `claim`'s wait for a slot being filled
    /// yields to the filler). At most one core wins; the directory then
    /// names the winner, and a loser is told the winner's core. The
    /// protocol allows both to back off (each saw the other's slot): then
    /// nobody owns the flow, the directory says so, and the next claim
    /// wins.
    #[cfg(loom)]
    #[test]
    fn loom_two_cores_claiming_one_flow_at_most_one_wins() {
        use loom::sync::Arc;
        loom::model(|| {
            let dir = Arc::new(FlowDirectory::new(1, 5));
            let other = {
                let dir = Arc::clone(&dir);
                loom::thread::spawn(move || dir.claim(flow(7), CoreId(1)))
            };
            let mine = dir.claim(flow(7), CoreId(0));
            let theirs = other.join().unwrap();
            match (mine, theirs) {
                (Claim::Claimed, Claim::Taken(CoreId(0))) => {
                    assert_eq!(dir.lookup(flow(7)), Some(CoreId(0)));
                }
                (Claim::Taken(CoreId(1)), Claim::Claimed) => {
                    assert_eq!(dir.lookup(flow(7)), Some(CoreId(1)));
                }
                (Claim::Taken(CoreId(1)), Claim::Taken(CoreId(0))) => {
                    assert_eq!(dir.lookup(flow(7)), None, "both backed off");
                    assert_eq!(dir.claim(flow(7), CoreId(1)), Claim::Claimed);
                    assert_eq!(dir.lookup(flow(7)), Some(CoreId(1)));
                }
                outcome => panic!("two cores, one flow: {outcome:?}"),
            }
            assert_eq!(
                dir.claim(flow(7), CoreId(2)),
                Claim::Taken(dir.lookup(flow(7)).unwrap())
            );
        });
    }
}
