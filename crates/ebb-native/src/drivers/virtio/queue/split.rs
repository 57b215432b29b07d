//! A split virtqueue (virtio 1.2 §2.7): the descriptor table, the driver
//! ("available") ring and the device ("used") ring in one zeroed,
//! page-aligned heap block. The heap is identity mapped, so a heap address
//! is also the address the device uses (see the crate README, "Memory").

use alloc::alloc::{alloc_zeroed, Layout};
use core::sync::atomic::{fence, Ordering};

/// Descriptor flags (§2.7.5): the buffer continues in `next`; the device
/// writes (rather than reads) the buffer.
const DESC_NEXT: u16 = 1;
const DESC_WRITE: u16 = 2;
/// Driver-ring flag (§2.7.7): the device need not interrupt on used
/// buffers (a hint).
const AVAIL_NO_INTERRUPT: u16 = 1;
/// Device-ring flag (§2.7.10): the device need not be notified of new
/// available buffers (it is already processing the queue, or has buffers
/// enough).
const USED_NO_NOTIFY: u16 = 1;

/// One buffer of a chain: physical address, length, whether the device
/// writes it.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    /// Physical (= identity-mapped virtual) address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// The device writes it (receive buffers).
    pub device_writes: bool,
}

/// The three areas' physical addresses, for the transport's queue
/// registers.
#[derive(Clone, Copy, Debug)]
pub struct QueueAddresses {
    /// Descriptor table (16 bytes per entry, 16-byte aligned).
    pub desc: u64,
    /// Driver ring.
    pub driver: u64,
    /// Device ring.
    pub device: u64,
}

/// A split virtqueue of `size` descriptors, used by one core.
pub struct SplitQueue {
    size: u16,
    base: *mut u8,
    /// Bytes of the block.
    len: usize,
    /// Offsets of the driver and device rings in the block.
    driver: usize,
    device: usize,
    addresses: QueueAddresses,
    /// Head of the free-descriptor list (linked through `next`).
    free_head: u16,
    free: u16,
    /// Our copy of the driver ring's index.
    avail_idx: u16,
    /// The next device-ring entry to look at.
    last_used: u16,
}

// SAFETY: a `SplitQueue` is the only owner of its block (nothing else
// holds `base`), so moving it to another core moves that ownership; it is
// not `Sync` (no shared access). Multi-queue virtio-net sets every queue
// up on core 0 (before DRIVER_OK, §3.1.1) and hands each pair to the core
// that uses it.
unsafe impl Send for SplitQueue {}

impl SplitQueue {
    /// A zeroed queue of `size` entries (a power of two, at most 32768).
    /// `None` if there is no memory. The block is never freed: the device
    /// may write it until it is reset, and a reset reuses it
    /// ([`reset`](Self::reset)).
    pub fn new(size: u16) -> Option<Self> {
        let n = usize::from(size);
        let desc = 16 * n;
        let driver = desc;
        let device = (driver + 6 + 2 * n).next_multiple_of(4);
        let total = (device + 6 + 8 * n).next_multiple_of(4096);
        let layout = Layout::from_size_align(total, 4096).ok()?;
        // SAFETY: the layout has a non-zero size.
        let base = unsafe { alloc_zeroed(layout) };
        if base.is_null() {
            return None;
        }
        let mut queue = SplitQueue {
            size,
            base,
            len: total,
            driver,
            device,
            addresses: QueueAddresses {
                desc: base as u64,
                driver: (base as u64) + driver as u64,
                device: (base as u64) + device as u64,
            },
            free_head: 0,
            free: size,
            avail_idx: 0,
            last_used: 0,
        };
        for i in 0..size {
            queue.write_next(i, i.wrapping_add(1));
        }
        Some(queue)
    }

    /// The queue's size.
    pub fn size(&self) -> u16 {
        self.size
    }

    /// Free descriptors.
    pub fn free(&self) -> u16 {
        self.free
    }

    /// Where the areas are.
    pub fn addresses(&self) -> QueueAddresses {
        self.addresses
    }

    /// Reads the `T` at `offset` of the block.
    fn load<T: Copy>(&self, offset: usize) -> T {
        assert!(offset + core::mem::size_of::<T>() <= self.len);
        let p = self.base.wrapping_add(offset).cast::<T>();
        // SAFETY: inside the block this queue owns (checked above), aligned
        // (every field is at a multiple of its size); volatile because the
        // device writes the block too.
        unsafe { p.read_volatile() }
    }

    /// Writes the `T` at `offset` of the block.
    fn store<T: Copy>(&mut self, offset: usize, value: T) {
        assert!(offset + core::mem::size_of::<T>() <= self.len);
        let p = self.base.wrapping_add(offset).cast::<T>();
        // SAFETY: inside the block this queue owns (checked above), aligned;
        // the driver writes only descriptors the device does not own and the
        // driver ring, so no write races the device's.
        unsafe { p.write_volatile(value) }
    }

    fn desc(&self, index: u16) -> usize {
        16 * usize::from(index % self.size)
    }

    fn write_next(&mut self, index: u16, next: u16) {
        self.store(self.desc(index) + 14, next);
    }

    /// A descriptor's flags and next.
    fn read_desc(&self, index: u16) -> (u16, u16) {
        let at = self.desc(index);
        (self.load(at + 12), self.load(at + 14))
    }

    /// Makes the chain `segments` available to the device and returns its
    /// head descriptor id, or `None` (nothing changed) when too few
    /// descriptors are free. The caller notifies the device.
    pub fn push(&mut self, segments: &[Segment]) -> Option<u16> {
        let count = u16::try_from(segments.len()).ok()?;
        if count == 0 || count > self.free {
            return None;
        }
        let head = self.free_head;
        let mut index = head;
        for (i, segment) in segments.iter().enumerate() {
            let (_, next) = self.read_desc(index);
            let last = i + 1 == segments.len();
            let mut flags = if segment.device_writes { DESC_WRITE } else { 0 };
            if !last {
                flags |= DESC_NEXT;
            }
            // The descriptor is free: the device does not own it until
            // the ring entry below.
            let at = self.desc(index);
            self.store(at, segment.addr);
            self.store(at + 8, segment.len);
            self.store(at + 12, flags);
            if last {
                self.free_head = next;
            } else {
                index = next;
            }
        }
        self.free -= count;
        let slot = usize::from(self.avail_idx % self.size);
        // The driver ring: flags, idx, ring[size], all u16.
        self.store(self.driver + 4 + 2 * slot, head);
        self.avail_idx = self.avail_idx.wrapping_add(1);
        // The entry is visible before the index that publishes it (§2.7.13).
        fence(Ordering::Release);
        self.store(self.driver + 2, self.avail_idx);
        Some(head)
    }

    /// The next chain the device is done with: (head id, bytes written).
    /// Its descriptors are free again.
    pub fn pop_used(&mut self) -> Option<(u16, u32)> {
        // The device ring: flags, idx (u16), then ring[size] of (id, len) u32.
        let used_idx: u16 = self.load(self.device + 2);
        if used_idx == self.last_used {
            return None;
        }
        // Read the entry only after seeing the index (§2.7.14).
        fence(Ordering::Acquire);
        let slot = usize::from(self.last_used % self.size);
        let entry = self.device + 4 + 8 * slot;
        let (id, len): (u32, u32) = (self.load(entry), self.load(entry + 4));
        self.last_used = self.last_used.wrapping_add(1);
        let head = (id % u32::from(self.size)) as u16;
        // Return the chain to the free list.
        let mut index = head;
        let mut count = 1;
        loop {
            let (flags, next) = self.read_desc(index);
            if flags & DESC_NEXT == 0 || count == self.size {
                break;
            }
            index = next;
            count += 1;
        }
        self.write_next(index, self.free_head);
        self.free_head = head;
        self.free += count;
        Some((head, len))
    }

    /// Asks the device not to interrupt for this queue (the driver polls
    /// it), or to interrupt again.
    pub fn set_interrupts(&mut self, wanted: bool) {
        let flags = if wanted { 0 } else { AVAIL_NO_INTERRUPT };
        self.store(self.driver, flags);
    }

    /// Asks for interrupts again and says whether used buffers are already
    /// waiting: the device may have used them while it was told not to
    /// interrupt, and then no interrupt will come for them (§2.7.10), so
    /// the caller polls once more — the lost-wakeup check of going back
    /// from polling to interrupts.
    pub fn enable_interrupts(&mut self) -> bool {
        self.set_interrupts(true);
        // The flag is visible before the index is read (a device that used
        // a buffer after this store sees it and interrupts).
        fence(Ordering::SeqCst);
        self.has_used()
    }

    /// Whether the device asks to be notified of the buffers just made
    /// available (§2.7.10). QEMU's virtio-net clears the wish while a
    /// transmit flush is pending and while the receive ring has buffers,
    /// so a burst of frames costs one notification (a VM exit) rather than
    /// one each. The full fence orders the driver ring's index before the
    /// flag is read (§2.7.13.4): a device that turned notifications back on
    /// after our index was visible has seen the new buffers.
    pub fn device_wants_notification(&self) -> bool {
        fence(Ordering::SeqCst);
        self.load::<u16>(self.device) & USED_NO_NOTIFY == 0
    }

    /// Whether the device has used buffers not yet popped.
    pub fn has_used(&self) -> bool {
        self.load::<u16>(self.device + 2) != self.last_used
    }

    /// The head descriptor id the next [`push`](Self::push) will use (if
    /// enough descriptors are free), so that per-chain data indexed by it
    /// can be ready before the device sees the chain.
    pub fn next_head(&self) -> u16 {
        self.free_head
    }

    /// Back to the state of a new queue, for a device reset (§2.4): every
    /// descriptor free, both rings empty. Only once the device no longer
    /// uses the queue (its status reads 0); what was in flight is the
    /// caller's to reclaim.
    pub fn reset(&mut self) {
        for offset in 0..self.len {
            self.store::<u8>(offset, 0);
        }
        for i in 0..self.size {
            self.write_next(i, i.wrapping_add(1));
        }
        self.free_head = 0;
        self.free = self.size;
        self.avail_idx = 0;
        self.last_used = 0;
    }
}
