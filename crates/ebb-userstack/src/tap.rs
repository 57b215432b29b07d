//! A TAP device as an [`ebb_netstack::Device`]: `/dev/net/tun` opened with
//! `IFF_TAP | IFF_NO_PI` (Ethernet frames with no packet-information
//! prefix, see the kernel's `Documentation/networking/tuntap.rst`),
//! non-blocking. Each read lands in a buffer of its own that becomes the
//! frame's `IoBuf`, so the stack hands views of it to the application with
//! no copy; a chain to send goes out with one `writev`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use ebb_iobuf::{IoBuf, IoChain};
use ebb_netstack::{Device, DeviceCapabilities, Instant};

/// Ethernet header (14) plus a VLAN tag's room: a frame of MTU 1500 fits.
const FRAME_ROOM: usize = 1500 + 18;

/// Frame counters of a TAP device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Frames read.
    pub rx_frames: u64,
    /// Frames written.
    pub tx_frames: u64,
    /// Frames the kernel refused (`EAGAIN`: its queue is full), dropped.
    pub tx_dropped: u64,
    /// Reads or writes that failed otherwise.
    pub errors: u64,
}

/// An open TAP file, not yet a device: it can move between threads (the
/// process opens it before its cores start; core 0 makes it a device).
#[derive(Debug)]
pub struct TapFile {
    fd: OwnedFd,
    name: String,
}

/// A TAP device attached to this process.
pub struct TapDevice {
    fd: OwnedFd,
    name: String,
    /// A zeroed buffer ready for the next read (kept when a read finds
    /// nothing, so polling an empty device allocates nothing).
    spare: Option<Vec<u8>>,
    stats: TapStats,
    /// Frames still to read in this batch (see [`TapDevice::start_batch`]).
    budget: usize,
    /// Whether the batch ended on its budget rather than an empty device.
    budget_ran_out: bool,
    /// Called after each transmit (the driver reschedules its timers: a
    /// send may have started ARP resolution).
    on_transmit: Option<Box<dyn FnMut()>>,
}

impl TapFile {
    /// Attaches to the existing TAP device `name` of this network
    /// namespace (needs `CAP_NET_ADMIN`). It does not create one: TAP
    /// devices belong in a namespace made for them (`ip netns add`, then
    /// `ip -n NS tuntap add dev NAME mode tap`, its kernel-side address and
    /// `link set NAME up`), and a typo must not make one elsewhere.
    ///
    /// # Errors
    ///
    /// If there is no such device, `/dev/net/tun` cannot be opened or the
    /// kernel refuses (not a TAP device, not permitted).
    pub fn open(name: &str) -> io::Result<Self> {
        let c_name = CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the TAP name"))?;
        if c_name.as_bytes().len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a TAP name has at most 15 bytes",
            ));
        }
        // SAFETY: `c_name` is a NUL-terminated string; the call only reads it.
        if unsafe { libc::if_nametoindex(c_name.as_ptr()) } == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no network device {name} in this network namespace: create the TAP \
                     device in a namespace of its own (ip -n NS tuntap add dev {name} mode tap) \
                     and run this inside it (ip netns exec NS ...)"
                ),
            ));
        }
        let path = c"/dev/net/tun";
        // SAFETY: `path` is a NUL-terminated string; open has no other
        // memory effects.
        let raw = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a file descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `ifreq` is plain data (integers, arrays, a union of
        // plain data): all zeroes is a valid value.
        let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
        for (slot, &byte) in request.ifr_name.iter_mut().zip(c_name.as_bytes()) {
            *slot = libc::c_char::from_ne_bytes([byte]);
        }
        let flags = libc::IFF_TAP | libc::IFF_NO_PI;
        request.ifr_ifru.ifru_flags = libc::c_short::try_from(flags).unwrap_or(0);
        // SAFETY: TUNSETIFF reads (and may write back the name into) one
        // `ifreq`, which lives on our stack for the call.
        let done = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut request) };
        if done < 0 {
            return Err(io::Error::last_os_error());
        }
        // No offloads: we read no virtio-net header, so every frame the
        // kernel hands us must be whole, its checksums filled in. The
        // offloads are the device's, not the attachment's, and outlive
        // their setter: a QEMU that used the device with `vnet_hdr`
        // leaves checksum offload on, and the kernel then sends TCP
        // segments with partial checksums, which our stack drops
        // (drivers/net/tun.c, `set_offload`).
        // SAFETY: TUNSETOFFLOAD takes its flags by value; no memory is
        // read or written.
        let done = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, 0) };
        if done < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(TapFile {
            fd,
            name: name.to_string(),
        })
    }

    /// The device's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl TapDevice {
    /// The device over an open TAP file.
    #[must_use]
    pub fn new(file: TapFile) -> Self {
        TapDevice {
            fd: file.fd,
            name: file.name,
            spare: None,
            stats: TapStats::default(),
            budget: usize::MAX,
            budget_ran_out: false,
            on_transmit: None,
        }
    }

    /// The device's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file descriptor (to watch for readability).
    #[must_use]
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Frame counters.
    #[must_use]
    pub fn stats(&self) -> TapStats {
        self.stats
    }

    /// Lets the next reads take at most `frames` frames, so that one poll
    /// under a flood does not keep the core from its other events.
    pub fn start_batch(&mut self, frames: usize) {
        self.budget = frames;
        self.budget_ran_out = false;
    }

    /// Whether the last batch stopped on its budget (frames may be
    /// waiting: poll again soon) rather than on an empty device.
    #[must_use]
    pub fn budget_ran_out(&self) -> bool {
        self.budget_ran_out
    }

    /// Sets what is called after each transmitted frame.
    pub fn set_on_transmit(&mut self, hook: Box<dyn FnMut()>) {
        self.on_transmit = Some(hook);
    }

    fn write_chain(&mut self, frame: &IoChain) -> io::Result<usize> {
        let iovecs: Vec<libc::iovec> = frame
            .segments()
            .map(|segment| libc::iovec {
                iov_base: segment.as_ptr().cast_mut().cast(),
                iov_len: segment.len(),
            })
            .collect();
        let count = libc::c_int::try_from(iovecs.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many segments"))?;
        // SAFETY: each iovec points to a live segment of `frame`, which
        // outlives the call; writev only reads them.
        let written = unsafe { libc::writev(self.fd.as_raw_fd(), iovecs.as_ptr(), count) };
        usize::try_from(written).map_err(|_| io::Error::last_os_error())
    }
}

impl Device for TapDevice {
    fn receive(&mut self, _now: Instant) -> Option<IoBuf> {
        if self.budget == 0 {
            self.budget_ran_out = true;
            return None;
        }
        let mut buffer = self.spare.take().unwrap_or_else(|| vec![0; FRAME_ROOM]);
        // SAFETY: reads at most `buffer.len()` bytes into the buffer we
        // own for the call.
        let read = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
            )
        };
        match usize::try_from(read) {
            Ok(len) => {
                buffer.truncate(len);
                self.stats.rx_frames += 1;
                self.budget -= 1;
                Some(IoBuf::from_vec(buffer))
            }
            Err(_) => {
                if io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock {
                    self.stats.errors += 1;
                }
                self.spare = Some(buffer);
                None
            }
        }
    }

    fn transmit(&mut self, _now: Instant, frame: IoChain) {
        match self.write_chain(&frame) {
            Ok(_) => self.stats.tx_frames += 1,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => self.stats.tx_dropped += 1,
            Err(_) => self.stats.errors += 1,
        }
        if let Some(hook) = self.on_transmit.as_mut() {
            hook();
        }
    }

    fn capabilities(&self) -> DeviceCapabilities {
        // The kernel writes complete checksums to a TAP device that did not
        // ask for offloads (TUNSETOFFLOAD), so the stack verifies them all.
        DeviceCapabilities::default()
    }
}
