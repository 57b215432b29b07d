//! The MSR side of the LAPIC modes chosen from CPUID, over any [`Msrs`]
//! (the CPU's `rdmsr`/`wrmsr` natively, `lapic_modes.rs`; a fake map in
//! the host tests below, since QEMU 7.2's TCG offers neither mode):
//!
//! * **x2APIC** (Intel SDM vol. 3A §11.12): enabled by IA32_APIC_BASE bit
//!   10 together with the global enable, bit 11 (§11.12.1); the register
//!   at MMIO offset `o` is MSR `0x800 + o/16` (§11.12.1.2); the ICR is one
//!   64-bit MSR (0x830) with the whole destination id in its high half and
//!   no delivery-status bit to poll (§11.12.9).
//! * **TSC-deadline** (§11.5.4.1): LVT timer mode bits 18:17 = 10b; the
//!   timer fires when the TSC reaches IA32_TSC_DEADLINE (MSR 0x6e0);
//!   writing 0 disarms it.

/// Model-specific registers, read and written 64 bits at a time.
pub trait Msrs {
    /// `rdmsr`.
    fn read(&mut self, msr: u32) -> u64;
    /// `wrmsr`.
    fn write(&mut self, msr: u32, value: u64);
}

/// IA32_APIC_BASE.
pub const IA32_APIC_BASE: u32 = 0x1b;
/// IA32_APIC_BASE bit 11: the LAPIC is enabled.
pub const APIC_BASE_ENABLE: u64 = 1 << 11;
/// IA32_APIC_BASE bit 10: x2APIC mode.
pub const APIC_BASE_X2APIC_ENABLE: u64 = 1 << 10;
/// The first x2APIC MSR (the MMIO register at offset 0).
pub const X2APIC_MSR_BASE: u32 = 0x800;
/// The x2APIC interrupt command register (64-bit).
pub const X2APIC_ICR: u32 = 0x830;
/// IA32_TSC_DEADLINE.
pub const IA32_TSC_DEADLINE: u32 = 0x6e0;
/// LVT timer mode bits 18:17 = 10b: TSC-deadline.
pub const LVT_TIMER_TSC_DEADLINE: u32 = 0b10 << 17;

/// Enables the LAPIC, in x2APIC mode if `x2apic` (xAPIC → x2APIC with
/// the LAPIC enabled is an allowed transition, SDM §11.12.5), keeping its
/// base address.
pub fn enable(msrs: &mut impl Msrs, x2apic: bool) {
    let value = msrs.read(IA32_APIC_BASE) | APIC_BASE_ENABLE;
    msrs.write(IA32_APIC_BASE, value);
    if x2apic {
        msrs.write(IA32_APIC_BASE, value | APIC_BASE_X2APIC_ENABLE);
    }
}

/// The MSR of the register at MMIO offset `register`.
pub fn register_msr(register: usize) -> u32 {
    X2APIC_MSR_BASE + (register >> 4) as u32
}

/// Reads the x2APIC register at MMIO offset `register`.
pub fn read_register(msrs: &mut impl Msrs, register: usize) -> u32 {
    msrs.read(register_msr(register)) as u32
}

/// Writes the x2APIC register at MMIO offset `register`.
pub fn write_register(msrs: &mut impl Msrs, register: usize, value: u32) {
    msrs.write(register_msr(register), u64::from(value));
}

/// Sends an IPI (`command`: the ICR's low word) to `apic_id`: one write.
pub fn send_ipi(msrs: &mut impl Msrs, apic_id: u32, command: u32) {
    msrs.write(X2APIC_ICR, (u64::from(apic_id) << 32) | u64::from(command));
}

/// The LVT timer value for a deadline-mode timer on `vector`.
pub fn lvt_timer_deadline(vector: u32) -> u32 {
    vector | LVT_TIMER_TSC_DEADLINE
}

/// The TSC value `ns` nanoseconds after `now_tsc` at `tsc_khz` (at least
/// one tick later: 0 would disarm; saturating).
pub fn deadline_after(now_tsc: u64, ns: u64, tsc_khz: u64) -> u64 {
    let ticks = (u128::from(ns) * u128::from(tsc_khz) / 1_000_000).max(1);
    (u128::from(now_tsc) + ticks).min(u128::from(u64::MAX)) as u64
}

/// Arms the deadline timer at TSC value `deadline` (after the LVT timer
/// was switched to deadline mode).
pub fn arm_deadline(msrs: &mut impl Msrs, deadline: u64) {
    msrs.write(IA32_TSC_DEADLINE, deadline);
}

/// Disarms the deadline timer.
pub fn disarm_deadline(msrs: &mut impl Msrs) {
    msrs.write(IA32_TSC_DEADLINE, 0);
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    /// MSRs as a map, with every write recorded in order.
    #[derive(Default)]
    pub(crate) struct FakeMsrs {
        pub(crate) values: BTreeMap<u32, u64>,
        pub(crate) writes: Vec<(u32, u64)>,
    }

    impl Msrs for FakeMsrs {
        fn read(&mut self, msr: u32) -> u64 {
            self.values.get(&msr).copied().unwrap_or(0)
        }
        fn write(&mut self, msr: u32, value: u64) {
            self.values.insert(msr, value);
            self.writes.push((msr, value));
        }
    }

    #[test]
    fn enabling_x2apic_sets_bits_11_then_10_and_keeps_the_base() {
        let mut msrs = FakeMsrs::default();
        // QEMU's reset value: base 0xfee00000, bootstrap processor (bit 8).
        msrs.values.insert(IA32_APIC_BASE, 0xfee0_0100);
        enable(&mut msrs, true);
        assert_eq!(
            msrs.writes,
            [(IA32_APIC_BASE, 0xfee0_0900), (IA32_APIC_BASE, 0xfee0_0d00)]
        );
        let mut msrs = FakeMsrs::default();
        msrs.values.insert(IA32_APIC_BASE, 0xfee0_0000);
        enable(&mut msrs, false);
        assert_eq!(msrs.writes, [(IA32_APIC_BASE, 0xfee0_0800)]);
    }

    #[test]
    fn x2apic_registers_are_msrs_0x800_plus_offset_over_16() {
        let mut msrs = FakeMsrs::default();
        assert_eq!(register_msr(0x20), 0x802); // ID
        assert_eq!(register_msr(0xb0), 0x80b); // EOI
        assert_eq!(register_msr(0x320), 0x832); // LVT timer
        assert_eq!(register_msr(0x380), 0x838); // initial count
        msrs.values.insert(0x802, 0x1_0000_0007);
        assert_eq!(read_register(&mut msrs, 0x20), 7);
        write_register(&mut msrs, 0xb0, 0);
        write_register(&mut msrs, 0xf0, 0x1ff);
        assert_eq!(msrs.writes, [(0x80b, 0), (0x80f, 0x1ff)]);
    }

    #[test]
    fn an_x2apic_ipi_is_one_64_bit_icr_write_with_the_whole_id() {
        let mut msrs = FakeMsrs::default();
        send_ipi(&mut msrs, 300, (1 << 14) | 0x31);
        assert_eq!(msrs.writes, [(0x830, (300 << 32) | (1 << 14) | 0x31)]);
    }

    #[test]
    fn tsc_deadlines_are_armed_in_ticks_and_disarmed_with_0() {
        assert_eq!(lvt_timer_deadline(0x30), 0x4_0030);
        // 2.5 GHz: 1 ms is 2.5e6 ticks.
        assert_eq!(deadline_after(1_000, 1_000_000, 2_500_000), 2_501_000);
        assert_eq!(deadline_after(1_000, 0, 2_500_000), 1_001, "never 'now'");
        assert_eq!(deadline_after(u64::MAX - 1, 1 << 40, 2_500_000), u64::MAX);
        let mut msrs = FakeMsrs::default();
        arm_deadline(&mut msrs, 2_501_000);
        disarm_deadline(&mut msrs);
        assert_eq!(msrs.writes, [(0x6e0, 2_501_000), (0x6e0, 0)]);
    }
}
