//! Copy counting: memcached on Ebbflow's own TCP (`ebb-netstack`, on the
//! simulated link) gets its requests as views of the frames the device
//! received, and its GET replies leave as views of the stored value's
//! buffer — the stack copies neither (DESIGN §4, issue 8). The server is
//! memcached's real connection handler (`accept_fn`), wrapped to note the
//! address of every buffer the stack hands it; the server's device notes
//! where each received frame lives and what each sent frame chains.
//!
//! A large value arriving in many frames is copied once on its way into
//! the store (issue 15, defect 10): gathered from the frames into one
//! buffer sized from its `set` line, which the store then keeps as the
//! item's value. This binary's allocator counts the allocations of about
//! the value's size to show it.
//!
//! The simulation runs inside a one-core hosted node, because memcached's
//! handler reads the core's clock and counters. The scenarios share the
//! note of delivered buffers and the allocation count, so they run one at
//! a time (`SERIAL`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetError, NetStack, TcpConnection, TcpHandler};
use ebb_netstack::sim::{LinkConfig, Sim};
use ebb_netstack::{Config, Device, DeviceCapabilities, EthernetAddress, Instant, IpConfig, Stack};
use memcached::{accept_fn, Server, Settings};

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// 3 segments' worth: the value crosses segment boundaries both ways.
const VALUE_LEN: usize = 4000;
/// The "1 MB values", more than the receive window.
const LARGE_VALUE_LEN: usize = 1_000_000;

/// The system allocator, counting the allocations (and reallocations)
/// whose size is within a page above `WATCHED_SIZE`.
struct Counting;

static WATCHED_SIZE: AtomicUsize = AtomicUsize::new(usize::MAX);
static WATCHED_ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

fn note_size(size: usize) {
    let watched = WATCHED_SIZE.load(Ordering::Relaxed);
    if size >= watched && size - watched <= 4096 {
        WATCHED_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on unchanged to `System`, which upholds
// `GlobalAlloc`'s contract; counting touches only atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_size(layout.size());
        // SAFETY: the caller's `layout` is valid for `alloc` (this
        // function's own contract), which is all `System.alloc` needs.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with
        // `layout` (this function's own contract).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_size(new_size);
        // SAFETY: `ptr` came from `System` with `layout`, and `new_size` is
        // valid for it (this function's own contract).
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Serializes the scenarios (see the module documentation).
static SERIAL: Mutex<()> = Mutex::new(());

/// An address range (start, length).
type Range = (usize, usize);

fn range_of(bytes: &[u8]) -> Range {
    (bytes.as_ptr() as usize, bytes.len())
}

fn within(inner: Range, outer: Range) -> bool {
    inner.0 >= outer.0 && inner.0 + inner.1 <= outer.0 + outer.1
}

/// A device that notes where received frames live and what sent frames
/// chain.
struct Spy<D> {
    inner: D,
    received: Rc<RefCell<Vec<Range>>>,
    sent: Rc<RefCell<Vec<Vec<Range>>>>,
}

impl<D: Device> Device for Spy<D> {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        let frame = self.inner.receive(now)?;
        self.received.borrow_mut().push(range_of(&frame));
        Some(frame)
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        self.sent
            .borrow_mut()
            .push(frame.segments().map(|segment| range_of(segment)).collect());
        self.inner.transmit(now, frame);
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.inner.capabilities()
    }
}

/// The buffers the stack handed memcached's handler (the accept function
/// must be `Send + Sync`, hence the mutex).
static DELIVERED: Mutex<Vec<Range>> = Mutex::new(Vec::new());

/// memcached's handler, noting every buffer it is given.
struct Noting(Box<dyn TcpHandler>);

impl TcpHandler for Noting {
    fn on_connected(&mut self, conn: &TcpConnection) {
        self.0.on_connected(conn);
    }

    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        DELIVERED
            .lock()
            .unwrap()
            .extend(data.segments().map(|segment| range_of(segment)));
        self.0.on_data(conn, data);
    }

    fn on_send_credit(&mut self, conn: &TcpConnection) {
        self.0.on_send_credit(conn);
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        self.0.on_closed(conn);
    }

    fn on_aborted(&mut self, conn: &TcpConnection, error: NetError) {
        self.0.on_aborted(conn, error);
    }
}

/// The client: sends what it is given, keeps every reply byte.
struct Client(Rc<RefCell<Vec<u8>>>);

impl TcpHandler for Client {
    fn on_data(&mut self, _conn: &TcpConnection, data: IoChain) {
        let mut replies = self.0.borrow_mut();
        for segment in data.segments() {
            replies.extend_from_slice(segment);
        }
    }
}

fn config(last: u8, ip: Ipv4Addr) -> Config {
    Config::new_static(
        EthernetAddress([2, 0, 0, 0, 0, last]),
        IpConfig {
            addr: ip,
            prefix_len: 24,
            gateway: None,
        },
    )
}

/// What the scenario saw, checked outside the node.
#[derive(Debug, Default)]
struct Seen {
    replies: Vec<u8>,
    value: Vec<u8>,
    received_frames: Vec<Range>,
    sent_frames: Vec<Vec<Range>>,
    /// The buffers memcached's handler was handed.
    delivered: Vec<Range>,
    stored_value: Range,
    stored_bytes_match: bool,
    /// Allocations of about the value's size while the SET was handled.
    set_allocations: usize,
}

/// A SET of a `value_len`-byte value, then a GET of it, on the simulated
/// link.
fn scenario(value_len: usize) -> Seen {
    let server = Server::start(Settings::default(), 1_700_000_000).expect("counters");
    let mut sim = Sim::new(LinkConfig::default());
    let received = Rc::new(RefCell::new(Vec::new()));
    let sent = Rc::new(RefCell::new(Vec::new()));
    let client = Stack::new(sim.wire().port(), config(1, CLIENT_IP), sim.now());
    let spy = Spy {
        inner: sim.wire().port(),
        received: Rc::clone(&received),
        sent: Rc::clone(&sent),
    };
    let ours = Stack::new(spy, config(2, SERVER_IP), sim.now());
    sim.add(Box::new(client.clone()));
    sim.add(Box::new(ours.clone()));
    let memcached = accept_fn(server);
    ours.listen(
        SocketAddr::from((SERVER_IP, 11211)),
        Arc::new(move |conn: &TcpConnection| {
            Box::new(Noting(memcached(conn))) as Box<dyn TcpHandler>
        }),
    )
    .expect("listen");
    let replies = Rc::new(RefCell::new(Vec::new()));
    let conn = client
        .connect(
            SocketAddr::from((SERVER_IP, 11211)),
            Box::new(Client(Rc::clone(&replies))),
        )
        .expect("connect");
    sim.run_for(Duration::from_millis(10));
    let value: Vec<u8> = (0..value_len)
        .map(|i| (i * 31 % 251).to_le_bytes()[0])
        .collect();
    let mut set = format!("set k 0 0 {value_len}\r\n").into_bytes();
    set.extend_from_slice(&value);
    set.extend_from_slice(b"\r\n");
    WATCHED_ALLOCATIONS.store(0, Ordering::Relaxed);
    WATCHED_SIZE.store(value_len, Ordering::Relaxed);
    // Past the peer's window the stack buffers the rest (a large value).
    conn.send_or_buffer(IoChain::from(IoBuf::from_vec(set)))
        .expect("send the set");
    sim.run_for(Duration::from_millis(10 + value_len as u64 / 1000));
    WATCHED_SIZE.store(usize::MAX, Ordering::Relaxed);
    let set_allocations = WATCHED_ALLOCATIONS.load(Ordering::Relaxed);
    // Only the GET's frames matter for the send side.
    sent.borrow_mut().clear();
    conn.send(IoChain::from(IoBuf::from_static(b"get k\r\n")))
        .expect("send the get");
    sim.run_for(Duration::from_millis(10 + value_len as u64 / 1000));
    let stored = server
        .store
        .get(b"k", server.unix_now())
        .expect("the stored item");
    let seen_value = value.clone();
    let seen = Seen {
        replies: replies.borrow().clone(),
        value,
        received_frames: received.borrow().clone(),
        sent_frames: sent.borrow().clone(),
        delivered: DELIVERED.lock().unwrap().clone(),
        stored_value: range_of(&stored.value),
        stored_bytes_match: stored.value.as_slice() == seen_value.as_slice(),
        set_allocations,
    };
    seen
}

/// Runs `scenario(value_len)` in a one-core hosted node, alone.
fn run_scenario(value_len: usize) -> Seen {
    let _alone = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    DELIVERED.lock().unwrap().clear();
    let config = ebb_hosted::Config {
        cores: Some(1),
        pin: false,
        ..ebb_hosted::Config::default()
    };
    let seen: Arc<Mutex<Option<Seen>>> = Arc::default();
    let result = Arc::clone(&seen);
    let code = ebb_hosted::run(config, move || {
        *result.lock().unwrap() = Some(scenario(value_len));
        let _ = ebb_event::shutdown(0);
    })
    .expect("the node");
    assert_eq!(code, 0);
    let seen = seen.lock().unwrap().take();
    seen.expect("the scenario ran")
}

#[test]
fn requests_arrive_and_get_replies_leave_without_copies_by_the_stack() {
    let seen = run_scenario(VALUE_LEN);

    // The replies: STORED, then the value.
    let mut expected = b"STORED\r\nVALUE k 0 4000\r\n".to_vec();
    expected.extend_from_slice(&seen.value);
    expected.extend_from_slice(b"\r\nEND\r\n");
    assert!(seen.replies == expected, "memcached's replies");

    // Receive side: every buffer memcached was handed is a view into a
    // frame the device received.
    assert!(!seen.delivered.is_empty());
    for view in &seen.delivered {
        assert!(
            seen.received_frames
                .iter()
                .any(|&frame| within(*view, frame)),
            "a buffer handed to memcached is not a view of a received frame (copied)"
        );
    }

    // Send side: the value's bytes left in frames that chain views of the
    // stored value itself (no copy into a send buffer), all of them.
    let value_views: Vec<Range> = seen
        .sent_frames
        .iter()
        .flatten()
        .copied()
        .filter(|&segment| within(segment, seen.stored_value))
        .collect();
    let chained: usize = value_views.iter().map(|&(_, len)| len).sum();
    assert_eq!(
        chained, VALUE_LEN,
        "the GET reply's value should go out as views of the stored buffer: {value_views:?}"
    );
    assert!(
        value_views.len() >= 3,
        "4000 bytes cross segment boundaries"
    );
}

#[test]
fn a_large_value_is_stored_in_the_buffer_its_request_was_gathered_in() {
    let seen = run_scenario(LARGE_VALUE_LEN);
    let mut expected = format!("STORED\r\nVALUE k 0 {LARGE_VALUE_LEN}\r\n").into_bytes();
    expected.extend_from_slice(&seen.value);
    expected.extend_from_slice(b"\r\nEND\r\n");
    assert!(seen.replies == expected, "memcached's replies");
    assert!(seen.stored_bytes_match, "the stored value's bytes");
    let delivered = seen.delivered.len();
    // (The simulated link carries large frames: a few pieces.)
    assert!(
        delivered >= 3,
        "the value should arrive in several pieces: {delivered}"
    );
    // One buffer of the request's size, filled from the frames as they
    // arrive; the stored value is a view of it. A second would be the
    // value copied out of the request.
    assert_eq!(
        seen.set_allocations, 1,
        "allocations of about {LARGE_VALUE_LEN} bytes while the SET was handled"
    );
}
