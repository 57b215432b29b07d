//! One client connection: bytes in, requests handled in order, replies out.

use alloc::boxed::Box;
use alloc::rc::Rc;
use alloc::sync::Arc;
use core::cell::RefCell;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ebb_core::{EbbError, Multicore};
use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{AcceptFn, TcpConnection, TcpHandler};

use crate::cluster::binary_forward::execute_binary;
use crate::cluster::binary_route::{route_binary, BinaryForwarded, BinaryRoute};
use crate::cluster::deferred::{Callback, Deferred};
use crate::cluster::route::{route_text, Forwarded, Route};
use crate::cluster::text_forward::{execute, ClusterLink};
use crate::protocol::{Context, Outcome, Protocol};
use crate::stats::{Baseline, Counters, Stats};
use crate::watch::{Site, Watcher, WATCHERS};
use crate::{Settings, Store};

/// Held input (always copies, see `Connection::hold_rest`) is merged into
/// one buffer past this many segments, so that a client sending a request
/// a byte at a time does not make the parser walk thousands of segments.
const MAX_HELD_SEGMENTS: usize = 64;

/// Replies are handed to the platform in batches of about this many bytes;
/// between batches the connection checks its send credit and stops reading
/// requests once it has none (see `Connection::send_batch`).
const OUTPUT_BATCH: usize = 256 * 1024;

/// What every connection of the server shares.
pub struct Server {
    /// The items.
    pub store: Store,
    /// Settings.
    pub settings: Settings,
    /// Counters.
    pub stats: Stats,
    /// Unix time at `started_mono`.
    pub started: u32,
    /// Monotonic time the server started.
    pub started_mono: Instant,
    /// Connections now.
    pub connections: AtomicU64,
    /// Set once the node joined a cache of several nodes (`cluster/`):
    /// its connections then forward requests for other nodes' keys.
    /// Never set on a single node, whose request path does not change.
    pub cluster: spin::Once<ClusterLink>,
    /// The most input bytes one connection has held at once (copied out
    /// of the receive buffers, `Connection::hold_rest`): what tests check
    /// that a client that pipelines without reading cannot grow.
    pub held_input_peak: AtomicUsize,
}

impl Server {
    /// A server with `settings` and a store of its own, started now, at
    /// Unix time `started` (leaked: it serves as long as its node lives).
    ///
    /// # Errors
    ///
    /// Its counters could not be created (not on a core).
    pub fn start(settings: Settings, started: u32) -> Result<&'static Server, EbbError> {
        let stats = Multicore::<Counters>::create(Baseline::default())?;
        Ok(Box::leak(Box::new(Server {
            store: Store::from_settings(&settings),
            settings,
            stats,
            started,
            started_mono: ebb_event::now(),
            connections: AtomicU64::new(0),
            cluster: spin::Once::new(),
            held_input_peak: AtomicUsize::new(0),
        })))
    }

    /// Unix time now.
    pub fn unix_now(&self) -> u32 {
        let elapsed = ebb_event::now() - self.started_mono;
        self.started
            .saturating_add(u32::try_from(elapsed.as_secs()).unwrap_or(u32::MAX))
    }
}

/// One connection's state.
pub struct Connection {
    server: &'static Server,
    protocol: Option<Protocol>,
    input: IoChain,
    /// Bytes at the front of `input` that are the connection's own copies
    /// (the rest are views of the platform's receive buffers).
    held: usize,
    /// Bytes still to throw away as they arrive (see `Outcome::Discard`).
    discarding: usize,
    /// How long the unfinished request at the front of `input` is, when
    /// its handler knows (`Context::expected`); 0 otherwise.
    expected: usize,
    /// Bytes of the store's memory limit held for the unfinished request's
    /// value (`Context::reserved`).
    reserved: usize,
    /// Whether `reserved` is for a value on its way to another node
    /// (`Context::reserved_in_transit`).
    reserved_in_transit: bool,
    /// The capacity of the buffer at the front of `input` that the
    /// request of `expected` bytes is being gathered into; 0 if none.
    gathering: usize,
    closing: bool,
    paused: bool,
    /// Set once the connection watches (`watch`): it reads no more
    /// requests and receives log lines until it closes.
    watcher: Option<Arc<Watcher>>,
    /// A request for another node's key, taken out of the input and not
    /// yet handed to a task (`cluster::route`; never on a single node).
    pending: Option<Pending>,
    /// A forwarded request is on its way: the requests after it wait.
    forwarding: bool,
    /// Bytes of the store's memory limit held for the value of the
    /// forwarded store taken or on its way, until its owner answered
    /// (`cluster::route::Arriving`).
    forward_reserved: usize,
    /// Whether `forward_reserved` was made in transit (it was, unless the
    /// request was taken for a local one first and the map changed).
    forward_in_transit: bool,
}

impl Connection {
    /// A connection of `server`.
    pub fn new(server: &'static Server) -> Self {
        Connection {
            server,
            protocol: None,
            input: IoChain::new(),
            held: 0,
            discarding: 0,
            expected: 0,
            reserved: 0,
            reserved_in_transit: false,
            gathering: 0,
            closing: false,
            paused: false,
            watcher: None,
            pending: None,
            forwarding: false,
            forward_reserved: 0,
            forward_in_transit: false,
        }
    }

    fn counters(&self) -> Option<&'static Counters> {
        self.server.stats.get().ok()
    }

    /// Handles every complete request in the input and sends the replies,
    /// until the input runs out or the client stops reading its replies.
    fn process(&mut self, conn: &TcpConnection) {
        let Some(counters) = self.counters() else {
            conn.abort();
            return;
        };
        let mut out = IoChain::new();
        let mut ctx = Context {
            store: &self.server.store,
            settings: &self.server.settings,
            counters,
            stats: self.server.stats,
            now: self.server.unix_now(),
            started: self.server.started,
            connections: self.server.connections.load(Ordering::Relaxed),
            site: Site {
                started: self.server.started,
                started_mono: self.server.started_mono,
                client: conn.id(),
            },
            watch: None,
            expected: 0,
            reserved: self.reserved,
            reserved_in_transit: self.reserved_in_transit,
            gathered: self.finish_gathering(),
        };
        let arrived = self.input.len();
        loop {
            ctx.expected = 0;
            self.discard_arrived();
            if self.input.is_empty()
                || self.closing
                || self.paused
                || self.watcher.is_some()
                || self.forwarding
                || self.pending.is_some()
            {
                break;
            }
            let protocol = *self.protocol.get_or_insert_with(|| {
                Protocol::detect(self.input.cursor().peek_u8().unwrap_or(0))
            });
            if let Some(link) = self.server.cluster.get() {
                if protocol == Protocol::Binary {
                    let route = link.current.view(|view| {
                        let size_max = self.server.settings.item_size_max;
                        route_binary(&self.input, view, &self.server.store, size_max)
                    });
                    let route = match route {
                        BinaryRoute::Incomplete(arriving) => {
                            if ctx.reserve_in_transit(arriving.block) {
                                break;
                            }
                            // The values on their way fill -m.
                            BinaryRoute::Forward(arriving.refused)
                        }
                        BinaryRoute::Forward(forwarded) => {
                            let value_len = forwarded.op.value_len();
                            match self.reserve_value_len(&mut ctx, value_len) {
                                true => BinaryRoute::Forward(forwarded),
                                false => BinaryRoute::Forward(forwarded.out_of_memory(0)),
                            }
                        }
                        BinaryRoute::Local => BinaryRoute::Local,
                    };
                    match route {
                        BinaryRoute::Local | BinaryRoute::Incomplete(_) => {}
                        BinaryRoute::Forward(forwarded) => {
                            if self.input.trim_front(forwarded.consumed).is_err() {
                                self.input.clear();
                            }
                            self.discarding = forwarded.op.discard();
                            self.discard_arrived();
                            self.pending = Some(Pending::Binary(forwarded));
                            break;
                        }
                    }
                }
                let route = if protocol == Protocol::Binary {
                    Route::Local
                } else {
                    link.current.view(|view| {
                        let size_max = self.server.settings.item_size_max;
                        route_text(&self.input, view, size_max)
                    })
                };
                let route = match route {
                    Route::Incomplete(arriving) => {
                        if ctx.reserve_in_transit(arriving.block) {
                            break;
                        }
                        // The values on their way fill -m.
                        Route::Forward(arriving.refused)
                    }
                    Route::Forward(forwarded) => {
                        Route::Forward(self.reserve_forwarded(&mut ctx, forwarded))
                    }
                    route => route,
                };
                match route {
                    Route::Local | Route::Incomplete(_) => {}
                    Route::Forward(forwarded) => {
                        if self.input.trim_front(forwarded.consumed).is_err() {
                            self.input.clear();
                        }
                        self.discarding = forwarded.op.discard();
                        self.discard_arrived();
                        self.pending = Some(Pending::Text(forwarded));
                        break;
                    }
                    Route::Refuse { consumed, line } => {
                        if self.input.trim_front(consumed).is_err() {
                            self.input.clear();
                        }
                        out.push_back(IoBuf::from_static(line));
                        continue;
                    }
                }
            }
            let outcome = protocol.handle(&self.input, &mut ctx, &mut out);
            if outcome != Outcome::Incomplete {
                // Whatever ended the request, its value no longer arrives.
                ctx.release_value();
            }
            // Kept current, so that whatever way this call ends (a failed
            // send returns early) `Drop` releases only what is held.
            self.reserved = ctx.reserved;
            self.reserved_in_transit = ctx.reserved_in_transit;
            // Only the first request can be the gathered one.
            ctx.gathered = 0;
            match outcome {
                Outcome::Consumed(consumed) => {
                    if self.input.trim_front(consumed).is_err() {
                        self.input.clear();
                    }
                    if let Some(streams) = ctx.watch.take() {
                        self.start_watching(conn, streams, &mut out);
                    }
                }
                Outcome::Incomplete => break,
                Outcome::Close => self.closing = true,
                Outcome::Discard { consumed, discard } => {
                    if self.input.trim_front(consumed).is_err() {
                        self.input.clear();
                    }
                    self.discarding = discard;
                }
            }
            if out.len() >= OUTPUT_BATCH && !self.send_batch(conn, &mut out, counters) {
                return;
            }
        }
        let consumed = arrived - self.input.len();
        self.held = self.held.saturating_sub(consumed);
        self.expected = ctx.expected;
        self.reserved = ctx.reserved;
        self.reserved_in_transit = ctx.reserved_in_transit;
        self.hold_rest();
        // Read first: the shared line is written only by a new peak.
        if self.held > self.server.held_input_peak.load(Ordering::Relaxed) {
            self.server
                .held_input_peak
                .fetch_max(self.held, Ordering::Relaxed);
        }
        if !self.send_batch(conn, &mut out, counters) {
            return;
        }
        if self.closing {
            conn.close();
        }
    }

    /// Makes this connection a watcher of `streams` (memcached answers
    /// `OK`, or refuses past its watcher limit); a watcher ignores what
    /// its client sends from then on, as 1.6.18's watchers do.
    fn start_watching(&mut self, conn: &TcpConnection, streams: u8, out: &mut IoChain) {
        match WATCHERS.start(conn, streams) {
            Some(watcher) => {
                self.watcher = Some(watcher);
                self.input.clear();
                self.held = 0;
                out.push_back(IoBuf::from_static(b"OK\r\n"));
            }
            None => out.push_back(IoBuf::from_static(
                b"WATCHER_TOO_MANY log watcher limit reached\r\n",
            )),
        }
    }

    /// Hands `out` to the platform; once the send credit is gone, stops
    /// reading from the client until it reads its replies
    /// (`on_send_credit`), so that a client that pipelines without reading
    /// makes the server buffer at most the send buffer and one batch
    /// (issue 15, defect 4). False if the connection failed.
    fn send_batch(&mut self, conn: &TcpConnection, out: &mut IoChain, counters: &Counters) -> bool {
        if !out.is_empty() {
            let batch = core::mem::take(out);
            Counters::add(&counters.bytes_written, batch.len() as u64);
            if conn.send_or_buffer(batch).is_err() {
                conn.abort();
                return false;
            }
        }
        if !self.closing && !self.paused && conn.send_credit() == 0 {
            self.paused = true;
            conn.pause_receive();
        }
        true
    }

    /// Copies the input not yet handled (an unfinished request, or requests
    /// waiting while paused) out of the platform's receive buffers into the
    /// connection's own memory, so that a slow client never keeps receive
    /// buffers the core needs to read other clients' requests (issue 15,
    /// defect 3). What one connection holds is bounded by its largest
    /// request (`-I` plus the request line) or, while paused, by what
    /// arrived before receiving stopped.
    fn hold_rest(&mut self) {
        self.gathering = 0;
        if self.expected > self.input.len() {
            // The request's length is known (a value on its way): one
            // buffer of that size, allocated once, each segment copied into
            // it once as it arrives (issue 15, defect 10: a 1 MB set
            // gathered in 32 KiB copies and merged took milliseconds).
            self.gathering = self.input.gather(self.expected);
            if self.input.is_contiguous() {
                self.held = self.input.len();
                return;
            }
            self.gathering = 0;
            // No memory for the whole value at once: the chain still holds
            // receive buffers, which must not stay held (they are the
            // core's, defect 3), so they are copied out piece by piece.
        }
        if self.held < self.input.len() {
            let Ok(arrived) = self.input.split_off(self.held) else {
                self.input.clear();
                self.held = 0;
                return;
            };
            match arrived.try_to_iobuf() {
                Ok(copy) => self.input.push_back(copy),
                // No memory for the copy: keeping the receive buffers
                // starves other connections a while, aborting loses every
                // item.
                Err(_) => self.input.append(&mut { arrived }),
            }
        }
        if self.input.segment_count() > MAX_HELD_SEGMENTS {
            // In place where it can: copying the whole request each time
            // made a 1 MB set cost milliseconds (issue 15, defect 10).
            self.input.coalesce();
        }
        self.held = self.input.len();
    }
}

impl Connection {
    /// Holds the value of `forwarded` (a store's, all arrived) in the
    /// memory limit until its owner answered: the reservation made while
    /// it arrived, or one made now; refused as out of memory when the
    /// values on their way fill -m (`cluster::route::Arriving`).
    fn reserve_forwarded(&mut self, ctx: &mut Context<'_>, forwarded: Forwarded) -> Forwarded {
        let value_len = forwarded.op.value_len();
        if self.reserve_value_len(ctx, value_len) {
            forwarded
        } else {
            forwarded.out_of_memory(0)
        }
    }

    /// Holds `value_len` bytes of a forwarded value (text or binary) in
    /// the memory limit until its owner answered, as
    /// [`Connection::reserve_forwarded`] says; false when they cannot be.
    fn reserve_value_len(&mut self, ctx: &mut Context<'_>, value_len: usize) -> bool {
        if ctx.reserved == 0 && value_len > 0 && !ctx.reserve_in_transit(value_len) {
            return false;
        }
        // Moved from the arriving request to the forwarded one, whatever
        // its length (an empty value's CRLF was reserved while it
        // arrived), so that the next request reserves its own.
        self.forward_reserved = core::mem::take(&mut ctx.reserved);
        self.forward_in_transit = core::mem::take(&mut ctx.reserved_in_transit);
        true
    }

    /// Gives back what the forwarded store's value held, as it was held.
    fn release_forwarded(&mut self) {
        let bytes = core::mem::take(&mut self.forward_reserved);
        if core::mem::take(&mut self.forward_in_transit) {
            self.server.store.release_in_transit(bytes);
        } else if bytes > 0 {
            self.server.store.release(bytes);
        }
    }

    /// Sends the reply of the forwarded request and goes on with the
    /// requests that waited for it.
    fn forward_done(&mut self, conn: &TcpConnection, reply: IoChain) {
        self.forwarding = false;
        // Its value is no longer held.
        self.release_forwarded();
        if !reply.is_empty() {
            if let Some(counters) = self.counters() {
                Counters::add(&counters.bytes_written, reply.len() as u64);
            }
            if conn.send_or_buffer(reply).is_err() {
                conn.abort();
                return;
            }
        }
        self.process(conn);
        self.resume_if_idle(conn);
    }

    /// Resumes receiving unless the connection has what it needs to go on
    /// without: a forwarded request on its way or taken out of the input
    /// (the next complete request held already), replies the client has
    /// not read (`paused`), or an end. Called only after the held input
    /// was processed: receiving resumed and stopped again within one
    /// event still takes in what the platform's receive had read by then
    /// (a multishot receive's completions in flight), and doing that once
    /// per forwarded request let a pipelining client's input pile up
    /// (review 17b, finding 4).
    fn resume_if_idle(&mut self, conn: &TcpConnection) {
        let busy = self.forwarding || self.pending.is_some();
        if !busy && !self.paused && !self.closing && self.watcher.is_none() {
            conn.resume_receive();
        }
    }

    /// Ends this connection's watching, if it watches.
    fn stop_watching(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            WATCHERS.stop(&watcher);
        }
    }

    /// Once the request being gathered (`gathering`) has all arrived,
    /// copies its last bytes into its buffer too, so that its handler finds
    /// it in that one buffer and can keep the value as a view of it
    /// (`Context::copy_value`). Returns the buffer's capacity for
    /// `Context::gathered`, 0 if the request is not complete or there is
    /// none.
    fn finish_gathering(&mut self) -> usize {
        let request = self.expected;
        if self.gathering == 0 || self.input.len() < request {
            return 0;
        }
        self.gathering = 0;
        // Bytes past the request (the next requests) stay where they are.
        let Ok(mut rest) = self.input.split_off(request) else {
            return 0;
        };
        let capacity = self.input.gather(request);
        self.input.append(&mut rest);
        if capacity == 0 {
            return 0;
        }
        self.held = self.held.max(request);
        capacity
    }

    /// Throws away what has arrived of the bytes being discarded.
    fn discard_arrived(&mut self) {
        let now = self.discarding.min(self.input.len());
        if now > 0 {
            if self.input.trim_front(now).is_err() {
                self.input.clear();
            }
            self.discarding -= now;
        }
    }
}

impl TcpHandler for Connection {
    fn on_data(&mut self, conn: &TcpConnection, mut data: IoChain) {
        if let Some(counters) = self.counters() {
            Counters::add(&counters.bytes_read, data.len() as u64);
        }
        if self.watcher.is_some() {
            return;
        }
        self.input.append(&mut data);
        self.process(conn);
    }

    fn on_send_credit(&mut self, conn: &TcpConnection) {
        if self.paused {
            self.paused = false;
            self.process(conn);
            // While a forwarded request is on its way, receiving stays
            // stopped: the requests behind it wait in the input, which
            // would otherwise grow with all the client sends; the
            // forward's completion resumes (`forward_done`).
            self.resume_if_idle(conn);
        }
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        self.stop_watching();
        conn.close();
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, _error: ebb_net::NetError) {
        self.stop_watching();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop_watching();
        // A value that never finished arriving.
        if self.reserved > 0 {
            if self.reserved_in_transit {
                self.server.store.release_in_transit(self.reserved);
            } else {
                self.server.store.release(self.reserved);
            }
        }
        // A forwarded value whose owner never answered here.
        self.release_forwarded();
        self.server.connections.fetch_sub(1, Ordering::Relaxed);
        if let Some(counters) = self.counters() {
            Counters::add(&counters.curr_connections, u64::MAX);
        }
    }
}

/// Refuses a connection over `-c`, as memcached does.
struct Refused;

impl TcpHandler for Refused {
    fn on_data(&mut self, _: &TcpConnection, _: IoChain) {}
}

/// The accept function of a server: a [`Connection`] per client, or a
/// refusal past `-c` connections.
pub fn accept_fn(server: &'static Server) -> AcceptFn {
    Arc::new(move |conn: &TcpConnection| {
        let connections = server.connections.fetch_add(1, Ordering::Relaxed) + 1;
        let counters = server.stats.get().ok();
        if connections > server.settings.max_connections as u64 {
            server.connections.fetch_sub(1, Ordering::Relaxed);
            if let Some(counters) = counters {
                Counters::add(&counters.rejected_connections, 1);
            }
            let _ = conn.send_or_buffer(IoChain::from(IoBuf::from_static(
                b"ERROR Too many open connections\r\n",
            )));
            conn.close();
            return Box::new(Refused) as Box<dyn TcpHandler>;
        }
        if let Some(counters) = counters {
            Counters::add(&counters.curr_connections, 1);
            Counters::add(&counters.total_connections, 1);
        }
        if server.cluster.get().is_some() {
            let shared = Rc::new(RefCell::new(Connection::new(server)));
            let deferred = Rc::new(Deferred::default());
            return Box::new(ClusterConnection(shared, deferred)) as Box<dyn TcpHandler>;
        }
        Box::new(Connection::new(server)) as Box<dyn TcpHandler>
    })
}

/// A request a connection took out of its input to forward, in the
/// protocol it came in.
enum Pending {
    /// Text (`cluster::route`).
    Text(Forwarded),
    /// Binary (`cluster::binary_route`).
    Binary(BinaryForwarded),
}

/// A connection of a node in a cache of several nodes: the connection
/// itself, shared with the task that carries out a forwarded request and
/// then goes on with the requests that waited, and the callbacks that
/// came while the task held it (`cluster::deferred`: our network stack
/// runs them from inside the task's calls on the connection).
struct ClusterConnection(Rc<RefCell<Connection>>, Rc<Deferred>);

/// The next forwarded request the connection took, if any, once the
/// callbacks deferred so far are applied; receiving pauses until it is
/// done. None while the connection is held (its holder takes it).
fn take_forwarded(
    connection: &RefCell<Connection>,
    deferred: &Deferred,
    conn: &TcpConnection,
) -> Option<Pending> {
    if !deferred.apply_to(connection, conn) {
        return None;
    }
    let mut connection = connection.try_borrow_mut().ok()?;
    let pending = connection.pending.take();
    if pending.is_some() {
        connection.forwarding = true;
        conn.pause_receive();
    }
    pending
}

impl ClusterConnection {
    /// Applies `callback` to the connection now, after those deferred
    /// before it, or later if the connection is held.
    fn deliver(&self, conn: &TcpConnection, callback: Callback) {
        self.1.push(callback);
        self.1.apply_to(&self.0, conn);
    }

    /// Hands a forwarded request the connection took to a task.
    fn start_forwarding(&self, conn: &TcpConnection) {
        let Some(first) = take_forwarded(&self.0, &self.1, conn) else {
            return;
        };
        let connection = Rc::clone(&self.0);
        let deferred = Rc::clone(&self.1);
        let conn = conn.clone();
        ebb_event::spawn_task(async move {
            let mut next = Some(first);
            while let Some(request) = next {
                let server = connection.borrow().server;
                let reply = match (server.cluster.get(), request) {
                    (Some(link), Pending::Text(request)) => execute(link, server, request).await,
                    (Some(link), Pending::Binary(request)) => {
                        execute_binary(link, server, request).await
                    }
                    (None, _) => IoChain::new(),
                };
                connection.borrow_mut().forward_done(&conn, reply);
                next = take_forwarded(&connection, &deferred, &conn);
            }
        });
    }
}

impl TcpHandler for ClusterConnection {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        self.deliver(conn, Callback::Data(data));
        self.start_forwarding(conn);
    }

    fn on_send_credit(&mut self, conn: &TcpConnection) {
        self.deliver(conn, Callback::SendCredit);
        self.start_forwarding(conn);
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        self.deliver(conn, Callback::Closed);
    }

    fn on_aborted(&mut self, conn: &TcpConnection, error: ebb_net::NetError) {
        self.deliver(conn, Callback::Aborted(error));
    }
}
