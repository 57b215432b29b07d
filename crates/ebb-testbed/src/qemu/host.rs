//! Facts about the host that a QEMU launch needs.

use std::path::Path;
#[cfg(target_arch = "x86_64")]
use std::time::{Duration, Instant};

/// Whether KVM can be used here: hardware virtualization in the CPU flags
/// and /dev/kvm (QEMU-NOTES: a software-only /dev/kvm is far slower than
/// TCG).
pub fn kvm_usable() -> bool {
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hardware = flags
        .lines()
        .filter(|line| line.starts_with("flags"))
        .any(|line| line.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    hardware && Path::new("/dev/kvm").exists()
}

/// The accelerator's name as QEMU spells it: `kvm` where
/// [`kvm_usable`], `tcg` otherwise.
pub fn accel() -> &'static str {
    if kvm_usable() {
        "kvm"
    } else {
        "tcg"
    }
}

/// The host's TSC frequency in kHz, measured against the monotonic clock
/// (the guest's TSC runs at the host's rate under TCG and KVM alike); the
/// median of three 10 ms measurements.
#[cfg(target_arch = "x86_64")]
pub fn measure_tsc_khz() -> Option<u64> {
    let read_tsc = || {
        // SAFETY: RDTSC only reads the time-stamp counter; it has no
        // memory effects and every x86_64 CPU has it.
        unsafe { std::arch::x86_64::_rdtsc() }
    };
    let mut samples: Vec<u64> = (0..3)
        .map(|_| {
            let start = Instant::now();
            let tsc0 = read_tsc();
            std::thread::sleep(Duration::from_millis(10));
            let tsc1 = read_tsc();
            let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            tsc1.wrapping_sub(tsc0).saturating_mul(1_000_000) / nanos.max(1)
        })
        .collect();
    samples.sort_unstable();
    Some(samples[1]).filter(|&khz| khz > 0)
}

/// Elsewhere the guest calibrates its TSC itself.
#[cfg(not(target_arch = "x86_64"))]
pub fn measure_tsc_khz() -> Option<u64> {
    None
}

/// The `wall=` word of a native guest's command line: the host's time
/// now, to the nanosecond (`ebb_boot_abi::wall_word`). Take it just
/// before QEMU starts: the guest's clock starts from it.
pub fn host_wall_word() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
        });
    ebb_boot_abi::wall_word(nanos)
}

/// Seconds since the Unix epoch on the host (0 if the clock is before it).
pub fn host_unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// 32 random bytes from the host's kernel (`/dev/urandom`), for the
/// guest's CSPRNG where its CPU has no RDRAND (`ebb-posix-native`'s
/// getrandom); `None` if they cannot be read.
pub fn host_seed() -> Option<[u8; 32]> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .ok()?;
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_seeds_differ() {
        assert_ne!(host_seed().unwrap(), host_seed().unwrap());
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_tsc_rate_is_plausible() {
        let khz = measure_tsc_khz().expect("a rate");
        // 100 MHz to 10 GHz.
        assert!((100_000..10_000_000).contains(&khz), "{khz} kHz");
    }

    #[test]
    fn the_accelerator_is_kvm_or_tcg_and_the_clock_is_past_2024() {
        assert!(["kvm", "tcg"].contains(&accel()));
        assert!(host_unix_seconds() > 1_700_000_000);
    }
}
