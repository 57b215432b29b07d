//! Receive buffers the kernel picks from: an io_uring provided-buffer ring
//! (Linux 5.19+). A completed receive names the buffer the kernel filled;
//! it reaches the application as an `IoBuf` whose owner is that buffer, and
//! goes back to the ring when the last view of it is dropped, on whatever
//! thread that happens (through a lock-free queue the core drains).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::SegQueue;
use ebb_iobuf::IoBuf;
use io_uring::types::BufRingEntry;

use super::Reactor;

/// Receive buffers per core that uses the network (4 MiB in all).
pub const BUFFER_COUNT: u16 = 128;
/// Size of one receive buffer.
pub const BUFFER_SIZE: usize = 32 * 1024;
/// Buffers kept for the kernel whatever handlers hold: when, at the start
/// of a loop turn, handlers still hold so many buffers that fewer than this
/// are left, received data reaches handlers as a copy during that turn and
/// its ring buffer goes back at once. Without a reserve, connections that
/// keep their data (an unfinished request, unsent output) could take every
/// buffer, and then nothing more is received on the core, not even their
/// closing (issue 15, defect 3). Buffers taken and dropped within one turn
/// do not count: a burst is not a hold.
pub const RESERVED_BUFFERS: usize = BUFFER_COUNT as usize / 4;
/// Buffers never handed to handlers as views, whatever the turn decided:
/// a receive that finds handlers holding all but these gets a copy, and
/// its buffer goes back at once. The reserve above is decided once per
/// turn, and the kernel can fill every buffer within one turn (a burst
/// larger than the ring, on a busy machine): a handler that keeps what it
/// got until more arrives (a Messenger message larger than the ring,
/// waiting for its end) then held them all, no receive could complete
/// again, and the connection stalled for good.
pub const LAST_BUFFERS: usize = 4;

/// The memory the buffers live in, shared with every `IoBuf` made from it.
pub(crate) struct BufferMemory {
    base: *mut u8,
    layout: Layout,
    returned: SegQueue<u16>,
    /// Buffers out of the ring whose last view is not dropped yet
    /// (dropped on any thread, hence atomic).
    held: AtomicUsize,
}

// SAFETY: `base` is plain memory. Each buffer is written by the kernel only
// while it is in the ring, and read by Rust code only while it is out of the
// ring (owned by one `ReceivedBuffer`), so no two parties race on one
// buffer; `returned` is a thread-safe queue.
unsafe impl Send for BufferMemory {}
// SAFETY: shared references only hand out a buffer to the one
// `ReceivedBuffer` that took it out of the ring (the kernel writes only
// buffers in the ring), and `returned` is a lock-free queue built for
// concurrent `&self` use.
unsafe impl Sync for BufferMemory {}

impl BufferMemory {
    fn contains(&self, ptr: *const u8) -> bool {
        let start = self.base as usize;
        (start..start + self.layout.size()).contains(&(ptr as usize))
    }
}

impl Drop for BufferMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `BufferRing::new` with this layout; the last
        // reference is gone, and the ring was unregistered before the core
        // dropped its reference, so the kernel no longer writes here.
        unsafe { dealloc(self.base, self.layout) };
    }
}

/// One filled buffer, owned by the `IoBuf`s made from it.
struct ReceivedBuffer {
    memory: Arc<BufferMemory>,
    id: u16,
    len: usize,
}

impl AsRef<[u8]> for ReceivedBuffer {
    fn as_ref(&self) -> &[u8] {
        let offset = usize::from(self.id) * BUFFER_SIZE;
        // SAFETY: buffer `id` lies inside the allocation.
        let start = unsafe { self.memory.base.add(offset) };
        // SAFETY: `len` is at most BUFFER_SIZE (the kernel never fills
        // more), and the kernel does not write the buffer while it is out of
        // the ring, which it is until `drop`.
        unsafe { std::slice::from_raw_parts(start, self.len) }
    }
}

impl Drop for ReceivedBuffer {
    fn drop(&mut self) {
        self.memory.held.fetch_sub(1, Ordering::Relaxed);
        self.memory.returned.push(self.id);
    }
}

/// The ring the kernel takes buffers from, and the memory behind them.
pub(crate) struct BufferRing {
    pub group: u16,
    entries: *mut BufRingEntry,
    entries_layout: Layout,
    tail: Cell<u16>,
    /// Buffers handed out by `take` and not yet back in the ring.
    out: Cell<usize>,
    /// Handlers held more than all but `RESERVED_BUFFERS` at the start of
    /// this turn: hand out copies.
    copying: Cell<bool>,
    memory: Arc<BufferMemory>,
}

impl BufferRing {
    pub fn new(reactor: &Reactor, group: u16) -> std::io::Result<Self> {
        let page = 4096;
        let entries_layout = Layout::from_size_align(
            usize::from(BUFFER_COUNT) * std::mem::size_of::<BufRingEntry>(),
            page,
        )
        .map_err(std::io::Error::other)?;
        let memory_layout = Layout::from_size_align(usize::from(BUFFER_COUNT) * BUFFER_SIZE, page)
            .map_err(std::io::Error::other)?;
        // SAFETY: both layouts have non-zero size.
        let entries = unsafe { alloc_zeroed(entries_layout) }.cast::<BufRingEntry>();
        // SAFETY: `memory_layout` has non-zero size (BUFFER_COUNT buffers of
        // BUFFER_SIZE bytes).
        let base = unsafe { alloc_zeroed(memory_layout) };
        if entries.is_null() || base.is_null() {
            return Err(std::io::Error::from(std::io::ErrorKind::OutOfMemory));
        }
        let memory = Arc::new(BufferMemory {
            base,
            layout: memory_layout,
            returned: SegQueue::new(),
            held: AtomicUsize::new(0),
        });
        let ring = BufferRing {
            group,
            entries,
            entries_layout,
            tail: Cell::new(0),
            out: Cell::new(0),
            copying: Cell::new(false),
            memory,
        };
        // SAFETY: `entries` is page-aligned memory for BUFFER_COUNT entries
        // that lives until `unregister` (called before it is freed).
        unsafe { reactor.register_buffer_ring(entries as u64, BUFFER_COUNT, group) }?;
        for id in 0..BUFFER_COUNT {
            ring.push(id);
        }
        ring.publish();
        Ok(ring)
    }

    /// Puts buffer `id` back in the ring (visible to the kernel after
    /// `publish`).
    fn push(&self, id: u16) {
        let index = usize::from(self.tail.get() & (BUFFER_COUNT - 1));
        let address = self.memory.base as u64 + u64::from(id) * BUFFER_SIZE as u64;
        // SAFETY: `index` < BUFFER_COUNT, inside the entries allocation.
        let entry = unsafe { self.entries.add(index) };
        // SAFETY: the kernel reads only entries between its head and the
        // published tail, and this one is past the published tail.
        let entry = unsafe { &mut *entry };
        entry.set_addr(address);
        entry.set_len(u32::try_from(BUFFER_SIZE).unwrap_or(u32::MAX));
        entry.set_bid(id);
        self.tail.set(self.tail.get().wrapping_add(1));
    }

    fn publish(&self) {
        // SAFETY: the tail field lives in the first entry of our mapping.
        let tail = unsafe { BufRingEntry::tail(self.entries) }.cast_mut();
        // SAFETY: the kernel reads the tail with acquire semantics; the
        // entries written before must be visible first, hence the release
        // store through an atomic view of the same u16.
        let tail = unsafe { &*(tail as *const std::sync::atomic::AtomicU16) };
        tail.store(self.tail.get(), std::sync::atomic::Ordering::Release);
    }

    /// Returns the buffers the application dropped to the kernel; how many.
    pub fn recycle(&self) -> usize {
        let mut count = 0;
        while let Some(id) = self.memory.returned.pop() {
            self.push(id);
            count += 1;
        }
        if count > 0 {
            self.publish();
            self.out.set(self.out.get().saturating_sub(count));
        }
        let left = usize::from(BUFFER_COUNT).saturating_sub(self.out.get());
        self.copying.set(left < RESERVED_BUFFERS);
        count
    }

    /// The `IoBuf` for a completed receive of `len` bytes into buffer `id`:
    /// a view of the buffer itself, or, while handlers hold the ring down
    /// to its reserve, a copy (and the buffer goes back to the ring).
    pub fn take(&self, id: u16, len: usize) -> IoBuf {
        self.out.set(self.out.get() + 1);
        let held = self.memory.held.fetch_add(1, Ordering::Relaxed) + 1;
        let received = IoBuf::from_owner(ReceivedBuffer {
            memory: Arc::clone(&self.memory),
            id,
            len: len.min(BUFFER_SIZE),
        });
        if self.copying.get() || held > usize::from(BUFFER_COUNT) - LAST_BUFFERS {
            IoBuf::from_vec(received.as_ref().to_vec())
        } else {
            received
        }
    }

    /// Whether `ptr` points into this ring's buffers.
    pub fn contains(&self, ptr: *const u8) -> bool {
        self.memory.contains(ptr)
    }
}

impl Drop for BufferRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the ring was
        // unregistered by the owner before dropping (see `NetCore::drop`).
        unsafe { dealloc(self.entries.cast(), self.entries_layout) };
    }
}
