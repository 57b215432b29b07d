//! The work itself, and what the frontend plans: each round, every node
//! gets a slice of pseudo-random bytes and computes its digest (64-bit
//! FNV-1a), which the frontend computes too. The ring adds the digests up
//! (wrapping), so its total is checkable against both.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use ebb_iobuf::IoChain;

use crate::bound::DEFAULT_CALL_TIMEOUT;

/// FNV-1a's 64-bit offset basis and prime.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The digest of a slice: 64-bit FNV-1a of its bytes, in order (a byte
/// moved or changed changes it).
#[must_use]
pub fn digest(data: &IoChain) -> u64 {
    data.segments()
        .fold(FNV_OFFSET, |hash, segment| digest_more(hash, segment))
}

/// [`digest`] of bytes in one piece.
#[must_use]
pub fn digest_bytes(data: &[u8]) -> u64 {
    digest_more(FNV_OFFSET, data)
}

fn digest_more(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

/// The bytes of slice `slice` of round `round`: `len` pseudo-random bytes
/// (xorshift64*), the same for the same seed, round and slice.
#[must_use]
pub fn slice_data(seed: u64, round: u32, slice: u32, len: usize) -> Vec<u8> {
    let mut state =
        seed ^ (u64::from(round) << 32 | u64::from(slice)).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let word = state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        let take = (len - out.len()).min(word.len());
        out.extend_from_slice(&word[..take]);
    }
    out
}

/// What the frontend hands out: `bytes` per node per round, `rounds`
/// rounds, data made from `seed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkPlan {
    /// Bytes of data each node gets per round.
    pub bytes: usize,
    /// Rounds (each: work to every node, then the token around the ring).
    pub rounds: u32,
    /// Seed of the data.
    pub seed: u64,
    /// The unit of the calls' bounds ([`crate::work_bound`],
    /// [`crate::token_bound`]): a node that answers none of its calls
    /// within its bound is reported lost.
    pub call_timeout: Duration,
}

impl Default for WorkPlan {
    fn default() -> Self {
        WorkPlan {
            bytes: 64 << 10,
            rounds: 3,
            seed: 1,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }
}

/// A wrong argument of the work plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError(pub String);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n{}", self.0, WorkPlan::USAGE)
    }
}

impl core::error::Error for PlanError {}

impl WorkPlan {
    /// The most bytes per node per round: 16 MiB (the Messenger's payload
    /// limit is larger; this keeps a small node's memory safe).
    pub const MAX_BYTES: usize = 16 << 20;
    /// The most rounds.
    pub const MAX_ROUNDS: u32 = 1_000_000;
    /// The longest call timeout (one hour; the token carries it in
    /// milliseconds, as a u32).
    pub const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(3600);

    /// The arguments [`WorkPlan::from_args`] takes.
    pub const USAGE: &'static str = "ring's arguments (after `--`):
  --bytes N    bytes of data per node per round; K and M suffixes (default 64K, at most 16M)
  --rounds N   rounds of work and token (default 3)
  --seed N     seed of the data (default 1)
  --call-timeout T
               a node that does not answer a call within T per MiB of work
               (plus one T), or T per node left in the ring for the token, is
               reported lost; seconds, or milliseconds with ms (default 10)";

    /// The plan the application's arguments ask for (`--bytes 1M --rounds
    /// 5 --seed 7`, or `--bytes=1M`); the defaults for what is not given.
    ///
    /// # Errors
    ///
    /// An unknown argument, a missing value or a value out of range, with
    /// a sentence saying which (its `Display` adds [`WorkPlan::USAGE`]).
    pub fn from_args(args: &[String]) -> Result<WorkPlan, PlanError> {
        let mut plan = WorkPlan::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (arg.as_str(), None),
            };
            if !matches!(name, "--bytes" | "--rounds" | "--seed" | "--call-timeout") {
                return Err(PlanError(format!("unknown argument '{arg}'")));
            }
            let value = match inline.or_else(|| args.next().cloned()) {
                Some(value) => value,
                None => return Err(PlanError(format!("{name} needs a value"))),
            };
            let invalid = |expected: &str| PlanError(format!("{name} {value}: {expected}"));
            match name {
                "--bytes" => {
                    plan.bytes = parse_size(&value)
                        .filter(|bytes| (1..=Self::MAX_BYTES).contains(bytes))
                        .ok_or_else(|| invalid("expected 1 to 16M bytes"))?;
                }
                "--rounds" => {
                    plan.rounds = value
                        .parse()
                        .ok()
                        .filter(|rounds| (1..=Self::MAX_ROUNDS).contains(rounds))
                        .ok_or_else(|| invalid("expected 1 to 1000000 rounds"))?;
                }
                "--call-timeout" => {
                    plan.call_timeout = parse_duration(&value)
                        .filter(|t| !t.is_zero() && *t <= Self::MAX_CALL_TIMEOUT)
                        .ok_or_else(|| invalid("expected 1ms to 3600 seconds (10, 500ms)"))?;
                }
                _ => {
                    plan.seed = value
                        .parse()
                        .map_err(|_| invalid("expected a number (0 to 2^64-1)"))?;
                }
            }
        }
        Ok(plan)
    }
}

/// `N` seconds or `Nms` milliseconds.
fn parse_duration(text: &str) -> Option<Duration> {
    match text.strip_suffix("ms") {
        Some(millis) => millis.parse().ok().map(Duration::from_millis),
        None => text.parse().ok().map(Duration::from_secs),
    }
}

/// `N`, `NK` or `NM` (binary: K = 1024).
fn parse_size(text: &str) -> Option<usize> {
    let (digits, unit) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 1 << 10),
        b'M' | b'm' => (&text[..text.len() - 1], 1 << 20),
        _ => (text, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_iobuf::IoBuf;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_string()).collect()
    }

    #[test]
    fn the_digest_is_fnv1a_and_ignores_how_the_bytes_are_split() {
        // FNV-1a 64 of "" and "a", the published test vectors.
        assert_eq!(digest_bytes(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(digest_bytes(b"a"), 0xaf63_dc4c_8601_ec8c);
        let data = slice_data(7, 2, 1, 1000);
        let mut split = IoChain::from(IoBuf::copy_from_slice(&data[..333]));
        split.push_back(IoBuf::copy_from_slice(&data[333..]));
        assert_eq!(digest(&split), digest_bytes(&data));
        let mut swapped = data.clone();
        swapped.swap(0, 1);
        assert_ne!(digest_bytes(&swapped), digest_bytes(&data));
    }

    #[test]
    fn slices_are_repeatable_and_differ_by_seed_round_and_slice() {
        let one = slice_data(1, 1, 0, 4099);
        assert_eq!(one.len(), 4099);
        assert_eq!(one, slice_data(1, 1, 0, 4099));
        for other in [
            slice_data(2, 1, 0, 4099),
            slice_data(1, 2, 0, 4099),
            slice_data(1, 1, 1, 4099),
        ] {
            assert_ne!(digest_bytes(&other), digest_bytes(&one));
        }
        assert!(slice_data(0, 0, 0, 0).is_empty());
    }

    #[test]
    fn the_plan_parses_its_arguments() {
        assert_eq!(WorkPlan::from_args(&[]), Ok(WorkPlan::default()));
        assert_eq!(
            WorkPlan::from_args(&args(&["--bytes", "1M", "--rounds=5", "--seed", "7"])),
            Ok(WorkPlan {
                bytes: 1 << 20,
                rounds: 5,
                seed: 7,
                call_timeout: DEFAULT_CALL_TIMEOUT,
            })
        );
        assert_eq!(
            WorkPlan::from_args(&args(&["--call-timeout", "500ms"])).map(|p| p.call_timeout),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(
            WorkPlan::from_args(&args(&["--call-timeout=30"])).map(|p| p.call_timeout),
            Ok(Duration::from_secs(30))
        );
        for wrong in ["0", "3601", "ten", "5s"] {
            assert_eq!(
                WorkPlan::from_args(&args(&["--call-timeout", wrong])),
                Err(PlanError(format!(
                    "--call-timeout {wrong}: expected 1ms to 3600 seconds (10, 500ms)"
                )))
            );
        }
        assert_eq!(
            WorkPlan::from_args(&args(&["--bytes=300"])).map(|p| p.bytes),
            Ok(300)
        );
        assert_eq!(
            WorkPlan::from_args(&args(&["--bytes", "2k"])).map(|p| p.bytes),
            Ok(2048)
        );
    }

    #[test]
    fn wrong_arguments_are_refused_with_a_sentence() {
        let refused = |words: &[&str]| WorkPlan::from_args(&args(words)).unwrap_err().0;
        assert_eq!(refused(&["--nodes", "3"]), "unknown argument '--nodes'");
        assert_eq!(refused(&["--rounds"]), "--rounds needs a value");
        assert_eq!(
            refused(&["--rounds", "0"]),
            "--rounds 0: expected 1 to 1000000 rounds"
        );
        assert_eq!(
            refused(&["--bytes", "17M"]),
            "--bytes 17M: expected 1 to 16M bytes"
        );
        assert_eq!(
            refused(&["--bytes", "lots"]),
            "--bytes lots: expected 1 to 16M bytes"
        );
        assert_eq!(
            refused(&["--seed=-1"]),
            "--seed -1: expected a number (0 to 2^64-1)"
        );
        let shown = WorkPlan::from_args(&args(&["x"])).unwrap_err().to_string();
        assert!(shown.starts_with("unknown argument 'x'\nring's arguments"));
    }
}
