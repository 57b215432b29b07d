//! kvmclock's pvclock protocol (Linux `Documentation/virt/kvm/x86/msr.rst`,
//! MSR_KVM_SYSTEM_TIME_NEW; the structure is `pvclock_vcpu_time_info`):
//! the guest writes the physical address of a 32-byte, 4-byte-aligned
//! structure with bit 0 set to MSR 0x4b564d01, and the hypervisor keeps
//! it current. Time in nanoseconds at TSC value `tsc`:
//!
//! ```text
//! time = tsc - tsc_timestamp
//! time = tsc_shift >= 0 ? time << tsc_shift : time >> -tsc_shift
//! time = (time * tsc_to_system_mul) >> 32
//! time = time + system_time
//! ```
//!
//! A reader takes `version`, the fields, then `version` again, and retries
//! while it is odd (an update in progress) or changed ([`read`]).
//! Platform-neutral: the host tests below drive it with fake structures;
//! natively `clock.rs` reads the real one (only when CPUID offers
//! kvmclock, i.e. under KVM; TCG does not).

use crate::arch::x86_64::lapic_msr::Msrs;

/// MSR_KVM_SYSTEM_TIME_NEW (needs KVM_FEATURE_CLOCKSOURCE2).
pub const MSR_KVM_SYSTEM_TIME_NEW: u32 = 0x4b56_4d01;
/// `flags` bit 0: the TSC is stable across vCPUs (one structure serves
/// every core).
pub const PVCLOCK_TSC_STABLE_BIT: u8 = 1;

/// `struct pvclock_vcpu_time_info`, as the hypervisor writes it.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeInfo {
    /// Odd while the hypervisor updates the structure.
    pub version: u32,
    /// Padding.
    pub pad0: u32,
    /// The TSC when `system_time` was taken.
    pub tsc_timestamp: u64,
    /// Nanoseconds (since the host's boot) at `tsc_timestamp`.
    pub system_time: u64,
    /// TSC ticks to nanoseconds, 32.32 fixed point (after the shift).
    pub tsc_to_system_mul: u32,
    /// Power of two applied to a TSC delta before the multiplication.
    pub tsc_shift: i8,
    /// [`PVCLOCK_TSC_STABLE_BIT`].
    pub flags: u8,
    /// Padding.
    pub pad: [u8; 2],
}

/// One consistent reading of a [`TimeInfo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// See [`TimeInfo::tsc_timestamp`].
    pub tsc_timestamp: u64,
    /// See [`TimeInfo::system_time`].
    pub system_time: u64,
    /// See [`TimeInfo::tsc_to_system_mul`].
    pub mul: u32,
    /// See [`TimeInfo::tsc_shift`].
    pub shift: i8,
    /// See [`TimeInfo::flags`].
    pub flags: u8,
}

/// Where a [`TimeInfo`] is read from: each call is one read of the
/// hypervisor's (concurrently changing) structure.
pub trait TimeInfoSource {
    /// The `version` field (an acquire read: the fields after it are read
    /// after it).
    fn version(&self) -> u32;
    /// The other fields (followed by a fence: the second `version` read
    /// comes after them).
    fn fields(&self) -> Snapshot;
}

/// Reads a consistent snapshot: retries while the version is odd or
/// changes between the two reads.
pub fn read(source: &impl TimeInfoSource) -> Snapshot {
    loop {
        let before = source.version();
        if before & 1 != 0 {
            core::hint::spin_loop();
            continue;
        }
        let fields = source.fields();
        if source.version() == before {
            return fields;
        }
    }
}

/// Scales a TSC delta to nanoseconds.
pub fn scale_delta(delta: u64, mul: u32, shift: i8) -> u64 {
    // The hypervisor chooses `shift` (KVM keeps it within ±32); a value
    // that would shift every bit out gives 0 rather than a panic.
    let delta = if shift >= 0 {
        delta
            .checked_shl(u32::from(shift.unsigned_abs()))
            .unwrap_or(0)
    } else {
        delta
            .checked_shr(u32::from(shift.unsigned_abs()))
            .unwrap_or(0)
    };
    ((u128::from(delta) * u128::from(mul)) >> 32) as u64
}

impl Snapshot {
    /// Nanoseconds (on the hypervisor's clock) at TSC value `tsc`.
    pub fn nanos_at(&self, tsc: u64) -> u64 {
        let delta = tsc.wrapping_sub(self.tsc_timestamp);
        self.system_time
            .wrapping_add(scale_delta(delta, self.mul, self.shift))
    }

    /// The TSC frequency in kHz that `mul` and `shift` describe (for the
    /// LAPIC calibration and the TSC-deadline timer).
    pub fn tsc_khz(&self) -> u64 {
        // ns per tick = mul · 2^shift / 2^32, so ticks per ms =
        // 10^6 · 2^32 / (mul · 2^shift).
        let per_ms = (1_000_000u128 << 32) / u128::from(self.mul.max(1));
        let amount = u32::from(self.shift.unsigned_abs());
        let per_ms = if self.shift >= 0 {
            per_ms.checked_shr(amount).unwrap_or(0)
        } else {
            per_ms.checked_shl(amount).unwrap_or(u128::MAX)
        };
        per_ms.min(u128::from(u64::MAX)) as u64
    }

    /// Whether one structure serves every core.
    pub fn stable(&self) -> bool {
        self.flags & PVCLOCK_TSC_STABLE_BIT != 0
    }
}

/// Asks the hypervisor to keep the structure at physical address `paddr`
/// (32-byte aligned) current for this vCPU.
pub fn enable(msrs: &mut impl Msrs, paddr: u64) {
    msrs.write(MSR_KVM_SYSTEM_TIME_NEW, paddr | 1);
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arch::x86_64::lapic_msr::tests::FakeMsrs;
    use core::cell::{Cell, RefCell};
    use std::vec::Vec;

    /// How KVM derives `mul` and `shift` from the TSC rate
    /// (`kvm_get_time_scale(NSEC_PER_SEC, tsc_hz, ...)`).
    fn time_scale(tsc_hz: u64) -> (u32, i8) {
        let mut scaled64 = 1_000_000_000u64;
        let mut tps64 = tsc_hz;
        let mut shift = 0i8;
        while tps64 > scaled64 * 2 || tps64 & 0xffff_ffff_0000_0000 != 0 {
            tps64 >>= 1;
            shift -= 1;
        }
        let mut tps32 = tps64;
        while tps32 <= scaled64 || scaled64 & 0xffff_ffff_0000_0000 != 0 {
            if scaled64 & 0xffff_ffff_0000_0000 != 0 || tps32 & 0x8000_0000 != 0 {
                scaled64 >>= 1;
            } else {
                tps32 <<= 1;
            }
            shift += 1;
        }
        (((scaled64 << 32) / tps32) as u32, shift)
    }

    fn snapshot(tsc_hz: u64) -> Snapshot {
        let (mul, shift) = time_scale(tsc_hz);
        Snapshot {
            tsc_timestamp: 1_000_000,
            system_time: 5_000_000_000,
            mul,
            shift,
            flags: PVCLOCK_TSC_STABLE_BIT,
        }
    }

    #[test]
    fn the_scaling_turns_ticks_into_nanoseconds() {
        for tsc_hz in [1_000_000_000u64, 2_445_426_000, 3_000_000_000, 800_000_000] {
            let clock = snapshot(tsc_hz);
            assert_eq!(clock.nanos_at(clock.tsc_timestamp), 5_000_000_000);
            // One second of ticks later: one second later, to a few ns.
            let later = clock.nanos_at(clock.tsc_timestamp + tsc_hz);
            assert!(
                later.abs_diff(6_000_000_000) <= 2,
                "{tsc_hz} Hz: {later} (mul {}, shift {})",
                clock.mul,
                clock.shift
            );
            assert!(clock.tsc_khz().abs_diff(tsc_hz / 1000) <= 1, "{tsc_hz}");
            assert!(clock.stable());
        }
        // Negative and positive shifts by hand: mul = 2^31 is half a ns
        // per (shifted) tick.
        assert_eq!(scale_delta(1000, 1 << 31, 0), 500);
        assert_eq!(scale_delta(1000, 1 << 31, 1), 1000);
        assert_eq!(scale_delta(1000, 1 << 31, -1), 250);
        // A delta near 2^64 does not overflow the product.
        assert_eq!(scale_delta(u64::MAX, 1 << 31, 0), u64::MAX / 2);
    }

    /// A structure the "hypervisor" updates between the guest's reads:
    /// each `version()` call takes the next scripted version, and the
    /// fields change with the versions that follow an update.
    struct Racing {
        versions: RefCell<Vec<u32>>,
        reads: Cell<usize>,
        old: Snapshot,
        new: Snapshot,
    }

    impl TimeInfoSource for Racing {
        fn version(&self) -> u32 {
            self.reads.set(self.reads.get() + 1);
            self.versions.borrow_mut().remove(0)
        }
        fn fields(&self) -> Snapshot {
            // Fields read while the next version is the first "new" one
            // (4) are the new fields.
            if self.versions.borrow().first() == Some(&4) && self.reads.get() > 3 {
                self.new
            } else {
                self.old
            }
        }
    }

    #[test]
    fn a_reader_retries_while_the_version_is_odd_or_changes() {
        let old = snapshot(2_000_000_000);
        let new = Snapshot {
            system_time: 9_000_000_000,
            ..old
        };
        // 3 (odd: updating) → retry; 2 then 4 (changed under us) → retry;
        // 4 then 4 → consistent, the new fields.
        let source = Racing {
            versions: RefCell::new(Vec::from([3, 2, 4, 4, 4])),
            reads: Cell::new(0),
            old,
            new,
        };
        assert_eq!(read(&source), new);
        assert_eq!(source.reads.get(), 5);
        // A steady structure: one pass.
        let steady = Racing {
            versions: RefCell::new(Vec::from([6, 6])),
            reads: Cell::new(0),
            old,
            new,
        };
        assert_eq!(read(&steady), old);
    }

    #[test]
    fn enabling_writes_the_address_with_bit_0_to_the_new_msr() {
        let mut msrs = FakeMsrs::default();
        enable(&mut msrs, 0x12_3460);
        assert_eq!(msrs.writes, [(0x4b56_4d01, 0x12_3461)]);
        assert_eq!(core::mem::size_of::<TimeInfo>(), 32);
        assert_eq!(core::mem::align_of::<TimeInfo>(), 32);
    }
}
