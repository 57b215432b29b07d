//! getrandom(2)'s bytes natively: RDRAND where the CPU has it (QEMU's
//! `-cpu max` and current hosts do); else a ChaCha20 CSPRNG (RFC 8439's
//! cipher as a keystream, `chacha20`'s `ChaCha20Rng`) seeded with the 32
//! random bytes the launcher passes (from the host's `/dev/urandom`, as
//! the fw_cfg file `ebb_boot_abi::SEED_NAME`). With neither, the call is
//! not provided.

use chacha20::rand_core::{Rng, SeedableRng};
use chacha20::ChaCha20Rng;
use ebb_boot_abi::{SEED_BYTES, SEED_NAME};
use ebb_posix::Backend;
use spin::Mutex;
use x86_64::instructions::random::RdRand;

use super::backend::Native;

/// Said (with `verbose`) when the CSPRNG starts.
pub const SEEDED: &str =
    "ebb-posix: no RDRAND: getrandom draws from ChaCha20 seeded by the launcher";

/// The CSPRNG, seeded at its first use.
static FALLBACK: Mutex<Option<ChaCha20Rng>> = Mutex::new(None);

/// Fills `buffer`; how many bytes, `Some(0)` when RDRAND failed at once
/// (`EAGAIN`), `None` without any source.
pub fn fill(buffer: &mut [u8]) -> Option<usize> {
    if let Some(source) = RdRand::new() {
        return Some(fill_from_rdrand(source, buffer));
    }
    let mut fallback = FALLBACK.lock();
    if fallback.is_none() {
        let limit = u32::try_from(SEED_BYTES).unwrap_or(u32::MAX);
        let bytes = ebb_native::drivers::fw_cfg::read_file(SEED_NAME, limit).ok()??;
        let seed: [u8; SEED_BYTES] = bytes.try_into().ok()?;
        *fallback = Some(ChaCha20Rng::from_seed(seed));
        if ebb_native::runtime::options().verbose {
            Native.log(SEEDED);
        }
    }
    fallback.as_mut()?.fill_bytes(buffer);
    Some(buffer.len())
}

fn fill_from_rdrand(source: RdRand, buffer: &mut [u8]) -> usize {
    let mut filled = 0;
    for chunk in buffer.chunks_mut(8) {
        // RDRAND may fail transiently (Intel's DRNG guide, §5.2.1: retry
        // up to ten times); what was filled before a failure is returned.
        let Some(word) = (0..10).find_map(|_| source.get_u64()) else {
            break;
        };
        chunk.copy_from_slice(&word.to_ne_bytes()[..chunk.len()]);
        filled += chunk.len();
    }
    filled
}
