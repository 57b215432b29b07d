//! `struct sockaddr_in` (ip(7)): family, port and address as the program
//! lays them out, and socket(2)'s arguments.

use core::net::{Ipv4Addr, SocketAddrV4};

use ebb_posix::errno::{EAFNOSUPPORT, EINVAL, EPROTONOSUPPORT};

/// `AF_UNIX`.
pub const AF_UNIX: u32 = 1;
/// `AF_INET`: the one family served natively.
pub const AF_INET: u32 = 2;
/// `sa_family_t`'s value of `AF_INET`.
const AF_INET_FAMILY: u16 = 2;
/// `AF_INET6`.
pub const AF_INET6: u32 = 10;
/// `SOCK_STREAM`.
pub const SOCK_STREAM: u32 = 1;
/// `SOCK_NONBLOCK` (= `O_NONBLOCK`).
pub const SOCK_NONBLOCK: u32 = 0o4000;
/// `SOCK_CLOEXEC` (= `O_CLOEXEC`).
pub const SOCK_CLOEXEC: u32 = 0o2_000_000;
/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u32 = 6;
/// `sizeof(struct sockaddr_in)`.
pub const SOCKADDR_IN_BYTES: usize = 16;

/// socket(2)'s arguments checked: the descriptor flags to open it with
/// (`SOCK_NONBLOCK`, `SOCK_CLOEXEC`). IPv4 TCP only: another family is
/// `EAFNOSUPPORT` (which Redis takes as "skip this address"), another type
/// or protocol `EPROTONOSUPPORT`, unknown flag bits `EINVAL`.
pub fn socket_flags(domain: u32, kind: u32, protocol: u32) -> Result<u32, isize> {
    if domain != AF_INET {
        return Err(EAFNOSUPPORT);
    }
    let flags = kind & !0xf;
    if flags & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(EINVAL);
    }
    if kind & 0xf != SOCK_STREAM || !(protocol == 0 || protocol == IPPROTO_TCP) {
        return Err(EPROTONOSUPPORT);
    }
    Ok(flags)
}

/// An IPv4 address from the program's `struct sockaddr` bytes: `EINVAL`
/// when too short, `EAFNOSUPPORT` for another family.
pub fn parse(bytes: &[u8]) -> Result<SocketAddrV4, isize> {
    let family = bytes.get(..2).ok_or(EINVAL)?;
    if u16::from_ne_bytes([family[0], family[1]]) != AF_INET_FAMILY {
        return Err(EAFNOSUPPORT);
    }
    let bytes = bytes.get(..SOCKADDR_IN_BYTES).ok_or(EINVAL)?;
    // sin_port and sin_addr are in network order.
    let port = u16::from_be_bytes([bytes[2], bytes[3]]);
    let ip = Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]);
    Ok(SocketAddrV4::new(ip, port))
}

/// `addr` as `struct sockaddr_in`.
#[must_use]
pub fn encode(addr: SocketAddrV4) -> [u8; SOCKADDR_IN_BYTES] {
    let mut bytes = [0u8; SOCKADDR_IN_BYTES];
    bytes[..2].copy_from_slice(&AF_INET_FAMILY.to_ne_bytes());
    bytes[2..4].copy_from_slice(&addr.port().to_be_bytes());
    bytes[4..8].copy_from_slice(&addr.ip().octets());
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_ipv4_streams_are_sockets_here() {
        assert_eq!(
            socket_flags(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0),
            Ok(SOCK_NONBLOCK)
        );
        assert_eq!(socket_flags(AF_INET, SOCK_STREAM, IPPROTO_TCP), Ok(0));
        assert_eq!(socket_flags(AF_INET6, SOCK_STREAM, 0), Err(EAFNOSUPPORT));
        assert_eq!(socket_flags(AF_UNIX, SOCK_STREAM, 0), Err(EAFNOSUPPORT));
        assert_eq!(socket_flags(AF_INET, 2, 0), Err(EPROTONOSUPPORT));
        assert_eq!(socket_flags(AF_INET, SOCK_STREAM, 17), Err(EPROTONOSUPPORT));
        assert_eq!(socket_flags(AF_INET, SOCK_STREAM | 0x40, 0), Err(EINVAL));
    }

    #[test]
    fn short_or_foreign_addresses_are_refused() {
        assert_eq!(parse(&[]), Err(EINVAL));
        assert_eq!(
            parse(&encode(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1))[..15]),
            Err(EINVAL)
        );
        let mut v6 = [0u8; 28];
        v6[..2].copy_from_slice(&10u16.to_ne_bytes());
        assert_eq!(parse(&v6), Err(EAFNOSUPPORT));
    }

    proptest! {
        #[test]
        fn addresses_round_trip(ip in any::<u32>(), port in any::<u16>()) {
            let addr = SocketAddrV4::new(Ipv4Addr::from(ip), port);
            prop_assert_eq!(parse(&encode(addr)), Ok(addr));
        }

        #[test]
        fn any_bytes_parse_or_fail_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = parse(&bytes);
        }
    }
}
