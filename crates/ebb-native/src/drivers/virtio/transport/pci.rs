//! The virtio 1.x PCI transport ("modern", virtio 1.2 §4.1): the device's
//! registers are found through vendor-specific PCI capabilities (§4.1.4)
//! that point into its memory BARs: common configuration (§4.1.4.3),
//! notifications (§4.1.4.4), ISR status (§4.1.4.5) and the device-specific
//! configuration (§4.1.4.6). Device initialization follows §3.1.1.

use core::sync::atomic::{fence, Ordering};

use crate::drivers::pci::{ConfigSpace, Function, COMMAND_BUS_MASTER};
use crate::drivers::virtio::queue::split::SplitQueue;

/// The PCI vendor id of every virtio device (§4.1.2).
pub const VENDOR: u16 = 0x1af4;

/// Whether a PCI function (vendor, device id) is a virtio device (§4.1.2):
/// the functions the drivers here can take.
pub fn is_virtio(vendor: u16, _device: u16) -> bool {
    vendor == VENDOR
}

/// PCI capability id of vendor-specific capabilities (virtio's).
const CAP_VENDOR: u8 = 0x09;
/// `cfg_type` values (§4.1.4).
const COMMON_CFG: u8 = 1;
const NOTIFY_CFG: u8 = 2;
const ISR_CFG: u8 = 3;
const DEVICE_CFG: u8 = 4;

/// Common configuration register offsets (§4.1.4.3).
const DEVICE_FEATURE_SELECT: usize = 0;
const DEVICE_FEATURE: usize = 4;
const DRIVER_FEATURE_SELECT: usize = 8;
const DRIVER_FEATURE: usize = 12;
const CONFIG_MSIX_VECTOR: usize = 16;
const NUM_QUEUES: usize = 18;
const DEVICE_STATUS: usize = 20;
const QUEUE_SELECT: usize = 22;
const QUEUE_SIZE: usize = 24;
const QUEUE_MSIX_VECTOR: usize = 26;
const QUEUE_ENABLE: usize = 28;
const QUEUE_NOTIFY_OFF: usize = 30;
const QUEUE_DESC: usize = 32;
const QUEUE_DRIVER: usize = 40;
const QUEUE_DEVICE: usize = 48;

/// Device status bits (§2.1).
const ACKNOWLEDGE: u8 = 1;
const DRIVER: u8 = 2;
const DRIVER_OK: u8 = 4;
const FEATURES_OK: u8 = 8;
const FAILED: u8 = 128;

/// Status reads after writing reset before giving up on the device
/// (QEMU resets at once; each read is a trip into the hypervisor, so this
/// is well over a second).
const RESET_READS: u32 = 1_000_000;

/// No MSI-X vector (§4.1.5.1.2).
pub const NO_VECTOR: u16 = 0xffff;
/// Feature bit 32: the device follows virtio 1.x (§6).
pub const F_VERSION_1: u64 = 1 << 32;

/// Why a virtio device could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VirtioError {
    /// A capability the driver needs is missing or points outside a BAR.
    MissingCapability(&'static str),
    /// The device does not offer a feature the driver needs.
    MissingFeature(&'static str),
    /// The device refused the features (FEATURES_OK did not stick).
    FeaturesRefused,
    /// The device has no such queue, or it is already in use.
    NoQueue(u16),
    /// No memory for a queue or buffers.
    NoMemory,
    /// The device did not take the MSI-X vector.
    VectorRefused,
    /// The device did not acknowledge a control-queue command (§5.1.6.5).
    CommandFailed(&'static str),
    /// The device status did not read 0 after a reset (§4.1.4.3.2).
    ResetTimeout,
    /// A reset was asked of one pair of a multi-queue device (a reset
    /// stops every queue; only single-queue devices are reset).
    MultiQueueReset,
}

impl core::fmt::Display for VirtioError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            VirtioError::MissingCapability(what) => write!(f, "no usable {what} capability"),
            VirtioError::MissingFeature(what) => write!(f, "the device does not offer {what}"),
            VirtioError::FeaturesRefused => write!(f, "the device refused the features"),
            VirtioError::NoQueue(index) => write!(f, "the device has no queue {index}"),
            VirtioError::NoMemory => write!(f, "no memory for the queues"),
            VirtioError::VectorRefused => write!(f, "the device refused the MSI-X vector"),
            VirtioError::CommandFailed(what) => write!(f, "the device refused {what}"),
            VirtioError::ResetTimeout => write!(f, "the device did not finish its reset"),
            VirtioError::MultiQueueReset => {
                write!(f, "a multi-queue device is not reset (single-queue only)")
            }
        }
    }
}

/// A window of device registers (uncached, identity mapped by
/// `pci_ecam::init` with the BAR it is in).
#[derive(Clone, Copy, Debug)]
pub struct Registers {
    base: u64,
    len: u64,
}

impl Registers {
    fn at<T>(&self, offset: usize) -> *mut T {
        assert!(
            offset as u64 + core::mem::size_of::<T>() as u64 <= self.len,
            "virtio register {offset:#x} outside its {}-byte window",
            self.len
        );
        (self.base + offset as u64) as *mut T
    }

    /// Reads the register of type `T` at `offset`.
    pub fn read<T: Copy>(&self, offset: usize) -> T {
        // SAFETY: `at` checked the offset is inside the window, which is
        // mapped device memory (see the type); volatile, as registers are.
        unsafe { self.at::<T>(offset).read_volatile() }
    }

    /// Writes the register of type `T` at `offset`.
    pub fn write<T: Copy>(&self, offset: usize, value: T) {
        // SAFETY: `at` checked the offset is inside the mapped device window;
        // a virtio register write touches no memory Rust owns.
        unsafe { self.at::<T>(offset).write_volatile(value) }
    }
}

/// A virtio device on PCI, through its modern registers. Cloning copies
/// the register windows (each queue pair of a multi-queue device keeps
/// one, to read the device configuration).
#[derive(Clone)]
pub struct Transport {
    common: Registers,
    notify: Registers,
    notify_multiplier: u32,
    /// ISR status: read to acknowledge legacy interrupts (unused with MSI-X).
    #[allow(dead_code)]
    isr: Registers,
    device: Registers,
}

impl Transport {
    /// Finds the registers of `function` and enables memory decoding and
    /// bus mastering (the device reads and writes our queues).
    pub fn new(function: &Function, config: &dyn ConfigSpace) -> Result<Self, VirtioError> {
        let mut found: [Option<(Registers, u32)>; 5] = [None; 5];
        for &(id, at) in &function.capabilities {
            if id != CAP_VENDOR {
                continue;
            }
            let at = u16::from(at);
            let kind = config.read8(function.bdf, at + 3);
            let bar = usize::from(config.read8(function.bdf, at + 4));
            let offset = u64::from(config.read32(function.bdf, at + 8));
            let length = u64::from(config.read32(function.bdf, at + 12));
            let Some((addr, size)) = function.memory_bar(bar) else {
                continue;
            };
            if offset + length > size || !(1..=4).contains(&kind) {
                continue;
            }
            let multiplier = if kind == NOTIFY_CFG {
                config.read32(function.bdf, at + 16)
            } else {
                0
            };
            // The first capability of each type is the preferred one (§4.1.4).
            let slot = &mut found[usize::from(kind)];
            if slot.is_none() {
                *slot = Some((
                    Registers {
                        base: addr + offset,
                        len: length,
                    },
                    multiplier,
                ));
            }
        }
        let get =
            |kind: u8, what| found[usize::from(kind)].ok_or(VirtioError::MissingCapability(what));
        let (common, _) = get(COMMON_CFG, "common configuration")?;
        let (notify, notify_multiplier) = get(NOTIFY_CFG, "notification")?;
        let (isr, _) = get(ISR_CFG, "ISR status")?;
        let (device, _) = get(DEVICE_CFG, "device configuration")?;
        let command = config.read32(function.bdf, 4) & 0xffff;
        config.write32(function.bdf, 4, command | 0b10 | COMMAND_BUS_MASTER);
        Ok(Transport {
            common,
            notify,
            notify_multiplier,
            isr,
            device,
        })
    }

    /// The device-specific configuration registers.
    pub fn device_config(&self) -> Registers {
        self.device
    }

    /// Resets the device and negotiates features (§3.1.1 steps 1–6): the
    /// driver accepts `wanted & offered`; `required` must all be offered.
    /// Returns the accepted features.
    pub fn negotiate(&self, wanted: u64, required: u64) -> Result<u64, VirtioError> {
        self.negotiate_with(|_| wanted, required)
    }

    /// As [`negotiate`](Self::negotiate), with the wanted features chosen
    /// from the offered ones (features that are only useful together, such
    /// as multiqueue and the control queue).
    pub fn negotiate_with(
        &self,
        choose: impl FnOnce(u64) -> u64,
        required: u64,
    ) -> Result<u64, VirtioError> {
        self.common.write::<u8>(DEVICE_STATUS, 0);
        // The device may finish resetting later; the driver waits until
        // status reads 0 (§4.1.4.3.2), boundedly: a device that never does
        // is an error, not a hang.
        let reset = (0..RESET_READS).any(|_| {
            core::hint::spin_loop();
            self.common.read::<u8>(DEVICE_STATUS) == 0
        });
        if !reset {
            return Err(VirtioError::ResetTimeout);
        }
        self.common.write::<u8>(DEVICE_STATUS, ACKNOWLEDGE);
        self.common.write::<u8>(DEVICE_STATUS, ACKNOWLEDGE | DRIVER);
        let mut offered = 0u64;
        for half in 0..2u32 {
            self.common.write::<u32>(DEVICE_FEATURE_SELECT, half);
            offered |= u64::from(self.common.read::<u32>(DEVICE_FEATURE)) << (32 * half);
        }
        if offered & required != required {
            self.fail();
            return Err(VirtioError::MissingFeature(if offered & F_VERSION_1 == 0 {
                "VIRTIO_F_VERSION_1 (is disable-legacy=on set?)"
            } else {
                "a required feature"
            }));
        }
        let accepted = offered & (choose(offered) | required);
        for half in 0..2u32 {
            self.common.write::<u32>(DRIVER_FEATURE_SELECT, half);
            self.common
                .write::<u32>(DRIVER_FEATURE, (accepted >> (32 * half)) as u32);
        }
        self.common
            .write::<u8>(DEVICE_STATUS, ACKNOWLEDGE | DRIVER | FEATURES_OK);
        if self.common.read::<u8>(DEVICE_STATUS) & FEATURES_OK == 0 {
            self.fail();
            return Err(VirtioError::FeaturesRefused);
        }
        self.common.write::<u16>(CONFIG_MSIX_VECTOR, NO_VECTOR);
        Ok(accepted)
    }

    /// The features the device offers (readable at any time, §4.1.4.3).
    pub fn offered_features(&self) -> u64 {
        let mut offered = 0u64;
        for half in 0..2u32 {
            self.common.write::<u32>(DEVICE_FEATURE_SELECT, half);
            offered |= u64::from(self.common.read::<u32>(DEVICE_FEATURE)) << (32 * half);
        }
        offered
    }

    fn fail(&self) {
        let status = self.common.read::<u8>(DEVICE_STATUS);
        self.common.write::<u8>(DEVICE_STATUS, status | FAILED);
    }

    /// The largest size of queue `index` (0 if there is no such queue).
    pub fn max_queue_size(&self, index: u16) -> u16 {
        if index >= self.common.read::<u16>(NUM_QUEUES) {
            return 0;
        }
        self.common.write::<u16>(QUEUE_SELECT, index);
        self.common.read::<u16>(QUEUE_SIZE)
    }

    /// Gives queue `index` its memory and MSI-X vector (or [`NO_VECTOR`])
    /// and enables it (§4.1.5.1.3); returns its notification address.
    pub fn setup_queue(
        &self,
        index: u16,
        queue: &SplitQueue,
        vector: u16,
    ) -> Result<Notifier, VirtioError> {
        if self.max_queue_size(index) < queue.size() {
            return Err(VirtioError::NoQueue(index));
        }
        self.common.write::<u16>(QUEUE_SELECT, index);
        if self.common.read::<u16>(QUEUE_ENABLE) != 0 {
            return Err(VirtioError::NoQueue(index));
        }
        self.common.write::<u16>(QUEUE_SIZE, queue.size());
        let addresses = queue.addresses();
        self.common.write::<u64>(QUEUE_DESC, addresses.desc);
        self.common.write::<u64>(QUEUE_DRIVER, addresses.driver);
        self.common.write::<u64>(QUEUE_DEVICE, addresses.device);
        self.common.write::<u16>(QUEUE_MSIX_VECTOR, vector);
        if self.common.read::<u16>(QUEUE_MSIX_VECTOR) != vector {
            return Err(VirtioError::VectorRefused);
        }
        let offset = usize::from(self.common.read::<u16>(QUEUE_NOTIFY_OFF))
            * self.notify_multiplier as usize;
        self.common.write::<u16>(QUEUE_ENABLE, 1);
        Ok(Notifier {
            registers: self.notify,
            offset,
            index,
        })
    }

    /// Tells the device the driver is ready (§3.1.1 step 8).
    pub fn driver_ok(&self) {
        let status = self.common.read::<u8>(DEVICE_STATUS);
        self.common.write::<u8>(DEVICE_STATUS, status | DRIVER_OK);
    }
}

/// Notifies the device of new buffers in one queue (§4.1.5.2).
pub struct Notifier {
    registers: Registers,
    offset: usize,
    index: u16,
}

impl Notifier {
    /// Writes the queue's index to its notification address, after the
    /// driver ring's index is visible to the device.
    pub fn notify(&self) {
        fence(Ordering::SeqCst);
        self.registers.write::<u16>(self.offset, self.index);
    }
}
