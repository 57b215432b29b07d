//! Between `SocketAddr` and the kernel's `sockaddr_storage`.

use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// A socket address in the kernel's layout, with its length.
pub(crate) struct RawAddr {
    pub storage: libc::sockaddr_storage,
    pub len: libc::socklen_t,
}

fn socklen<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(size_of::<T>()).unwrap_or(libc::socklen_t::MAX)
}

impl RawAddr {
    pub fn empty() -> Self {
        RawAddr {
            // SAFETY: all-zero is a valid sockaddr_storage (AF_UNSPEC).
            storage: unsafe { std::mem::zeroed() },
            len: socklen::<libc::sockaddr_storage>(),
        }
    }

    pub fn from(addr: SocketAddr) -> Self {
        let mut raw = RawAddr::empty();
        match addr {
            SocketAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::sa_family_t::try_from(libc::AF_INET).unwrap_or(2),
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for
                // sockaddr_in; we write one whole value.
                unsafe {
                    std::ptr::write(
                        (&mut raw.storage as *mut libc::sockaddr_storage).cast(),
                        sin,
                    )
                };
                raw.len = socklen::<libc::sockaddr_in>();
            }
            SocketAddr::V6(v6) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::sa_family_t::try_from(libc::AF_INET6).unwrap_or(10),
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and aligned for
                // sockaddr_in6; we write one whole value.
                unsafe {
                    std::ptr::write(
                        (&mut raw.storage as *mut libc::sockaddr_storage).cast(),
                        sin6,
                    )
                };
                raw.len = socklen::<libc::sockaddr_in6>();
            }
        }
        raw
    }

    pub fn as_ptr(&self) -> *const libc::sockaddr {
        (&self.storage as *const libc::sockaddr_storage).cast()
    }

    pub fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        (&mut self.storage as *mut libc::sockaddr_storage).cast()
    }

    /// The address the kernel wrote, if it is IPv4 or IPv6.
    pub fn to_socket_addr(&self) -> Option<SocketAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let sin: libc::sockaddr_in = unsafe { std::ptr::read(self.as_ptr().cast()) };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let sin6: libc::sockaddr_in6 = unsafe { std::ptr::read(self.as_ptr().cast()) };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_v4_and_v6() {
        for text in ["127.0.0.1:11211", "[::1]:80", "10.1.2.3:0"] {
            let addr: SocketAddr = text.parse().unwrap();
            assert_eq!(RawAddr::from(addr).to_socket_addr(), Some(addr));
        }
        assert_eq!(RawAddr::empty().to_socket_addr(), None);
    }
}
