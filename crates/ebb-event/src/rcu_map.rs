//! A hash map every core reads without locks or atomic writes (RCU), for
//! data all cores share (connection tables, a key-value store).
//!
//! Readers look keys up inside an [`rcu::read`](crate::rcu::read) section
//! and get plain references. Writers follow one discipline: a spin lock per
//! stripe of buckets, so writers to different stripes never wait for each
//! other. A writer never changes a node readers may see: it links in a new
//! node and unlinks the old one, which is freed after a grace period
//! ([`call_rcu`](crate::rcu::call_rcu)).
//!
//! Buckets are singly linked lists; the bucket count is fixed at creation
//! (a power of two), so a table sized for its expected population keeps
//! chains short without ever resizing under readers.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use core::ptr;
use core::sync::atomic::Ordering;

use hashbrown::DefaultHashBuilder;

use crate::rcu::{call_rcu, ReadGuard};
use crate::sync::{AtomicPtr, AtomicUsize, Mutex};

struct Node<K, V> {
    key: K,
    value: V,
    next: AtomicPtr<Node<K, V>>,
}

/// What [`RcuHashMap::update`]'s closure decides.
pub enum MapUpdate<V, R> {
    /// Leave the entry as it is.
    Keep(R),
    /// Store this value (replacing the entry, or adding one).
    Put(V, R),
    /// Remove the entry.
    Remove(R),
}

/// Writers lock one of this many stripes (fewer than buckets, so the locks
/// take little memory; enough that cores rarely meet).
const STRIPES: usize = 256;

/// A concurrent hash map with lock-free reads (see the module docs).
pub struct RcuHashMap<K, V, S = DefaultHashBuilder> {
    buckets: Box<[AtomicPtr<Node<K, V>>]>,
    stripes: Box<[Mutex<()>]>,
    hasher: S,
    len: AtomicUsize,
}

// SAFETY: the map owns its nodes (like a `Box<Node>` per entry): sending it
// sends `K`s and `V`s.
unsafe impl<K: Send, V: Send, S: Send> Send for RcuHashMap<K, V, S> {}
// SAFETY: shared access hands out `&K`/`&V` to many threads at once (needs
// `Sync`) and writers on other threads drop entries they did not create
// (needs `Send`); the structure itself is synchronised by the stripe locks
// (writers) and acquire/release publication (readers).
unsafe impl<K: Send + Sync, V: Send + Sync, S: Sync> Sync for RcuHashMap<K, V, S> {}

impl<K, V> RcuHashMap<K, V> {
    /// A map with at least `buckets` buckets (rounded up to a power of two).
    pub fn with_buckets(buckets: usize) -> Self {
        Self::with_buckets_and_hasher(buckets, DefaultHashBuilder::default())
    }
}

impl<K, V, S> RcuHashMap<K, V, S> {
    /// A map with at least `buckets` buckets hashing with `hasher`.
    pub fn with_buckets_and_hasher(buckets: usize, hasher: S) -> Self {
        let count = buckets.max(1).next_power_of_two();
        RcuHashMap {
            buckets: (0..count)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            stripes: (0..STRIPES.min(count))
                .map(|_| Mutex::new(()))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            hasher,
            len: AtomicUsize::new(0),
        }
    }

    /// The layout of the allocation that holds one entry (key, value and
    /// chain link), for callers that charge entries what they cost.
    pub const ENTRY_LAYOUT: core::alloc::Layout = core::alloc::Layout::new::<Node<K, V>>();

    /// Entries now.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many buckets.
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// Calls `visit` on the entries of bucket `bucket % bucket_count()`, in
    /// chain order, while it returns true. For sampling (eviction).
    pub fn for_each_in_bucket<'g>(
        &'g self,
        bucket: usize,
        _guard: &'g ReadGuard,
        mut visit: impl FnMut(&'g K, &'g V) -> bool,
    ) {
        let head = &self.buckets[bucket & (self.buckets.len() - 1)];
        let mut node = head.load(Ordering::Acquire);
        // SAFETY: nodes reachable from a bucket are freed only after a
        // grace period, which cannot end during this read section (the
        // guard proves we are in one).
        while let Some(current) = unsafe { node.as_ref() } {
            if !visit(&current.key, &current.value) {
                return;
            }
            node = current.next.load(Ordering::Acquire);
        }
    }
}

impl<K, V, S> RcuHashMap<K, V, S>
where
    K: Hash + Eq + 'static,
    V: 'static,
    S: BuildHasher,
{
    fn bucket_of<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        let hash = self.hasher.hash_one(key);
        // The low bits pick the bucket (the count is a power of two).
        let mask = u64::try_from(self.buckets.len() - 1).unwrap_or(u64::MAX);
        usize::try_from(hash & mask).unwrap_or(0)
    }

    /// The value under `key`, valid for the read section.
    pub fn get<'g, Q>(&'g self, key: &Q, guard: &'g ReadGuard) -> Option<&'g V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut found = None;
        self.for_each_in_bucket(self.bucket_of(key), guard, |k, v| {
            if k.borrow() == key {
                found = Some(v);
                false
            } else {
                true
            }
        });
        found
    }

    /// Looks `key` up holding its stripe's lock instead of a read section:
    /// for threads that are not cores (tests, tools). While the lock is
    /// held no writer can unlink (and so retire) a node of that stripe.
    pub fn read_locked<Q, R>(&self, key: &Q, read: impl FnOnce(Option<&V>) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let bucket = self.bucket_of(key);
        let _stripe = self.stripes[bucket % self.stripes.len()].lock();
        let mut node = self.buckets[bucket].load(Ordering::Acquire);
        // SAFETY: under the stripe lock nodes of this bucket are neither
        // unlinked nor freed.
        while let Some(current) = unsafe { node.as_ref() } {
            if current.key.borrow() == key {
                return read(Some(&current.value));
            }
            node = current.next.load(Ordering::Acquire);
        }
        read(None)
    }

    /// Reads, and maybe replaces or removes, the entry under `key` as one
    /// step (other writers of its stripe wait). `make_key` builds the owned
    /// key if an entry is added. A replaced or removed value is dropped
    /// after a grace period, on this core.
    ///
    /// Writers must run on a core (grace periods are counted there); off a
    /// core, replaced values are leaked rather than freed early.
    pub fn update<Q, R>(
        &self,
        key: &Q,
        make_key: impl FnOnce() -> K,
        decide: impl FnOnce(Option<&V>) -> MapUpdate<V, R>,
    ) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let bucket = self.bucket_of(key);
        let _stripe = self.stripes[bucket % self.stripes.len()].lock();
        let head = &self.buckets[bucket];
        // Find the node and the link that points to it.
        let mut link: &AtomicPtr<Node<K, V>> = head;
        let mut node = link.load(Ordering::Acquire);
        // SAFETY: under the stripe lock no other writer unlinks nodes of
        // this bucket, and unlinked nodes are freed only after a grace
        // period, so every node reachable here is alive.
        while let Some(current) = unsafe { node.as_ref() } {
            if current.key.borrow() == key {
                break;
            }
            link = &current.next;
            node = current.next.load(Ordering::Acquire);
        }
        // SAFETY: `node` is null or the node the walk stopped at, reached
        // from the bucket under the stripe lock, so no other writer can
        // unlink it and it is freed only after a grace period.
        let existing = unsafe { node.as_ref() };
        match decide(existing.map(|node| &node.value)) {
            MapUpdate::Keep(result) => result,
            MapUpdate::Put(value, result) => {
                // Nodes readers may see never change, so a replacement is a
                // new node (with its own copy of the key) in the old one's
                // place.
                let next = match existing {
                    Some(old) => old.next.load(Ordering::Acquire),
                    None => head.load(Ordering::Acquire),
                };
                let key = make_key();
                let fresh = Box::into_raw(Box::new(Node {
                    key,
                    value,
                    next: AtomicPtr::new(next),
                }));
                if existing.is_some() {
                    link.store(fresh, Ordering::Release);
                    retire(node);
                } else {
                    head.store(fresh, Ordering::Release);
                    self.len.fetch_add(1, Ordering::Relaxed);
                }
                result
            }
            MapUpdate::Remove(result) => {
                if let Some(old) = existing {
                    link.store(old.next.load(Ordering::Acquire), Ordering::Release);
                    retire(node);
                    self.len.fetch_sub(1, Ordering::Relaxed);
                }
                result
            }
        }
    }

    /// Removes every entry (each freed after a grace period).
    pub fn clear(&self) {
        for (index, head) in self.buckets.iter().enumerate() {
            let _stripe = self.stripes[index % self.stripes.len()].lock();
            let mut node = head.swap(ptr::null_mut(), Ordering::AcqRel);
            while !node.is_null() {
                // SAFETY: unlinked just now under the lock; alive until the
                // grace period we retire it into.
                let next = unsafe { &*node }.next.load(Ordering::Acquire);
                retire(node);
                self.len.fetch_sub(1, Ordering::Relaxed);
                node = next;
            }
        }
    }
}

/// Frees an unlinked node after a grace period (leaks it off a core, where
/// grace periods cannot be counted).
fn retire<K: 'static, V: 'static>(node: *mut Node<K, V>) {
    let _ = call_rcu(move || {
        // SAFETY: `node` came from `Box::into_raw`, was unlinked under its
        // stripe lock before this callback was registered, and a grace
        // period has passed since, so no reader still holds it.
        drop(unsafe { Box::from_raw(node) });
    });
}

impl<K, V, S> Drop for RcuHashMap<K, V, S> {
    fn drop(&mut self) {
        for head in self.buckets.iter() {
            // `&mut self` orders this after every other access: relaxed
            // loads suffice.
            let mut node = head.load(Ordering::Relaxed);
            while !node.is_null() {
                // SAFETY: `&mut self`: no reader or writer can hold a node;
                // every linked node came from `Box::into_raw` and is freed
                // once, here.
                let owned = unsafe { Box::from_raw(node) };
                node = owned.next.load(Ordering::Relaxed);
            }
        }
    }
}

/// Models of concurrent readers and writers
/// (`RUSTFLAGS="--cfg loom" cargo test -p ebb-event --lib loom`): the
/// links, the length and the stripe locks are loom's, and each value is a
/// loom cell written once when it is made, so a reader that could reach a
/// node before its contents were published fails the model as a data
/// race. Reclamation is not driven here: grace periods are counted by the
/// cores' event loops, which the model has none of, so replaced nodes are
/// leaked as `update` documents for writers off a core; what the model
/// shows is the half of the reclamation argument the map owns: a node is
/// unlinked (never changed in place) before it is retired.
#[cfg(all(test, loom))]
mod tests {
    use super::{MapUpdate, RcuHashMap};
    use crate::rcu::ReadGuard;
    use crate::sync::Arc;
    use loom::cell::UnsafeCell;
    use loom::thread;

    /// A value that loom checks: written only when made.
    struct Published(UnsafeCell<u64>);

    // SAFETY: the cell is written only by `new`, before the value is
    // shared; afterwards it is only read, and loom checks that every read
    // happens after that write.
    unsafe impl Sync for Published {}

    impl Published {
        fn new(value: u64) -> Self {
            Published(UnsafeCell::new(value))
        }

        fn read(&self) -> u64 {
            // SAFETY: the pointer is valid for the closure; no `&mut` to
            // the cell exists after `new` (see the `Sync` impl).
            self.0.with(|value| unsafe { *value })
        }
    }

    fn put(map: &RcuHashMap<u64, Published>, key: u64, value: u64) {
        map.update(&key, || key, |_| MapUpdate::Put(Published::new(value), ()));
    }

    fn remove(map: &RcuHashMap<u64, Published>, key: u64) {
        map.update(&key, || key, |_| MapUpdate::Remove(()));
    }

    /// A reader looks a key up twice while a writer adds it and then
    /// replaces it: the reader sees nothing, the first value or the second,
    /// each fully written, and never goes back in time.
    #[test]
    fn loom_rcu_map_reader_sees_whole_published_values() {
        loom::model(|| {
            // One bucket: every key shares a chain.
            let map = Arc::new(RcuHashMap::<u64, Published>::with_buckets(1));
            let reader = {
                let map = Arc::clone(&map);
                thread::spawn(move || {
                    let guard = ReadGuard::for_model();
                    let first = map.get(&1, &guard).map(Published::read);
                    let second = map.get(&1, &guard).map(Published::read);
                    (first, second)
                })
            };
            put(&map, 1, 10);
            put(&map, 1, 20);
            let (first, second) = reader.join().unwrap();
            assert!(matches!(first, None | Some(10 | 20)), "{first:?}");
            assert!(matches!(second, None | Some(10 | 20)), "{second:?}");
            assert!(first <= second, "went back from {first:?} to {second:?}");
        });
    }

    /// Two writers on one chain (one adds a key, one removes another that
    /// sits in front of it) and a reader walking the chain: the stripe
    /// lock keeps both changes, and the reader finds the key that was
    /// there all along.
    #[test]
    fn loom_rcu_map_writers_and_reader_share_a_chain() {
        loom::model(|| {
            let map = Arc::new(RcuHashMap::<u64, Published>::with_buckets(1));
            put(&map, 1, 10);
            put(&map, 2, 20);
            let writer = {
                let map = Arc::clone(&map);
                thread::spawn(move || put(&map, 3, 30))
            };
            let reader = {
                let map = Arc::clone(&map);
                thread::spawn(move || {
                    let guard = ReadGuard::for_model();
                    map.get(&1, &guard).map(Published::read)
                })
            };
            remove(&map, 2);
            writer.join().unwrap();
            assert_eq!(reader.join().unwrap(), Some(10));
            map.read_locked(&3, |v| assert_eq!(v.map(Published::read), Some(30)));
            map.read_locked(&2, |v| assert!(v.is_none()));
            assert_eq!(map.len(), 2);
        });
    }
}
