//! Hosted networking against real kernel sockets on 127.0.0.1: echo
//! integrity, many connections, UDP, send credit with a slow reader,
//! connections staying on their core, and received data not copied.

mod common;

use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket as StdUdp};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{on_node, wait_until, BACKENDS};
use ebb_event::{current_core, oneshot, Receiver};
use ebb_hosted::Backend;
use ebb_net::{
    connect, listen_on_all_cores, udp_bind, AcceptFn, IoBuf, IoChain, NetError, TcpConnection,
    TcpHandler, UdpHandler, UdpSocket,
};

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Runs `client` on a plain thread; its result arrives through the
/// returned receiver (awaited on a core).
fn client<T: Send + 'static>(client: impl FnOnce() -> T + Send + 'static) -> Receiver<T> {
    let (tx, rx) = oneshot();
    thread::spawn(move || tx.send(client()));
    rx
}

/// Deterministic bytes that are not all alike.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

/// Received segments: how many, and how many were not views of the
/// kernel-filled receive buffers.
#[derive(Default)]
struct Placement {
    segments: u64,
    copied: u64,
}

/// Echo handler that also checks where the data lives. It stops reading
/// while its output waits for send credit, as a handler that keeps received
/// buffers should.
struct CheckedEcho {
    placement: Arc<Mutex<Placement>>,
}

impl TcpHandler for CheckedEcho {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        let mut placement = self.placement.lock().unwrap();
        for segment in data.segments() {
            placement.segments += 1;
            if !ebb_hosted::net::is_receive_buffer(segment.as_ptr()) {
                placement.copied += 1;
            }
        }
        drop(placement);
        conn.send_or_buffer(data).unwrap();
        if conn.send_credit() == 0 {
            conn.pause_receive();
        }
    }

    fn on_send_credit(&mut self, conn: &TcpConnection) {
        conn.resume_receive();
    }
}

fn checked_echo(placement: &Arc<Mutex<Placement>>) -> AcceptFn {
    let placement = Arc::clone(placement);
    Arc::new(move |_: &TcpConnection| {
        Box::new(CheckedEcho {
            placement: Arc::clone(&placement),
        }) as Box<dyn TcpHandler>
    })
}

/// Keeps every byte it receives until it has `want` of them, then says
/// how many were views of the receive buffers and replies `done`: the
/// shape of a handler waiting for the end of a message larger than the
/// core's whole receive ring (4 MiB), as the Messenger's deframer does.
struct Hoarder {
    want: usize,
    kept: IoChain,
}

impl TcpHandler for Hoarder {
    fn on_data(&mut self, conn: &TcpConnection, mut data: IoChain) {
        self.kept.append(&mut data);
        if self.kept.len() >= self.want {
            let in_place = self
                .kept
                .segments()
                .filter(|segment| ebb_hosted::net::is_receive_buffer(segment.as_ptr()))
                .count();
            let reply = format!("done {in_place}\n");
            conn.send_or_buffer(IoChain::from(IoBuf::copy_from_slice(reply.as_bytes())))
                .unwrap();
            self.kept = IoChain::new();
        }
    }
}

#[test]
fn a_handler_keeping_more_than_the_receive_ring_still_receives() {
    // It used to stall for good: the kernel filled all 128 buffers within
    // one loop turn, the handler kept them all, and no receive could
    // complete again. The last buffers are now always handed over as
    // copies, so the rest arrives.
    const WANT: usize = 12 << 20;
    let accept: AcceptFn = Arc::new(|_: &TcpConnection| {
        Box::new(Hoarder {
            want: WANT,
            kept: IoChain::new(),
        }) as Box<dyn TcpHandler>
    });
    let reply = on_node(1, Backend::IoUring, move || async move {
        let addr = listen_on_all_cores(localhost(), accept).await.unwrap();
        client(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            stream.write_all(&pattern(WANT, 3)).unwrap();
            let mut reply = Vec::new();
            let mut chunk = [0; 64];
            while !reply.ends_with(b"\n") {
                match stream.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => reply.extend_from_slice(&chunk[..n]),
                    Err(error) => return format!("no reply within 60 s: {error}"),
                }
            }
            String::from_utf8_lossy(&reply).into_owned()
        })
        .await
        .unwrap()
    });
    let in_place: usize = reply
        .strip_prefix("done ")
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or_else(|| panic!("the handler never had its {WANT} bytes: {reply}"));
    // Most of the ring was still handed over in place.
    assert!(
        in_place >= usize::from(ebb_hosted::net::BUFFER_COUNT) / 2,
        "only {in_place} segments were views of the receive buffers"
    );
}

#[test]
fn sixteen_mib_echo_both_ways_intact_and_received_in_place() {
    let placement = Arc::new(Mutex::new(Placement::default()));
    let accept = checked_echo(&placement);
    let echoed = on_node(2, Backend::IoUring, move || async move {
        let addr = listen_on_all_cores(localhost(), accept).await.unwrap();
        client(move || {
            let data = pattern(16 << 20, 7);
            let mut stream = TcpStream::connect(addr).unwrap();
            let mut reader = stream.try_clone().unwrap();
            let expected = data.len();
            let reading = thread::spawn(move || {
                let mut back = Vec::with_capacity(expected);
                let mut chunk = vec![0; 1 << 16];
                while back.len() < expected {
                    let n = reader.read(&mut chunk).unwrap();
                    assert!(n > 0, "the echo closed early at {} bytes", back.len());
                    back.extend_from_slice(&chunk[..n]);
                }
                back
            });
            stream.write_all(&data).unwrap();
            let back = reading.join().unwrap();
            back == data
        })
        .await
        .unwrap()
    });
    assert!(echoed, "16 MiB came back different");
    // Received data is handed over in place, except while handlers hold
    // the ring down to its reserve (`RESERVED_BUFFERS`, `LAST_BUFFERS`):
    // the kernel may fill the whole ring in one turn once the echo
    // resumes, and for a while the echo holds all of it as output. Those
    // turns get copies. How many depends on scheduling (5–18 % of segments
    // in runs on a loaded 2-core machine; a 10 % bound failed a third of
    // them), so the test asserts that most arrive in place, not a share.
    let placement = placement.lock().unwrap();
    assert!(placement.segments > 0);
    assert!(
        placement.copied * 2 <= placement.segments,
        "{} of {} received segments were copies, not the kernel-filled buffers",
        placement.copied,
        placement.segments
    );
}

#[test]
fn a_hundred_concurrent_connections_each_echo_intact() {
    let placement = Arc::new(Mutex::new(Placement::default()));
    let accept = checked_echo(&placement);
    let ok = on_node(2, Backend::IoUring, move || async move {
        let addr = listen_on_all_cores(localhost(), accept).await.unwrap();
        client(move || {
            let streams: Vec<_> = (0..100)
                .map(|_| TcpStream::connect(addr).unwrap())
                .collect();
            let mut good = 0;
            for (i, mut stream) in streams.iter().enumerate() {
                stream.write_all(&pattern(10_000, i as u64)).unwrap();
            }
            for (i, mut stream) in streams.iter().enumerate() {
                let mut back = vec![0; 10_000];
                stream.read_exact(&mut back).unwrap();
                good += usize::from(back == pattern(10_000, i as u64));
            }
            good
        })
        .await
        .unwrap()
    });
    assert_eq!(ok, 100);
}

struct Echo;

impl UdpHandler for Echo {
    fn on_datagram(&mut self, socket: &UdpSocket, from: SocketAddr, data: IoBuf) {
        socket.send_to(from, IoChain::from(data)).unwrap();
    }
}

#[test]
fn udp_echo_returns_every_datagram_intact() {
    let replies = on_node(1, Backend::IoUring, || async {
        let socket = udp_bind(localhost(), Box::new(Echo)).unwrap();
        let addr = socket.local_addr();
        client(move || {
            let peer = StdUdp::bind("127.0.0.1:0").unwrap();
            peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut good = 0;
            for i in 0..200u64 {
                let datagram = pattern(1 + usize::try_from(i * 37 % 9000).unwrap(), i);
                peer.send_to(&datagram, addr).unwrap();
                let mut back = vec![0; 65_536];
                let (n, from) = peer.recv_from(&mut back).unwrap();
                good += usize::from(from == addr && back[..n] == datagram[..]);
            }
            good
        })
        .await
        .unwrap()
    });
    assert_eq!(replies, 200);
}

/// Sends `total` bytes as fast as credit allows, counting refusals and
/// credit notifications.
struct Producer {
    left: usize,
    refused: Rc<Cell<u64>>,
    notified: Rc<Cell<u64>>,
}

impl Producer {
    fn pump(&mut self, conn: &TcpConnection) {
        while self.left > 0 {
            let size = self.left.min(64 * 1024);
            let chunk = IoChain::from(IoBuf::from_vec(pattern(size, self.left as u64)));
            match conn.send(chunk) {
                Ok(()) => self.left -= size,
                Err(refused) => {
                    assert!(
                        matches!(refused.error, NetError::NoCredit { .. }),
                        "{}",
                        refused.error
                    );
                    assert_eq!(
                        refused.data.len(),
                        size,
                        "a refused send must hand the data back whole"
                    );
                    self.refused.set(self.refused.get() + 1);
                    return;
                }
            }
        }
        conn.close();
    }
}

impl TcpHandler for Producer {
    fn on_connected(&mut self, conn: &TcpConnection) {
        self.pump(conn);
    }

    fn on_data(&mut self, _: &TcpConnection, _: IoChain) {}

    fn on_send_credit(&mut self, conn: &TcpConnection) {
        self.notified.set(self.notified.get() + 1);
        self.pump(conn);
    }
}

#[test]
fn a_slow_reader_exhausts_send_credit_and_credit_notifications_resume_sending() {
    const TOTAL: usize = 8 << 20;
    let (received, refused, notified) = on_node(1, Backend::IoUring, move || async move {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = client(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut received = 0;
            let mut chunk = vec![0; 16 * 1024];
            loop {
                let n = stream.read(&mut chunk).unwrap();
                if n == 0 {
                    return received;
                }
                received += n;
                // Slow: far below what the producer could send.
                thread::sleep(Duration::from_micros(200));
            }
        });
        let refused = Rc::new(Cell::new(0));
        let notified = Rc::new(Cell::new(0));
        let producer = Producer {
            left: TOTAL,
            refused: Rc::clone(&refused),
            notified: Rc::clone(&notified),
        };
        connect(addr, Box::new(producer)).unwrap();
        let received = reader.await.unwrap();
        (received, refused.get(), notified.get())
    });
    assert_eq!(received, TOTAL, "the slow reader got every byte");
    assert!(refused > 0, "the producer never ran out of credit");
    assert!(
        notified >= refused,
        "{refused} refusals but only {notified} credit notifications"
    );
}

/// Records, for every callback, the connection's core and the running core.
struct CoreRecorder {
    log: Arc<Mutex<Vec<(usize, usize)>>>,
}

impl TcpHandler for CoreRecorder {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        self.log
            .lock()
            .unwrap()
            .push((conn.core().0, current_core().0));
        conn.send_or_buffer(data).unwrap();
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        self.log
            .lock()
            .unwrap()
            .push((conn.core().0, current_core().0));
        conn.close();
    }
}

#[test]
fn connections_stay_on_the_core_that_accepted_them() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&log);
    let accept: AcceptFn = Arc::new(move |conn: &TcpConnection| {
        assert_eq!(conn.core(), current_core());
        Box::new(CoreRecorder {
            log: Arc::clone(&recorded),
        }) as Box<dyn TcpHandler>
    });
    on_node(2, Backend::IoUring, move || async move {
        let addr = listen_on_all_cores(localhost(), accept).await.unwrap();
        client(move || {
            for i in 0..40 {
                let mut stream = TcpStream::connect(addr).unwrap();
                for round in 0..3 {
                    stream.write_all(&pattern(100, i * 10 + round)).unwrap();
                    let mut back = [0; 100];
                    stream.read_exact(&mut back).unwrap();
                }
            }
        })
        .await
        .unwrap();
    });
    let log = log.lock().unwrap();
    assert!(log.len() >= 120);
    assert!(
        log.iter().all(|(home, running)| home == running),
        "a callback ran off its connection's core"
    );
}

#[test]
fn connecting_to_a_closed_port_reports_refused() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    struct Refused(Rc<RefCell<Option<NetError>>>);
    impl TcpHandler for Refused {
        fn on_data(&mut self, _: &TcpConnection, _: IoChain) {}
        fn on_aborted(&mut self, _: &TcpConnection, error: NetError) {
            *self.0.borrow_mut() = Some(error);
        }
    }
    let error = on_node(1, Backend::IoUring, move || async move {
        let slot = Rc::new(RefCell::new(None));
        connect(port, Box::new(Refused(Rc::clone(&slot)))).unwrap();
        let seen = Rc::clone(&slot);
        wait_until(move || seen.borrow().is_some()).await;
        let error = slot.borrow_mut().take();
        error
    });
    assert_eq!(error, Some(NetError::ConnectionRefused));
}

#[test]
fn listening_twice_on_one_port_from_another_process_socket_is_refused_clearly() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let error = on_node(1, Backend::IoUring, move || async move {
        ebb_net::listen(addr, echo_accept()).unwrap_err()
    });
    assert_eq!(error, NetError::AddrInUse);
    assert_eq!(error.to_string(), "the address is already in use");
}

fn echo_accept() -> AcceptFn {
    Arc::new(|_: &TcpConnection| {
        struct Plain;
        impl TcpHandler for Plain {
            fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
                conn.send_or_buffer(data).unwrap();
            }
        }
        Box::new(Plain) as Box<dyn TcpHandler>
    })
}

#[test]
fn paused_receive_holds_data_back_until_resumed() {
    struct Pausing {
        received: Rc<Cell<usize>>,
        conn: Rc<RefCell<Option<TcpConnection>>>,
    }
    impl TcpHandler for Pausing {
        fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
            self.received.set(self.received.get() + data.len());
            if self.conn.borrow().is_none() {
                conn.pause_receive();
                *self.conn.borrow_mut() = Some(conn.clone());
            }
        }
    }
    type Shared = (Rc<Cell<usize>>, Rc<RefCell<Option<TcpConnection>>>);
    thread_local! {
        // The accept factory must be Send + Sync, so it cannot capture the
        // Rc counters: it finds them here, on the core that accepts.
        static SHARED: RefCell<Option<Shared>> = const { RefCell::new(None) };
    }
    let (while_paused, after) = on_node(1, Backend::IoUring, || async {
        let received = Rc::new(Cell::new(0));
        let held = Rc::new(RefCell::new(None));
        SHARED.with(|shared| *shared.borrow_mut() = Some((Rc::clone(&received), Rc::clone(&held))));
        let accept: AcceptFn = Arc::new(|_: &TcpConnection| {
            let (received, conn) = SHARED.with(|shared| shared.borrow().clone().unwrap());
            Box::new(Pausing { received, conn }) as Box<dyn TcpHandler>
        });
        let addr = ebb_net::listen(localhost(), accept).unwrap();
        let writer = client(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream.write_all(b"first").unwrap();
            thread::sleep(Duration::from_millis(100));
            stream.write_all(&[7; 5000]).unwrap();
            thread::sleep(Duration::from_millis(200));
            stream
        });
        let first = Rc::clone(&received);
        wait_until(move || first.get() >= 5).await;
        let stream = writer.await.unwrap();
        let while_paused = received.get();
        held.borrow().as_ref().unwrap().resume_receive();
        let all = Rc::clone(&received);
        wait_until(move || all.get() >= 5005).await;
        drop(stream);
        (while_paused, received.get())
    });
    assert_eq!(while_paused, 5, "data arrived while receive was paused");
    assert_eq!(after, 5005);
}

#[test]
fn the_epoll_backend_explains_that_networking_needs_io_uring() {
    let error = on_node(1, BACKENDS[1], || async {
        ebb_net::listen(localhost(), echo_accept()).unwrap_err()
    });
    assert!(matches!(error, NetError::Unsupported(_)));
    assert!(error.to_string().contains("io_uring"));
}
