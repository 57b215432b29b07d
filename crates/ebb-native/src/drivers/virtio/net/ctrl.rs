//! virtio-net's control virtqueue (virtio 1.2 §5.1.6.5): commands the
//! driver sends the device, each one chain of a device-readable header
//! (`class`, `command`), device-readable command data and one
//! device-writable acknowledgement byte. Only what multiqueue needs:
//! `VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET` (§5.1.6.5.5).
//!
//! Commands are rare (once at start), so the queue has no interrupt: the
//! driver notifies and polls the used ring until the device answers. QEMU
//! handles the queue during the notification's register write, so the
//! answer is there at once; the wait is bounded anyway.

use alloc::boxed::Box;

use crate::arch::x86_64::clock;
use crate::drivers::virtio::queue::split::{Segment, SplitQueue};
use crate::drivers::virtio::transport::pci::{Notifier, Transport, VirtioError, NO_VECTOR};

/// Command class and command of "set the number of queue pairs"
/// (§5.1.6.5.5).
const CTRL_MQ: u8 = 4;
const CTRL_MQ_VQ_PAIRS_SET: u8 = 0;
/// The acknowledgement of a command the device carried out.
const CTRL_OK: u8 = 0;
/// Descriptors: one command (three segments) at a time.
const SIZE: u16 = 8;
/// How long the driver waits for an answer.
const TIMEOUT_NS: u64 = 1_000_000_000;

/// The control virtqueue of one virtio-net device.
pub struct ControlQueue {
    queue: SplitQueue,
    notify: Notifier,
}

impl ControlQueue {
    /// Sets up queue `index` (2 × max_virtqueue_pairs with multiqueue,
    /// §5.1.2) as the control queue. Before DRIVER_OK, like every queue.
    pub fn new(transport: &Transport, index: u16) -> Result<Self, VirtioError> {
        let size = SIZE.min(transport.max_queue_size(index));
        if !size.is_power_of_two() {
            return Err(VirtioError::NoQueue(index));
        }
        let mut queue = SplitQueue::new(size).ok_or(VirtioError::NoMemory)?;
        let notify = transport.setup_queue(index, &queue, NO_VECTOR)?;
        queue.set_interrupts(false);
        Ok(ControlQueue { queue, notify })
    }

    /// Tells the device to spread received traffic over the first `pairs`
    /// receive queues (automatic receive steering, §5.1.6.5.5: a flow's
    /// packets go to the receive queue of the pair whose transmit queue
    /// last sent that flow). After DRIVER_OK.
    pub fn set_queue_pairs(&mut self, pairs: u16) -> Result<(), VirtioError> {
        self.command(
            CTRL_MQ,
            CTRL_MQ_VQ_PAIRS_SET,
            &pairs.to_le_bytes(),
            "the number of queue pairs",
        )
    }

    fn command(
        &mut self,
        class: u8,
        command: u8,
        data: &[u8],
        what: &'static str,
    ) -> Result<(), VirtioError> {
        // Heap buffers: identity mapped, so their addresses are the
        // device's; they live until the device has answered (or for good,
        // if it never does: leaked below rather than freed under it).
        let header: Box<[u8]> = Box::new([class, command]);
        let data: Box<[u8]> = data.into();
        let ack: Box<[u8]> = Box::new([0xff]);
        let segment = |buffer: &[u8], device_writes| Segment {
            addr: buffer.as_ptr() as u64,
            len: buffer.len() as u32,
            device_writes,
        };
        let chain = [
            segment(&header, false),
            segment(&data, false),
            segment(&ack, true),
        ];
        self.queue
            .push(&chain)
            .ok_or(VirtioError::CommandFailed(what))?;
        self.notify.notify();
        let deadline = clock::nanos() + TIMEOUT_NS;
        while self.queue.pop_used().is_none() {
            if clock::nanos() > deadline {
                // The device may still write the acknowledgement.
                Box::leak(header);
                Box::leak(data);
                Box::leak(ack);
                return Err(VirtioError::CommandFailed(what));
            }
            core::hint::spin_loop();
        }
        // Volatile: the device's write came from outside the program, so
        // the compiler must not assume the byte still holds what we stored.
        // SAFETY: `ack` is a live one-byte heap block, written by the device
        // before the used entry `pop_used` read with acquire ordering.
        let answer = unsafe { ack.as_ptr().read_volatile() };
        if answer == CTRL_OK {
            Ok(())
        } else {
            Err(VirtioError::CommandFailed(what))
        }
    }
}
