//! An in-memory connection pair implementing `ebb_net::TcpOps`, for the
//! message layer's tests: what one end sends is delivered to the other's
//! handler when the test pumps, in pieces of at most `segment` bytes (views
//! of the sent buffers, as a stack hands on what it received), within a
//! send window that the receiver's reading opens again. A test can stop an
//! end from reading, cut the connection, or close it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;

use ebb_core::CoreId;
use ebb_iobuf::IoChain;
use ebb_net::{NetError, SendError, TcpConnection, TcpHandler, TcpOps};

/// One end's state.
pub struct End {
    /// Bytes sent, not yet delivered.
    in_flight: RefCell<VecDeque<IoChain>>,
    in_flight_bytes: Cell<usize>,
    window: usize,
    want_credit: Cell<bool>,
    /// The application paused receiving.
    paused: Cell<bool>,
    /// This end sent its FIN.
    closed: Cell<bool>,
    /// The connection was reset.
    aborted: Cell<bool>,
    id: u64,
}

impl TcpOps for End {
    fn send(&self, data: IoChain) -> Result<(), SendError> {
        if self.closed.get() || self.aborted.get() {
            return Err(SendError {
                error: NetError::Closed,
                data,
            });
        }
        let credit = self.credit();
        if data.len() > credit {
            self.want_credit.set(true);
            return Err(SendError {
                error: NetError::NoCredit {
                    credit,
                    offered: data.len(),
                },
                data,
            });
        }
        self.in_flight_bytes
            .set(self.in_flight_bytes.get() + data.len());
        self.in_flight.borrow_mut().push_back(data);
        Ok(())
    }

    fn send_or_buffer(&self, _data: IoChain) -> Result<(), SendError> {
        unimplemented!("the Messenger manages its credit itself")
    }

    fn send_credit(&self) -> usize {
        let credit = self.credit();
        if credit == 0 {
            self.want_credit.set(true);
        }
        credit
    }

    fn pause_receive(&self) {
        self.paused.set(true);
    }

    fn resume_receive(&self) {
        self.paused.set(false);
    }

    fn close(&self) {
        self.closed.set(true);
    }

    fn abort(&self) {
        self.aborted.set(true);
    }

    fn peer_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 1))
    }

    fn local_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 2))
    }

    fn core(&self) -> CoreId {
        CoreId(0)
    }

    fn id(&self) -> u64 {
        self.id
    }
}

impl End {
    fn credit(&self) -> usize {
        if self.closed.get() || self.aborted.get() {
            return 0;
        }
        self.window.saturating_sub(self.in_flight_bytes.get())
    }
}

/// Both ends and their handlers.
pub struct Pipe {
    ends: [Rc<End>; 2],
    conns: [TcpConnection; 2],
    handlers: [Box<dyn TcpHandler>; 2],
    segment: usize,
    /// Ends whose application does not read (a stalled peer).
    stalled: [bool; 2],
    fin_delivered: [bool; 2],
    /// Every piece delivered, as (address, length).
    pub delivered: Vec<(usize, usize)>,
}

impl Pipe {
    /// A connection between two handlers, with a send window of `window`
    /// bytes each way, delivering pieces of at most `segment` bytes.
    pub fn new(
        a: Box<dyn TcpHandler>,
        b: Box<dyn TcpHandler>,
        window: usize,
        segment: usize,
    ) -> Pipe {
        let end = |id| {
            Rc::new(End {
                in_flight: RefCell::default(),
                in_flight_bytes: Cell::new(0),
                window,
                want_credit: Cell::new(false),
                paused: Cell::new(false),
                closed: Cell::new(false),
                aborted: Cell::new(false),
                id,
            })
        };
        let ends = [end(1), end(2)];
        let conns = [
            TcpConnection::new(ends[0].clone()),
            TcpConnection::new(ends[1].clone()),
        ];
        let mut pipe = Pipe {
            ends,
            conns,
            handlers: [a, b],
            segment,
            stalled: [false; 2],
            fin_delivered: [false; 2],
            delivered: Vec::new(),
        };
        for side in 0..2 {
            let conn = pipe.conns[side].clone();
            pipe.handlers[side].on_connected(&conn);
        }
        pipe
    }

    /// End `side`'s connection handle.
    pub fn conn(&self, side: usize) -> TcpConnection {
        self.conns[side].clone()
    }

    /// Stops (or restarts) end `side`'s application from reading.
    pub fn stall(&mut self, side: usize, stalled: bool) {
        self.stalled[side] = stalled;
    }

    /// Whether end `side`'s application paused receiving.
    pub fn paused(&self, side: usize) -> bool {
        self.ends[side].paused.get()
    }

    /// Whether end `side` closed or reset the connection.
    pub fn ended_by(&self, side: usize) -> (bool, bool) {
        (self.ends[side].closed.get(), self.ends[side].aborted.get())
    }

    /// Bytes sent by `side` and not yet delivered.
    pub fn in_flight(&self, side: usize) -> usize {
        self.ends[side].in_flight_bytes.get()
    }

    /// Resets the connection: both handlers hear `on_aborted`; nothing in
    /// flight arrives.
    pub fn cut(&mut self) {
        for side in 0..2 {
            self.ends[side].aborted.set(true);
            self.ends[side].in_flight.borrow_mut().clear();
            self.ends[side].in_flight_bytes.set(0);
            let conn = self.conns[side].clone();
            self.handlers[side].on_aborted(&conn, NetError::ConnectionReset);
        }
    }

    /// Delivers until nothing moves (bounded: `rounds` passes at most).
    /// Returns the number of pieces delivered.
    pub fn run(&mut self, rounds: usize) -> usize {
        let mut moved = 0;
        for _ in 0..rounds {
            let mut progress = false;
            for from in 0..2 {
                let to = 1 - from;
                if self.ends[to].aborted.get() {
                    continue;
                }
                if !self.stalled[to] && !self.ends[to].paused.get() {
                    let next = self.ends[from].in_flight.borrow_mut().pop_front();
                    if let Some(mut chain) = next {
                        let piece = chain.split_to(self.segment.min(chain.len())).unwrap();
                        if !chain.is_empty() {
                            self.ends[from].in_flight.borrow_mut().push_front(chain);
                        }
                        let sent = &self.ends[from];
                        sent.in_flight_bytes
                            .set(sent.in_flight_bytes.get() - piece.len());
                        for view in piece.segments() {
                            self.delivered.push((view.as_ptr() as usize, view.len()));
                        }
                        let conn = self.conns[to].clone();
                        self.handlers[to].on_data(&conn, piece);
                        moved += 1;
                        progress = true;
                        if sent.want_credit.get() && sent.credit() > 0 {
                            sent.want_credit.set(false);
                            let conn = self.conns[from].clone();
                            self.handlers[from].on_send_credit(&conn);
                        }
                    }
                }
                let drained = self.ends[from].in_flight.borrow().is_empty();
                if drained && self.ends[from].closed.get() && !self.fin_delivered[to] {
                    self.fin_delivered[to] = true;
                    let conn = self.conns[to].clone();
                    self.handlers[to].on_closed(&conn);
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        moved
    }
}
