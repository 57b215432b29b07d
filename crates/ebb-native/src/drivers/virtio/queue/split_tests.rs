//! The split virtqueue against a model of the device side (virtio 1.2
//! §2.7), on the host: the model reads the driver ring and descriptors and
//! writes the used ring through the addresses the queue gives the
//! transport, as QEMU does. Covers the full ring (back-pressure: `push`
//! refuses, nothing is overwritten), index wrap-around, chains, the
//! interrupt flag with its lost-wakeup check, and reset.

extern crate std;

use std::vec;
use std::vec::Vec;

use super::split::{Segment, SplitQueue};

/// A chain as the device sees it: (address, length, device writes).
type Chain = Vec<(u64, u32, bool)>;

/// The device's view of one queue.
struct Device {
    size: u16,
    desc: u64,
    driver: u64,
    device: u64,
    last_avail: u16,
    used_idx: u16,
}

impl Device {
    fn new(queue: &SplitQueue) -> Self {
        let a = queue.addresses();
        Device {
            size: queue.size(),
            desc: a.desc,
            driver: a.driver,
            device: a.device,
            last_avail: 0,
            used_idx: 0,
        }
    }

    fn read<T: Copy>(addr: u64) -> T {
        // SAFETY: `addr` is inside the queue's block (computed from its
        // addresses and indices below its size), which outlives the test.
        unsafe { (addr as *const T).read_volatile() }
    }

    fn write<T: Copy>(addr: u64, value: T) {
        // SAFETY: `addr` is inside the queue's block (computed from its
        // addresses and indices below its size), which outlives the test;
        // this fake device writes only the used ring, which the driver reads.
        unsafe { (addr as *mut T).write_volatile(value) }
    }

    /// Whether the driver asked for no interrupts.
    fn interrupts_masked(&self) -> bool {
        Self::read::<u16>(self.driver) & 1 != 0
    }

    /// Takes the next available chain: (head, its segments).
    fn take(&mut self) -> Option<(u16, Chain)> {
        let avail_idx: u16 = Self::read(self.driver + 2);
        if avail_idx == self.last_avail {
            return None;
        }
        let slot = u64::from(self.last_avail % self.size);
        let head: u16 = Self::read(self.driver + 4 + 2 * slot);
        self.last_avail = self.last_avail.wrapping_add(1);
        let mut segments = Vec::new();
        let mut index = head;
        loop {
            let at = self.desc + 16 * u64::from(index);
            let flags: u16 = Self::read(at + 12);
            segments.push((Self::read(at), Self::read(at + 8), flags & 2 != 0));
            assert!(
                segments.len() <= usize::from(self.size),
                "a descriptor loop"
            );
            if flags & 1 == 0 {
                break;
            }
            index = Self::read(at + 14);
        }
        Some((head, segments))
    }

    /// Returns chain `head` as used, `written` bytes written.
    fn used(&mut self, head: u16, written: u32) {
        let slot = u64::from(self.used_idx % self.size);
        Self::write(self.device + 4 + 8 * slot, u32::from(head));
        Self::write(self.device + 8 + 8 * slot, written);
        self.used_idx = self.used_idx.wrapping_add(1);
        Self::write(self.device + 2, self.used_idx);
    }
}

fn segment(addr: u64, len: u32) -> Segment {
    Segment {
        addr,
        len,
        device_writes: false,
    }
}

#[test]
fn a_full_ring_refuses_without_overwriting_and_drains_in_order() {
    let mut queue = SplitQueue::new(8).unwrap();
    let mut device = Device::new(&queue);
    // Chains of two descriptors (header + frame): four fit in eight.
    let mut heads = Vec::new();
    for i in 0..4u64 {
        let head = queue.next_head();
        let pushed = queue.push(&[segment(0x1000 + i, 12), segment(0x2000 + i, 100 + i as u32)]);
        assert_eq!(pushed, Some(head));
        heads.push(head);
    }
    assert_eq!(queue.free(), 0);
    // Full: refused, and the device still sees exactly the four.
    assert_eq!(queue.push(&[segment(0xdead, 1)]), None);
    assert_eq!(queue.free(), 0);
    let mut seen = Vec::new();
    while let Some((head, segments)) = device.take() {
        seen.push((head, segments));
    }
    assert_eq!(seen.len(), 4);
    for (i, (head, segments)) in seen.iter().enumerate() {
        let i = i as u64;
        assert_eq!(*head, heads[i as usize]);
        assert_eq!(
            *segments,
            [(0x1000 + i, 12, false), (0x2000 + i, 100 + i as u32, false)]
        );
    }
    // The device finishes two: their four descriptors come back.
    device.used(heads[1], 0);
    device.used(heads[0], 0);
    assert_eq!(queue.pop_used(), Some((heads[1], 0)));
    assert_eq!(queue.pop_used(), Some((heads[0], 0)));
    assert_eq!(queue.pop_used(), None);
    assert_eq!(queue.free(), 4);
    // A chain longer than what is free is refused whole.
    let five: Vec<Segment> = (0..5).map(|i| segment(0x3000 + i, 1)).collect();
    assert_eq!(queue.push(&five), None);
    assert_eq!(queue.free(), 4);
    assert!(queue.push(&five[..4]).is_some());
    assert_eq!(device.take().unwrap().1.len(), 4);
}

#[test]
fn indices_wrap_and_every_buffer_comes_back_once() {
    // 70 000 chains through a 4-entry ring: the 16-bit indices wrap.
    let mut queue = SplitQueue::new(4).unwrap();
    let mut device = Device::new(&queue);
    let mut in_flight = [None; 4];
    let (mut sent, mut done) = (0u64, 0u64);
    while done < 70_000 {
        // Push until the ring is full (back-pressure), as the driver does.
        while let Some(head) = queue.push(&[Segment {
            addr: sent,
            len: 2048,
            device_writes: true,
        }]) {
            assert!(in_flight[usize::from(head)].replace(sent).is_none());
            sent += 1;
        }
        // The device uses up to three, writing a length that names them.
        for _ in 0..3 {
            let Some((head, segments)) = device.take() else {
                break;
            };
            assert_eq!(segments, [(segments[0].0, 2048, true)]);
            device.used(head, (segments[0].0 % 1500) as u32);
        }
        while let Some((head, len)) = queue.pop_used() {
            let addr = in_flight[usize::from(head)].take().expect("in flight");
            assert_eq!(addr, done, "in order, none lost or repeated");
            assert_eq!(u64::from(len), addr % 1500);
            done += 1;
        }
    }
    assert!(sent - done <= 4);
}

#[test]
fn going_back_to_interrupts_sees_buffers_used_while_masked() {
    let mut queue = SplitQueue::new(4).unwrap();
    let mut device = Device::new(&queue);
    queue.set_interrupts(false);
    assert!(device.interrupts_masked());
    let head = queue.push(&[segment(0x1000, 64)]).unwrap();
    assert!(!queue.enable_interrupts(), "nothing used yet");
    assert!(!device.interrupts_masked());
    queue.set_interrupts(false);
    let (taken, _) = device.take().unwrap();
    device.used(taken, 64);
    // Used while masked: no interrupt came, so the check must say so.
    assert!(queue.enable_interrupts());
    assert_eq!(queue.pop_used(), Some((head, 64)));
    assert!(!queue.has_used());
}

#[test]
fn reset_empties_the_rings_and_frees_every_descriptor() {
    let mut queue = SplitQueue::new(8).unwrap();
    for i in 0..3 {
        queue.push(&[segment(i, 1), segment(i, 2)]).unwrap();
    }
    queue.set_interrupts(false);
    queue.reset();
    assert_eq!(queue.free(), 8);
    assert_eq!(queue.pop_used(), None);
    // A fresh device (after its reset) sees only what comes next.
    let mut device = Device::new(&queue);
    assert!(!device.interrupts_masked());
    assert!(device.take().is_none());
    let head = queue.push(&[segment(0x77, 7)]).unwrap();
    assert_eq!(device.take(), Some((head, vec![(0x77, 7, false)])));
    device.used(head, 7);
    assert_eq!(queue.pop_used(), Some((head, 7)));
}
