//! setsockopt(2)/getsockopt(2): the options a server sets (socket(7),
//! tcp(7)), kept and read back. Our stack does not act on them: it sends
//! at once (as with `TCP_NODELAY`), keeps no keepalive timer, and sizes
//! its buffers itself. Redis sets `SO_REUSEADDR`, `SO_KEEPALIVE`,
//! `TCP_NODELAY` and the `TCP_KEEP*` intervals, and reads them back in
//! `CONFIG GET`/`CLIENT` paths.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use ebb_posix::errno::{EINVAL, ENOPROTOOPT};

/// `SOL_SOCKET`.
pub const SOL_SOCKET: u32 = 1;
/// `IPPROTO_TCP`.
pub const SOL_TCP: u32 = 6;
/// `IPPROTO_IP`.
pub const SOL_IP: u32 = 0;
/// `SO_TYPE` (read only).
pub const SO_TYPE: u32 = 3;
/// `SO_ERROR` (read only).
pub const SO_ERROR: u32 = 4;
/// `SO_SNDBUF`.
pub const SO_SNDBUF: u32 = 7;
/// `SO_RCVBUF`.
pub const SO_RCVBUF: u32 = 8;
/// `SO_ACCEPTCONN` (read only).
pub const SO_ACCEPTCONN: u32 = 30;

/// An option's place and size.
#[derive(Clone, Copy)]
struct Known {
    level: u32,
    name: u32,
    bytes: usize,
    default: i32,
}

/// The options kept: `int`s unless said (socket(7), tcp(7), ip(7)).
const KNOWN: &[Known] = &[
    int(SOL_SOCKET, 2, 0), // SO_REUSEADDR
    int(SOL_SOCKET, 6, 0), // SO_BROADCAST
    int(SOL_SOCKET, SO_SNDBUF, 16_384),
    int(SOL_SOCKET, SO_RCVBUF, 131_072),
    int(SOL_SOCKET, 9, 0),  // SO_KEEPALIVE
    int(SOL_SOCKET, 10, 0), // SO_OOBINLINE
    Known {
        level: SOL_SOCKET,
        name: 13,
        bytes: 8,
        default: 0,
    }, // SO_LINGER
    int(SOL_SOCKET, 15, 0), // SO_REUSEPORT
    Known {
        level: SOL_SOCKET,
        name: 20,
        bytes: 16,
        default: 0,
    }, // SO_RCVTIMEO
    Known {
        level: SOL_SOCKET,
        name: 21,
        bytes: 16,
        default: 0,
    }, // SO_SNDTIMEO
    int(SOL_IP, 1, 0),      // IP_TOS
    int(SOL_TCP, 1, 0),     // TCP_NODELAY
    int(SOL_TCP, 4, 7200),  // TCP_KEEPIDLE
    int(SOL_TCP, 5, 75),    // TCP_KEEPINTVL
    int(SOL_TCP, 6, 9),     // TCP_KEEPCNT
    int(SOL_TCP, 18, 0),    // TCP_USER_TIMEOUT
];

const fn int(level: u32, name: u32, default: i32) -> Known {
    Known {
        level,
        name,
        bytes: 4,
        default,
    }
}

fn known(level: u32, name: u32) -> Result<Known, isize> {
    KNOWN
        .iter()
        .find(|k| k.level == level && k.name == name)
        .copied()
        .ok_or(ENOPROTOOPT)
}

/// One socket's options.
#[derive(Default)]
pub struct Options {
    set: BTreeMap<(u32, u32), Vec<u8>>,
}

impl Options {
    /// setsockopt(2): `ENOPROTOOPT` for an option not kept here, `EINVAL`
    /// for a value shorter than the option.
    pub fn set(&mut self, level: u32, name: u32, value: &[u8]) -> Result<(), isize> {
        let known = known(level, name)?;
        let mut value = value.get(..known.bytes).ok_or(EINVAL)?.to_vec();
        if level == SOL_SOCKET && (name == SO_SNDBUF || name == SO_RCVBUF) {
            // socket(7): the kernel doubles the value, and getsockopt
            // returns the doubled value.
            let mut raw = [0u8; 4];
            raw.copy_from_slice(&value);
            let doubled = i32::from_ne_bytes(raw).max(0).saturating_mul(2);
            value = doubled.to_ne_bytes().to_vec();
        }
        self.set.insert((level, name), value);
        Ok(())
    }

    /// getsockopt(2): the value set, or the option's default.
    pub fn get(&self, level: u32, name: u32) -> Result<Vec<u8>, isize> {
        let known = known(level, name)?;
        Ok(match self.set.get(&(level, name)) {
            Some(value) => value.clone(),
            None if known.bytes == 4 => known.default.to_ne_bytes().to_vec(),
            None => alloc::vec![0; known.bytes],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int_of(bytes: &[u8]) -> i32 {
        i32::from_ne_bytes(bytes.try_into().unwrap())
    }

    #[test]
    fn what_is_set_reads_back_and_defaults_are_linuxs() {
        let mut options = Options::default();
        assert_eq!(int_of(&options.get(SOL_TCP, 1).unwrap()), 0);
        options.set(SOL_TCP, 1, &1i32.to_ne_bytes()).unwrap();
        assert_eq!(int_of(&options.get(SOL_TCP, 1).unwrap()), 1);
        assert_eq!(int_of(&options.get(SOL_TCP, 4).unwrap()), 7200);
        options
            .set(SOL_SOCKET, SO_SNDBUF, &1000i32.to_ne_bytes())
            .unwrap();
        assert_eq!(int_of(&options.get(SOL_SOCKET, SO_SNDBUF).unwrap()), 2000);
        assert_eq!(options.get(SOL_SOCKET, 13).unwrap(), [0u8; 8]);
    }

    #[test]
    fn unknown_options_and_short_values_are_refused() {
        let mut options = Options::default();
        assert_eq!(options.set(41, 26, &[0; 4]), Err(ENOPROTOOPT));
        assert_eq!(options.get(SOL_SOCKET, 999), Err(ENOPROTOOPT));
        assert_eq!(options.set(SOL_SOCKET, 2, &[1, 0]), Err(EINVAL));
        assert_eq!(options.set(SOL_SOCKET, 13, &[0; 4]), Err(EINVAL));
    }
}
