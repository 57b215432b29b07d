//! Which platform features this CPU offers (CPUID) and what the platform
//! chooses from them: the interrupt-controller mode, the timer mode and
//! the clock source (issue 6). Detection reads CPUID through the tiny
//! [`Cpuid`] trait — the `cpuid` instruction on the target
//! ([`HardwareCpuid`]), a fake table in host tests — and [`choose`] is a
//! pure function of the features.
//!
//! Bits (Intel SDM vol. 2A, CPUID): leaf 1 ECX bit 21 x2APIC, bit 24
//! TSC-deadline, bit 31 "running under a hypervisor"; leaf 0x8000_0001 EDX
//! bit 26 1 GiB pages; leaf 0x8000_0007 EDX bit 8 invariant TSC. KVM
//! (Linux `Documentation/virt/kvm/x86/cpuid.rst`): leaf 0x4000_0000 says
//! "KVMKVMKVM\0\0\0" in EBX, ECX, EDX; leaf 0x4000_0001 EAX bit 3
//! `KVM_FEATURE_CLOCKSOURCE2` (the MSRs 0x4b56_4d00/01).

/// A source of CPUID results: `(eax, ebx, ecx, edx)` for `leaf`, subleaf 0.
pub trait Cpuid {
    /// Runs CPUID for `leaf` (subleaf 0).
    fn cpuid(&self, leaf: u32) -> [u32; 4];
}

/// The `cpuid` instruction of the running core.
#[cfg(target_arch = "x86_64")]
pub struct HardwareCpuid;

#[cfg(target_arch = "x86_64")]
impl Cpuid for HardwareCpuid {
    fn cpuid(&self, leaf: u32) -> [u32; 4] {
        // CPUID exists on every x86_64 processor (a safe intrinsic).
        let r = core::arch::x86_64::__cpuid_count(leaf, 0);
        [r.eax, r.ebx, r.ecx, r.edx]
    }
}

/// The features the platform cares about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuFeatures {
    /// CPUID.1:ECX[21].
    pub x2apic: bool,
    /// CPUID.1:ECX[24]: the LAPIC timer's TSC-deadline mode.
    pub tsc_deadline: bool,
    /// CPUID.8000_0007:EDX[8]: the TSC runs at a constant rate in every
    /// power state.
    pub invariant_tsc: bool,
    /// CPUID.8000_0001:EDX[26].
    pub huge_pages_1g: bool,
    /// CPUID.1:ECX[31]: running under a hypervisor.
    pub hypervisor: bool,
    /// KVM's signature at 0x4000_0000 and `KVM_FEATURE_CLOCKSOURCE2`.
    pub kvmclock: bool,
}

const KVM_SIGNATURE: &[u8; 12] = b"KVMKVMKVM\0\0\0";
const KVM_FEATURE_CLOCKSOURCE2: u32 = 1 << 3;

impl CpuFeatures {
    /// Reads the features from `cpuid`, asking only leaves that the
    /// maximum-leaf answers say exist.
    pub fn detect(cpuid: &impl Cpuid) -> CpuFeatures {
        let mut features = CpuFeatures::default();
        let max_basic = cpuid.cpuid(0)[0];
        if max_basic >= 1 {
            let ecx = cpuid.cpuid(1)[2];
            features.x2apic = ecx & (1 << 21) != 0;
            features.tsc_deadline = ecx & (1 << 24) != 0;
            features.hypervisor = ecx & (1 << 31) != 0;
        }
        let max_extended = cpuid.cpuid(0x8000_0000)[0];
        if max_extended >= 0x8000_0001 {
            features.huge_pages_1g = cpuid.cpuid(0x8000_0001)[3] & (1 << 26) != 0;
        }
        if max_extended >= 0x8000_0007 {
            features.invariant_tsc = cpuid.cpuid(0x8000_0007)[3] & (1 << 8) != 0;
        }
        if features.hypervisor {
            let [max_hypervisor, ebx, ecx, edx] = cpuid.cpuid(0x4000_0000);
            let mut signature = [0u8; 12];
            signature[0..4].copy_from_slice(&ebx.to_le_bytes());
            signature[4..8].copy_from_slice(&ecx.to_le_bytes());
            signature[8..12].copy_from_slice(&edx.to_le_bytes());
            // Old KVMs report 0 as the maximum leaf: 0x4000_0001 still exists.
            if &signature == KVM_SIGNATURE && (max_hypervisor == 0 || max_hypervisor >= 0x4000_0001)
            {
                features.kvmclock = cpuid.cpuid(0x4000_0001)[0] & KVM_FEATURE_CLOCKSOURCE2 != 0;
            }
        }
        features
    }
}

/// How the LAPIC is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterruptControllerMode {
    /// Memory-mapped registers at 0xfee0_0000.
    XApic,
    /// MSRs 0x800 and up (Intel SDM vol. 3A §11.12).
    X2Apic,
}

/// How a halt's deadline is armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerMode {
    /// The LAPIC timer's one-shot mode, counting calibrated ticks.
    OneShot,
    /// IA32_TSC_DEADLINE (MSR 0x6e0) holds the TSC value to fire at.
    TscDeadline,
}

/// Where the TSC's frequency comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// `tsc_khz=` from the launcher (measured on the host).
    TscFromCommandLine,
    /// KVM offers kvmclock: time and the TSC's frequency from its pvclock
    /// structure (`pvclock.rs`, `clock.rs`).
    KvmClock,
    /// The TSC calibrated against PIT channel 0.
    TscPitCalibrated,
}

/// What the platform uses, chosen from the features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlatformChoice {
    /// xAPIC or x2APIC.
    pub interrupt_controller: InterruptControllerMode,
    /// One-shot or TSC-deadline.
    pub timer: TimerMode,
    /// The clock's source.
    pub clock: ClockSource,
}

/// Chooses the modes: every faster mode only when CPUID offers it. The
/// TSC-deadline timer also needs an invariant TSC or a hypervisor (whose
/// TSC does not stop in idle states) so that a deadline keeps its meaning
/// across `hlt`. `tsc_khz_given`: the launcher passed `tsc_khz=`.
pub fn choose(features: &CpuFeatures, tsc_khz_given: bool) -> PlatformChoice {
    let interrupt_controller = if features.x2apic {
        InterruptControllerMode::X2Apic
    } else {
        InterruptControllerMode::XApic
    };
    let timer = if features.tsc_deadline && (features.invariant_tsc || features.hypervisor) {
        TimerMode::TscDeadline
    } else {
        TimerMode::OneShot
    };
    let clock = if features.kvmclock {
        ClockSource::KvmClock
    } else if tsc_khz_given {
        ClockSource::TscFromCommandLine
    } else {
        ClockSource::TscPitCalibrated
    };
    PlatformChoice {
        interrupt_controller,
        timer,
        clock,
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::collections::BTreeMap;

    /// A fake CPUID: leaves not in the table answer zeros.
    struct FakeCpuid(BTreeMap<u32, [u32; 4]>);

    impl Cpuid for FakeCpuid {
        fn cpuid(&self, leaf: u32) -> [u32; 4] {
            self.0.get(&leaf).copied().unwrap_or([0; 4])
        }
    }

    fn fake(leaf1_ecx: u32, ext1_edx: u32, ext7_edx: u32, kvm: Option<u32>) -> FakeCpuid {
        let mut table = BTreeMap::new();
        table.insert(0, [0xd, 0, 0, 0]);
        table.insert(1, [0, 0, leaf1_ecx, 0]);
        table.insert(0x8000_0000, [0x8000_0008, 0, 0, 0]);
        table.insert(0x8000_0001, [0, 0, 0, ext1_edx]);
        table.insert(0x8000_0007, [0, 0, 0, ext7_edx]);
        if let Some(features) = kvm {
            let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let s = KVM_SIGNATURE;
            table.insert(
                0x4000_0000,
                [0x4000_0001, word(&s[0..4]), word(&s[4..8]), word(&s[8..12])],
            );
            table.insert(0x4000_0001, [features, 0, 0, 0]);
        }
        FakeCpuid(table)
    }

    const X2APIC: u32 = 1 << 21;
    const DEADLINE: u32 = 1 << 24;
    const HYPERVISOR: u32 = 1 << 31;

    #[test]
    fn tcg_like_cpu_gets_xapic_one_shot_and_the_command_line_tsc() {
        // QEMU TCG `-cpu max` (7.2): hypervisor bit, 1 GiB pages, nothing else.
        let features = CpuFeatures::detect(&fake(HYPERVISOR, 1 << 26, 0, None));
        assert!(features.hypervisor && features.huge_pages_1g);
        assert!(!features.x2apic && !features.tsc_deadline && !features.kvmclock);
        let choice = choose(&features, true);
        assert_eq!(choice.interrupt_controller, InterruptControllerMode::XApic);
        assert_eq!(choice.timer, TimerMode::OneShot);
        assert_eq!(choice.clock, ClockSource::TscFromCommandLine);
        assert_eq!(
            choose(&features, false).clock,
            ClockSource::TscPitCalibrated
        );
    }

    #[test]
    fn x2apic_alone_changes_only_the_interrupt_controller() {
        let features = CpuFeatures::detect(&fake(X2APIC, 0, 0, None));
        let choice = choose(&features, true);
        assert_eq!(choice.interrupt_controller, InterruptControllerMode::X2Apic);
        assert_eq!(choice.timer, TimerMode::OneShot);
        assert_eq!(choice.clock, ClockSource::TscFromCommandLine);
    }

    #[test]
    fn tsc_deadline_needs_an_invariant_tsc_or_a_hypervisor() {
        let bare = CpuFeatures::detect(&fake(DEADLINE, 0, 0, None));
        assert!(bare.tsc_deadline);
        assert_eq!(choose(&bare, true).timer, TimerMode::OneShot);
        let invariant = CpuFeatures::detect(&fake(DEADLINE, 0, 1 << 8, None));
        assert!(invariant.invariant_tsc);
        assert_eq!(choose(&invariant, true).timer, TimerMode::TscDeadline);
        let virtual_ = CpuFeatures::detect(&fake(DEADLINE | HYPERVISOR, 0, 0, None));
        assert_eq!(choose(&virtual_, true).timer, TimerMode::TscDeadline);
    }

    #[test]
    fn kvm_with_kvmclock_gets_every_fast_path() {
        let features = CpuFeatures::detect(&fake(
            X2APIC | DEADLINE | HYPERVISOR,
            1 << 26,
            1 << 8,
            Some(KVM_FEATURE_CLOCKSOURCE2),
        ));
        assert!(features.kvmclock);
        let choice = choose(&features, true);
        assert_eq!(choice.interrupt_controller, InterruptControllerMode::X2Apic);
        assert_eq!(choice.timer, TimerMode::TscDeadline);
        assert_eq!(choice.clock, ClockSource::KvmClock);
    }

    #[test]
    fn kvm_signature_without_clocksource2_or_hypervisor_bit_is_no_kvmclock() {
        let old_kvm = CpuFeatures::detect(&fake(HYPERVISOR, 0, 0, Some(1)));
        assert!(!old_kvm.kvmclock);
        // The signature is only believed when the hypervisor bit is set.
        let no_bit = CpuFeatures::detect(&fake(0, 0, 0, Some(KVM_FEATURE_CLOCKSOURCE2)));
        assert!(!no_bit.kvmclock);
    }

    #[test]
    fn leaves_beyond_the_maximum_are_not_read() {
        let mut cpuid = fake(X2APIC, 1 << 26, 1 << 8, None);
        cpuid.0.insert(0x8000_0000, [0x8000_0001, 0, 0, 0]);
        let features = CpuFeatures::detect(&cpuid);
        assert!(features.huge_pages_1g && !features.invariant_tsc);
    }
}
