//! virtio-net (virtio 1.2 §5.1) over the modern PCI transport: each
//! receive/transmit queue pair is an `ebb-netstack` [`Device`].
//!
//! * **Multiqueue** (§5.1.6.5.5). Asked for more than one pair,
//!   [`VirtioNet::open`] negotiates MQ and CTRL_VQ (only together), reads
//!   `max_virtqueue_pairs`, sets up min(asked, max) pairs (pair `i` is
//!   queues `2i` and `2i + 1`) and the control queue (`2 × max`), and
//!   after DRIVER_OK sends VQ_PAIRS_SET. Each pair is then used by one
//!   core only; the device steers a flow's received packets to the pair
//!   that last sent it. Every pair has its own transmit headers, backlog
//!   and counters.
//! * **Receive without copies.** Each receive buffer is a 2 KiB heap
//!   block the device writes (12-byte `virtio_net_hdr`, then the frame). A
//!   received frame goes to the stack as an [`IoBuf`] whose owner is the
//!   buffer itself; when the last view of it is dropped the buffer goes
//!   back to a pool, and the next poll gives it to the device again. At
//!   most [`MAX_RX_BUFFERS`] exist; once so many are lent that the rest
//!   could not fill the ring, a frame is copied out and its buffer goes
//!   straight back to the device, so the ring never runs dry. Otherwise
//!   a stack holding every buffer (an echo whose replies wait for the
//!   peer's ACKs, a reassembly queue after losses) could never receive
//!   the ACKs that would let it free them: the device, without buffers,
//!   delivers nothing (virtio 1.2 §5.1.6.3), and every connection stops.
//! * **Transmit from the chain.** A frame's descriptors are its header
//!   (one per ring slot, see `offload`) plus one per `IoChain` segment; the chain is kept until the device reports the
//!   descriptors used, then dropped (its buffers released). Segments
//!   outside the identity map (demand-paged regions, stacks) are copied.
//! * **Features.** VERSION_1 (required), MAC (the address from the
//!   device), STATUS (link state), MRG_RXBUF (buffers are large enough for
//!   any frame without GSO, so a frame always arrives in one buffer; more
//!   are dropped), CSUM and GUEST_CSUM (checksum offload both ways, see
//!   `offload`: the stack leaves transmit checksums partial and skips
//!   verifying what the device flags; only with a host backend that has
//!   a virtio-net header — TAP, not QEMU's user networking).
//! * **Reset.** [`VirtioNet::reset`] resets the device (status 0) and sets
//!   it up again as at start: what was in flight is reclaimed (transmit
//!   chains dropped, as a wire loses frames; receive buffers back to the
//!   pool). Single-queue devices only: a reset stops every queue of the
//!   device, and with several pairs the others belong to other cores (and
//!   the control queue and VQ_PAIRS_SET would have to be redone), so a
//!   pair of a multi-queue device refuses ([`VirtioError::MultiQueueReset`]).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_netstack::{ChecksumCapabilities, Device, DeviceCapabilities, EthernetAddress, RxChecksum};
use spin::Mutex;

use crate::drivers::pci::{ConfigSpace, Function};
use crate::drivers::virtio::net::config::{
    MAC_OFFSET, MAX_PAIRS_LIMIT, MAX_PAIRS_OFFSET, STATUS_LINK_UP, STATUS_OFFSET,
};
use crate::drivers::virtio::net::ctrl::ControlQueue;
use crate::drivers::virtio::net::features::{
    F_CSUM, F_CTRL_VQ, F_GUEST_CSUM, F_MAC, F_MQ, F_MRG_RXBUF, F_STATUS, WANTED,
};
use crate::drivers::virtio::net::offload::{self, HEADER};
use crate::drivers::virtio::net::rx_lending::lending_would_starve_the_ring;
use crate::drivers::virtio::net::stats::QueueStats;
use crate::drivers::virtio::queue::split::{Segment, SplitQueue};
use crate::drivers::virtio::transport::pci::{
    Notifier, Transport, VirtioError, F_VERSION_1, NO_VECTOR,
};

/// A receive buffer: header + the largest Ethernet frame (1514), rounded
/// up so buffers pack two to a page.
const RX_BUFFER: usize = 2048;
/// Queue sizes (QEMU offers 256).
const QUEUE_SIZE: u16 = 256;
/// Receive buffers alive at most (in the ring plus lent to the stack and
/// the application); beyond that, frames wait in the device.
const MAX_RX_BUFFERS: usize = 1024;
/// Frames that wait for room in a full transmit ring at most; beyond, the
/// device drops (as a NIC with a full ring does; TCP retransmits). Enough
/// for a full TCP window of 1448-byte segments at the stack's default
/// buffer sizes.
const MAX_TX_BACKLOG: usize = 512;
/// Frames put in the transmit ring before the device is notified at the
/// latest, when the driver has not yet ended its batch (`kick_tx`): a
/// notification is a VM exit, and a 64 KiB send is some 45 frames, but
/// the device should not sit idle behind a long burst either.
const TX_KICK_BATCH: u16 = 32;

/// A receive buffer lent to the stack: the frame's bytes, and the buffer
/// goes back to the pool when the last view of it is dropped.
struct RxFrame {
    buffer: Option<Box<[u8]>>,
    len: usize,
    pool: Arc<Mutex<Vec<Box<[u8]>>>>,
}

impl AsRef<[u8]> for RxFrame {
    fn as_ref(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .map_or(&[][..], |buffer| &buffer[HEADER..HEADER + self.len])
    }
}

impl Drop for RxFrame {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.lock().push(buffer);
        }
    }
}

/// One receive/transmit queue pair of a virtio-net device: the stack's
/// [`Device`]. `Send`, so that core 0 can set every pair up and hand each
/// to its core.
pub struct VirtioNet {
    transport: Transport,
    /// Which pair of the device this is, and how many the device uses.
    pair: u16,
    pairs: u16,
    features: u64,
    offered: u64,
    mac: EthernetAddress,
    rx_vector: u16,
    /// The receive interrupt is masked (adaptive polling is polling).
    rx_masked: bool,
    resets: u64,
    rx: SplitQueue,
    rx_notify: Notifier,
    /// The buffer behind each receive descriptor id in the ring.
    rx_posted: Vec<Option<Box<[u8]>>>,
    rx_pool: Arc<Mutex<Vec<Box<[u8]>>>>,
    rx_allocated: usize,
    /// Buffers still to drop of a frame that spanned several.
    rx_skip: u16,
    tx: SplitQueue,
    tx_notify: Notifier,
    /// The chain behind each transmit head descriptor id.
    tx_in_flight: Vec<Option<IoChain>>,
    /// Prepared frames waiting for room in the transmit ring.
    tx_backlog: VecDeque<(IoChain, [u8; HEADER])>,
    /// Frames in the transmit ring the device has not been notified of.
    tx_unkicked: u16,
    /// The `virtio_net_hdr` of the frame behind each transmit head id.
    tx_headers: Box<[[u8; HEADER]]>,
    rx_stats: QueueStats,
    tx_stats: QueueStats,
}

impl VirtioNet {
    /// Sets up `function` (a modern virtio-net) with one queue pair:
    /// interrupts for received frames go to MSI-X table entry 0 if
    /// `rx_vector` is `Some(0)`, else the queues are polled.
    pub fn new(
        function: &Function,
        config: &dyn ConfigSpace,
        rx_vector: Option<u16>,
    ) -> Result<Self, VirtioError> {
        let mut pairs = Self::open(function, config, 1, |_| rx_vector, QUEUE_SIZE)?;
        pairs.pop().ok_or(VirtioError::NoQueue(0))
    }

    /// Sets up `function` with up to `wanted` queue pairs (as many as the
    /// device has, at least one): features, queues, receive buffers. Pair
    /// `i`'s receive interrupts go to MSI-X table entry `rx_vector(i)`
    /// (`None`: polled). Transmit queues have `tx_queue` entries at most
    /// (a power of two; tests use small ones to fill the ring). Returns
    /// the pairs, pair 0 first.
    pub fn open(
        function: &Function,
        config: &dyn ConfigSpace,
        wanted: u16,
        rx_vector: impl Fn(u16) -> Option<u16>,
        tx_queue: u16,
    ) -> Result<Vec<Self>, VirtioError> {
        let transport = Transport::new(function, config)?;
        let multi = F_MQ | F_CTRL_VQ;
        // The control queue is only worth its setup with more than one pair.
        let features = transport.negotiate_with(
            |offered| {
                if wanted > 1 && offered & multi == multi {
                    WANTED | multi
                } else {
                    WANTED
                }
            },
            F_VERSION_1,
        )?;
        let offered = transport.offered_features();
        let device = transport.device_config();
        let mac = if features & F_MAC != 0 {
            let mut mac = [0u8; 6];
            for (i, byte) in mac.iter_mut().enumerate() {
                *byte = device.read::<u8>(MAC_OFFSET + i);
            }
            EthernetAddress(mac)
        } else {
            EthernetAddress([0x02, 0xeb, 0, 0, 0, 0x15])
        };
        let max_pairs = if features & F_MQ != 0 {
            device
                .read::<u16>(MAX_PAIRS_OFFSET)
                .clamp(1, MAX_PAIRS_LIMIT)
        } else {
            1
        };
        let count = wanted.clamp(1, max_pairs);
        let mut pairs = Vec::with_capacity(usize::from(count));
        for pair in 0..count {
            pairs.push(Self::pair(
                &transport,
                (features, offered),
                mac,
                pair,
                rx_vector(pair),
                tx_queue,
            )?);
        }
        let mut control = if count > 1 {
            Some(ControlQueue::new(&transport, 2 * max_pairs)?)
        } else {
            None
        };
        transport.driver_ok();
        if let Some(control) = control.as_mut() {
            // Until this command the device uses pair 0 only (§5.1.6.5.5);
            // if it refuses, pair 0 alone carries the traffic.
            if let Err(error) = control.set_queue_pairs(count) {
                log::warn!("virtio-net: {error}: one queue pair");
                pairs.truncate(1);
            }
        }
        let used = u16::try_from(pairs.len()).unwrap_or(1);
        for pair in &mut pairs {
            pair.pairs = used;
            pair.refill();
        }
        Ok(pairs)
    }

    /// Sets up queue pair `pair` (receive queue `2 × pair`, transmit
    /// queue `2 × pair + 1`); before DRIVER_OK.
    fn pair(
        transport: &Transport,
        (features, offered): (u64, u64),
        mac: EthernetAddress,
        pair: u16,
        rx_vector: Option<u16>,
        tx_queue: u16,
    ) -> Result<Self, VirtioError> {
        let (rx_index, tx_index) = (2 * pair, 2 * pair + 1);
        let rx_size = QUEUE_SIZE.min(transport.max_queue_size(rx_index));
        let tx_size = tx_queue.min(transport.max_queue_size(tx_index));
        if !rx_size.is_power_of_two() || !tx_size.is_power_of_two() {
            return Err(VirtioError::NoQueue(rx_index));
        }
        let mut rx = SplitQueue::new(rx_size).ok_or(VirtioError::NoMemory)?;
        let mut tx = SplitQueue::new(tx_size).ok_or(VirtioError::NoMemory)?;
        let rx_notify = transport.setup_queue(rx_index, &rx, rx_vector.unwrap_or(NO_VECTOR))?;
        let tx_notify = transport.setup_queue(tx_index, &tx, NO_VECTOR)?;
        rx.set_interrupts(rx_vector.is_some());
        tx.set_interrupts(false);
        Ok(VirtioNet {
            transport: transport.clone(),
            pair,
            pairs: 1,
            features,
            offered,
            mac,
            rx_vector: rx_vector.unwrap_or(NO_VECTOR),
            rx_masked: false,
            resets: 0,
            rx,
            rx_notify,
            rx_posted: (0..rx_size).map(|_| None).collect(),
            rx_pool: Arc::new(Mutex::new(Vec::new())),
            rx_allocated: 0,
            rx_skip: 0,
            tx,
            tx_notify,
            tx_in_flight: (0..tx_size).map(|_| None).collect(),
            tx_backlog: VecDeque::new(),
            tx_unkicked: 0,
            tx_headers: vec![[0; HEADER]; usize::from(tx_size)].into_boxed_slice(),
            rx_stats: QueueStats::default(),
            tx_stats: QueueStats::default(),
        })
    }

    /// Which queue pair of the device this is (0 first).
    pub fn pair_index(&self) -> u16 {
        self.pair
    }

    /// The device's MAC address.
    pub fn mac(&self) -> EthernetAddress {
        self.mac
    }

    /// The accepted features.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// The features the device offered.
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// Whether frames wait in the transmit backlog for room in the ring.
    pub fn tx_waiting(&self) -> bool {
        !self.tx_backlog.is_empty()
    }

    /// Device resets so far ([`reset`](Self::reset)).
    pub fn resets(&self) -> u64 {
        self.resets
    }

    /// Masks or unmasks the receive queue's interrupt (adaptive polling);
    /// unmasking returns whether frames arrived meanwhile, which no
    /// interrupt will announce: the caller polls once more.
    pub fn set_rx_interrupts(&mut self, wanted: bool) -> bool {
        self.rx_stats.mode_switches += 1;
        self.rx_masked = !wanted;
        if wanted {
            self.rx.enable_interrupts()
        } else {
            self.rx.set_interrupts(false);
            false
        }
    }

    /// Resets the device (§2.1.2, status 0: it forgets the queues and
    /// stops using their buffers) and initialises it again with the same
    /// features and interrupt vector. Chains in flight are dropped (lost,
    /// as on a wire; TCP retransmits them), receive buffers go back to the
    /// pool and are given to the device again.
    pub fn reset(&mut self) -> Result<(), VirtioError> {
        if self.pairs > 1 {
            return Err(VirtioError::MultiQueueReset);
        }
        // `negotiate` starts with the reset and waits for status 0; only
        // then are the rings and buffers ours again.
        let features = self.transport.negotiate(self.features, F_VERSION_1)?;
        if features != self.features {
            return Err(VirtioError::FeaturesRefused);
        }
        self.resets += 1;
        for chain in &mut self.tx_in_flight {
            if chain.take().is_some() {
                self.tx_stats.dropped += 1;
            }
        }
        {
            let mut pool = self.rx_pool.lock();
            pool.extend(self.rx_posted.iter_mut().filter_map(Option::take));
        }
        self.rx_skip = 0;
        self.tx_unkicked = 0;
        self.rx.reset();
        self.tx.reset();
        let (rx_index, tx_index) = (2 * self.pair, 2 * self.pair + 1);
        self.rx_notify = self
            .transport
            .setup_queue(rx_index, &self.rx, self.rx_vector)?;
        self.tx_notify = self.transport.setup_queue(tx_index, &self.tx, NO_VECTOR)?;
        self.rx
            .set_interrupts(self.rx_vector != NO_VECTOR && !self.rx_masked);
        self.tx.set_interrupts(false);
        self.transport.driver_ok();
        self.refill();
        Ok(())
    }

    /// Whether the link is up (always, without the STATUS feature).
    pub fn link_up(&self) -> bool {
        self.features & F_STATUS == 0
            || self.transport.device_config().read::<u16>(STATUS_OFFSET) & STATUS_LINK_UP != 0
    }

    /// Receive and transmit counters.
    pub fn stats(&self) -> (QueueStats, QueueStats) {
        (self.rx_stats, self.tx_stats)
    }

    /// Counts an interrupt that led to a poll.
    pub fn count_interrupt(&mut self) {
        self.rx_stats.interrupts += 1;
    }

    /// Whether the frame just popped is to be copied rather than lent
    /// (`rx_lending`).
    fn no_spare_rx_buffer(&self) -> bool {
        lending_would_starve_the_ring(
            self.rx_pool.lock().len(),
            MAX_RX_BUFFERS - self.rx_allocated,
            self.rx.free(),
        )
    }

    /// Gives the device every receive buffer the pool has (and new ones up
    /// to [`MAX_RX_BUFFERS`]) while the ring has room.
    fn refill(&mut self) {
        let mut added = false;
        while self.rx.free() > 0 {
            let buffer = match self.rx_pool.lock().pop() {
                Some(buffer) => buffer,
                None if self.rx_allocated < MAX_RX_BUFFERS => {
                    self.rx_allocated += 1;
                    vec![0u8; RX_BUFFER].into_boxed_slice()
                }
                None => break,
            };
            let segment = Segment {
                addr: buffer.as_ptr() as u64,
                len: RX_BUFFER as u32,
                device_writes: true,
            };
            match self.rx.push(&[segment]) {
                Some(head) => {
                    self.rx_posted[usize::from(head)] = Some(buffer);
                    added = true;
                }
                None => {
                    self.rx_pool.lock().push(buffer);
                    break;
                }
            }
        }
        if added {
            notify_if_wanted(&self.rx, &self.rx_notify, &mut self.rx_stats);
        }
    }

    /// Notifies the device of the frames put in the transmit ring since
    /// the last notification, unless it says it needs none (§2.7.10).
    /// Transmitting only fills the ring: the core's driver calls this at
    /// the end of each poll and after sends from outside one, so a batch
    /// of frames costs one VM exit (as Linux's `xmit_more` does).
    pub fn kick_tx(&mut self) {
        if self.tx_unkicked == 0 {
            return;
        }
        self.tx_unkicked = 0;
        notify_if_wanted(&self.tx, &self.tx_notify, &mut self.tx_stats);
    }

    /// Drops the chains of frames the device has sent, then gives it the
    /// frames that waited for room, in order.
    fn reclaim_tx(&mut self) {
        self.tx_stats.polls += 1;
        while let Some((head, _)) = self.tx.pop_used() {
            self.tx_in_flight[usize::from(head)] = None;
        }
        while let Some((frame, header)) = self.tx_backlog.pop_front() {
            if let Err(waiting) = self.push_tx(frame, header) {
                self.tx_backlog.push_front(waiting);
                break;
            }
        }
    }

    /// Makes `frame` sendable: in memory the device reaches, in few enough
    /// segments, with its `virtio_net_hdr`.
    fn prepare(&self, mut frame: IoChain) -> (IoChain, [u8; HEADER]) {
        let reachable = frame
            .segments()
            .all(|segment| identity_mapped(segment.as_ptr() as u64, segment.len()));
        let needed = frame.segment_count() + 1;
        if !reachable || needed > usize::from(self.tx.size()) / 2 {
            // Gather into one heap buffer the device can reach.
            frame = IoChain::from(IoBuf::from_vec(frame.to_vec()));
        }
        let csum = self.features & F_CSUM != 0;
        let first = frame.segments().next().map_or(&[][..], IoBuf::as_slice);
        let mut header = offload::tx_header(csum, first);
        if csum && header[0] == 0 && frame.segment_count() > 1 {
            // The headers continue past the first segment: gather, so the
            // partial checksum is found (rare: the stack writes all its
            // headers into one buffer).
            let gathered = frame.to_vec();
            header = offload::tx_header(csum, &gathered);
            frame = IoChain::from(IoBuf::from_vec(gathered));
        }
        (frame, header)
    }

    /// Puts a prepared frame in the transmit ring, or gives it back if the
    /// ring is full (back-pressure: it waits in the backlog).
    fn push_tx(
        &mut self,
        frame: IoChain,
        header: [u8; HEADER],
    ) -> Result<(), (IoChain, [u8; HEADER])> {
        let segment_count = frame.segments().filter(|s| !s.is_empty()).count() + 1;
        if usize::from(self.tx.free()) < segment_count {
            // The device frees room only once it knows of the frames.
            self.kick_tx();
            return Err((frame, header));
        }
        // The header lives in the slot of the head descriptor the chain
        // gets (free now, so no frame in flight uses it).
        let slot = usize::from(self.tx.next_head() % self.tx.size());
        self.tx_headers[slot] = header;
        let mut segments = Vec::with_capacity(segment_count);
        segments.push(Segment {
            addr: self.tx_headers[slot].as_ptr() as u64,
            len: HEADER as u32,
            device_writes: false,
        });
        segments.extend(
            frame
                .segments()
                .filter(|s| !s.is_empty())
                .map(|segment| Segment {
                    addr: segment.as_ptr() as u64,
                    len: segment.len() as u32,
                    device_writes: false,
                }),
        );
        let len = frame.len();
        let Some(head) = self.tx.push(&segments) else {
            self.kick_tx();
            return Err((frame, header));
        };
        self.tx_in_flight[usize::from(head)] = Some(frame);
        self.tx_unkicked += 1;
        if self.tx_unkicked >= TX_KICK_BATCH {
            self.kick_tx();
        }
        self.tx_stats.packets += 1;
        self.tx_stats.bytes += len as u64;
        if header[0] != 0 {
            self.tx_stats.csum_offloaded += 1;
        }
        Ok(())
    }
}

/// Notifies the device of new buffers in `queue` unless it says it needs
/// no notification (§2.7.10), counting either.
fn notify_if_wanted(queue: &SplitQueue, notifier: &Notifier, stats: &mut QueueStats) {
    if queue.device_wants_notification() {
        notifier.notify();
        stats.notifications += 1;
    } else {
        stats.notifications_suppressed += 1;
    }
}

/// Whether the device can reach `[addr, addr + len)` at the same address:
/// the identity map is the lower half; the stacks' and regions' areas are
/// in the upper half.
fn identity_mapped(addr: u64, len: usize) -> bool {
    addr.checked_add(len as u64)
        .is_some_and(|end| end <= 1 << 47)
}

impl Device for VirtioNet {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        self.receive_checked(now).map(|(frame, _)| frame)
    }

    fn receive_checked(&mut self, _now: Instant) -> Option<(IoBuf, RxChecksum)> {
        self.rx_stats.polls += 1;
        loop {
            let Some((head, written)) = self.rx.pop_used() else {
                self.refill();
                // Each poll also moves frames waiting for transmit room.
                if !self.tx_backlog.is_empty() {
                    self.reclaim_tx();
                }
                return None;
            };
            let buffer = self.rx_posted[usize::from(head)].take()?;
            let written = (written as usize).min(RX_BUFFER);
            if self.rx_skip > 0 {
                self.rx_skip -= 1;
                self.rx_pool.lock().push(buffer);
                continue;
            }
            let buffers = u16::from_le_bytes([buffer[10], buffer[11]]);
            if written < HEADER || (self.features & F_MRG_RXBUF != 0 && buffers > 1) {
                self.rx_skip = buffers.saturating_sub(1);
                self.rx_stats.dropped += 1;
                self.rx_pool.lock().push(buffer);
                continue;
            }
            let len = written - HEADER;
            let checksum = offload::rx_checksum(self.features & F_GUEST_CSUM != 0, &buffer);
            self.rx_stats.packets += 1;
            if checksum != RxChecksum::Unverified {
                self.rx_stats.csum_offloaded += 1;
            }
            self.rx_stats.bytes += len as u64;
            let frame = if self.no_spare_rx_buffer() {
                // Lending this buffer too would leave the ring one short
                // for good (see the module docs): copy, and give it back.
                // The copy is fallible: this runs when memory is held, and
                // a frame dropped for want of memory is one TCP resends.
                let mut copy = Vec::new();
                let copied = copy.try_reserve_exact(len).is_ok();
                if copied {
                    copy.extend_from_slice(&buffer[HEADER..HEADER + len]);
                }
                self.rx_pool.lock().push(buffer);
                if !copied {
                    self.rx_stats.dropped += 1;
                    continue;
                }
                self.rx_stats.copied += 1;
                IoBuf::from_vec(copy)
            } else {
                IoBuf::from_owner(RxFrame {
                    buffer: Some(buffer),
                    len,
                    pool: Arc::clone(&self.rx_pool),
                })
            };
            if self.rx.free() >= self.rx.size() / 2 {
                self.refill();
            }
            return Some((frame, checksum));
        }
    }

    fn transmit(&mut self, _now: Instant, frame: IoChain) {
        self.reclaim_tx();
        let (frame, header) = self.prepare(frame);
        if self.tx_backlog.is_empty() {
            if let Err(waiting) = self.push_tx(frame, header) {
                self.tx_backlog.push_back(waiting);
                self.tx_stats.backlogged += 1;
            }
        } else if self.tx_backlog.len() < MAX_TX_BACKLOG {
            self.tx_backlog.push_back((frame, header));
            self.tx_stats.backlogged += 1;
        } else {
            self.tx_stats.dropped += 1;
        }
    }

    fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities {
            mtu: 1500,
            checksum: ChecksumCapabilities {
                tx_partial: self.features & F_CSUM != 0,
                ..ChecksumCapabilities::default()
            },
        }
    }
}
