//! One UDP socket over a kernel socket.
//!
//! Each receive is one `recvmsg` into a fresh 64 KiB buffer that becomes
//! the datagram's `IoBuf` (no copy; a datagram never spans buffers, and a
//! provided-buffer `recvmsg` would need the multishot header layout for
//! little gain at UDP's rates here).

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::rc::{Rc, Weak};

use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetError, SendError, UdpHandler, UdpOps, UdpSocket};
use io_uring::{opcode, types};
use rustix::net::SocketType;

use super::sockaddr::RawAddr;
use super::{socket, NetCore};

/// Largest UDP payload over IPv4 and IPv6 without jumbograms.
const DATAGRAM_MAX: usize = 65_536;

pub(crate) struct UdpSock {
    net: Rc<NetCore>,
    fd: RefCell<Option<OwnedFd>>,
    raw_fd: RawFd,
    local: SocketAddr,
    me: Weak<UdpSock>,
    handler: RefCell<Option<Box<dyn UdpHandler>>>,
    closed: Cell<bool>,
    /// Datagrams dropped because they did not fit a buffer.
    truncated: Cell<u64>,
}

/// Where the kernel writes one datagram and its source.
struct Receive {
    header: libc::msghdr,
    source: RawAddr,
    iovec: libc::iovec,
    buffer: Vec<u8>,
}

impl UdpSock {
    pub fn bind(
        net: &Rc<NetCore>,
        addr: SocketAddr,
        handler: Box<dyn UdpHandler>,
    ) -> Result<UdpSocket, NetError> {
        let fd = socket::socket(&addr, SocketType::DGRAM)?;
        socket::bind(&fd, addr)?;
        let local = socket::local_addr(&fd)?;
        let raw_fd = fd.as_raw_fd();
        let socket = Rc::new_cyclic(|me| UdpSock {
            net: Rc::clone(net),
            fd: RefCell::new(Some(fd)),
            raw_fd,
            local,
            me: me.clone(),
            handler: RefCell::new(Some(handler)),
            closed: Cell::new(false),
            truncated: Cell::new(0),
        });
        net.udp.borrow_mut().push(Rc::clone(&socket));
        socket.arm_receive()?;
        Ok(socket.handle())
    }

    fn handle(&self) -> UdpSocket {
        let me: Rc<dyn UdpOps> = self.me.upgrade().expect("a live socket");
        UdpSocket::new(me)
    }

    fn arm_receive(self: &Rc<Self>) -> Result<(), NetError> {
        if self.closed.get() {
            return Ok(());
        }
        let reactor = self.net.reactor()?;
        let mut receive = Box::new(Receive {
            // SAFETY: all-zero is a valid msghdr.
            header: unsafe { std::mem::zeroed() },
            source: RawAddr::empty(),
            iovec: libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            },
            buffer: Vec::with_capacity(DATAGRAM_MAX),
        });
        receive.iovec.iov_base = receive.buffer.as_mut_ptr().cast();
        receive.iovec.iov_len = receive.buffer.capacity();
        receive.header.msg_name = receive.source.as_mut_ptr().cast();
        receive.header.msg_namelen = receive.source.len;
        receive.header.msg_iov = &mut receive.iovec;
        receive.header.msg_iovlen = 1;
        let entry = opcode::RecvMsg::new(types::Fd(self.raw_fd), &mut receive.header).build();
        let socket = Rc::clone(self);
        let mut pending = Some(receive);
        let on_receive = move |result: i32, _flags: u32| {
            if let Some(receive) = pending.take() {
                socket.on_receive(result, receive);
            }
            false
        };
        // SAFETY: the header, address, iovec and buffer live in the boxed
        // `Receive` inside the closure until the operation completes, and
        // nothing else touches them meanwhile.
        unsafe { reactor.submit(entry, Box::new(on_receive)) };
        Ok(())
    }

    fn on_receive(self: &Rc<Self>, result: i32, mut receive: Box<Receive>) {
        if result == -libc::ECANCELED || self.closed.get() {
            return;
        }
        if let Ok(len) = usize::try_from(result) {
            if receive.header.msg_flags & libc::MSG_TRUNC != 0 {
                self.truncated.set(self.truncated.get() + 1);
            } else {
                // SAFETY: the kernel wrote `len` bytes (<= capacity) at the
                // start of the buffer.
                unsafe { receive.buffer.set_len(len) };
                receive.source.len = receive.header.msg_namelen;
                if let Some(from) = receive.source.to_socket_addr() {
                    let data = IoBuf::from_vec(std::mem::take(&mut receive.buffer));
                    let handler = self.handler.borrow_mut().take();
                    if let Some(mut handler) = handler {
                        let socket = self.handle();
                        handler.on_datagram(&socket, from, data);
                        if !self.closed.get() {
                            *self.handler.borrow_mut() = Some(handler);
                        }
                    }
                }
            }
        }
        // Errors on a UDP socket (e.g. ICMP port unreachable) concern one
        // datagram: keep receiving.
        let _ = self.arm_receive();
    }

    pub fn forget(&self) {
        self.closed.set(true);
        self.fd.borrow_mut().take();
        self.handler.borrow_mut().take();
    }
}

impl UdpOps for UdpSock {
    fn send_to(&self, to: SocketAddr, data: IoChain) -> Result<(), SendError> {
        if self.closed.get() {
            return Err(SendError {
                error: NetError::Closed,
                data,
            });
        }
        let reactor = match self.net.reactor() {
            Ok(reactor) => reactor,
            Err(error) => return Err(SendError { error, data }),
        };
        let mut iovecs: Vec<libc::iovec> = data
            .segments()
            .map(|segment| libc::iovec {
                iov_base: segment.as_ptr().cast_mut().cast(),
                iov_len: segment.len(),
            })
            .collect();
        let target = Box::new(RawAddr::from(to));
        // SAFETY: all-zero is a valid msghdr.
        let mut header: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        header.msg_name = target.as_ptr().cast_mut().cast();
        header.msg_namelen = target.len;
        header.msg_iov = iovecs.as_mut_ptr();
        header.msg_iovlen = crate::sys::iov_count(iovecs.len());
        let entry = opcode::SendMsg::new(types::Fd(self.raw_fd), &*header).build();
        let keep = (data, iovecs, header, target);
        // SAFETY: the header, address, iovecs and the buffers they point to
        // live in the closure until the operation completes.
        unsafe {
            reactor.submit(
                entry,
                Box::new(move |_, _| {
                    let _sent = &keep;
                    false
                }),
            )
        };
        Ok(())
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn close(&self) {
        self.forget();
        self.net
            .udp
            .borrow_mut()
            .retain(|socket| !std::ptr::eq(&**socket, self));
    }
}
