//! Framing: a byte stream, as TCP delivers it (segments split anywhere),
//! in; whole messages out; and the reverse for sending.
//!
//! **Zero copy.** A received message's control and payload are chains of
//! views into the very buffers the stream arrived in (`Cursor::read_chain`);
//! only the 40-byte header is assembled on the stack, and only when a
//! segment boundary splits it. A sent message is one small buffer (header
//! and control) followed by the payload's own segments.
//!
//! **Invariant.** Lengths are checked against the limits as soon as a
//! header is complete, so the [`Deframer`] never buffers more than one
//! header plus one message of at most the limits, plus what the transport
//! delivered past it. After a [`WireError`] the stream has no framing left:
//! the same error is returned from then on, and the connection must close.

use ebb_iobuf::{IoBufMut, IoChain};

use ebb_core::NodeId;

use crate::header::RawHeader;
use crate::{Header, Hello, Kind, Limits, MessageNumber, WireError, HEADER_LEN};

/// One received message.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Its header.
    pub header: Header,
    /// Its control bytes (views into the receive buffers).
    pub control: IoChain,
    /// Its payload (views into the receive buffers).
    pub payload: IoChain,
}

/// Cuts a byte stream into [`Frame`]s.
#[derive(Debug)]
pub struct Deframer {
    limits: Limits,
    buffered: IoChain,
    /// The header of the message whose body is still arriving.
    pending: Option<Header>,
    failed: Option<WireError>,
}

impl Deframer {
    /// A deframer refusing messages over `limits`.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Deframer {
            limits,
            buffered: IoChain::new(),
            pending: None,
            failed: None,
        }
    }

    /// Appends bytes received (no copy: the segments are kept).
    pub fn push(&mut self, mut data: IoChain) {
        self.buffered.append(&mut data);
    }

    /// Bytes received and not yet returned as frames.
    #[must_use]
    pub fn buffered(&self) -> usize {
        self.buffered.len()
    }

    /// The next whole message, `Ok(None)` if more bytes are needed.
    ///
    /// # Errors
    ///
    /// The [`WireError`] of the first invalid header, every time from then
    /// on.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, WireError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let header = match self.pending.take() {
            Some(header) => header,
            // The call after the last whole frame: nothing to look at.
            None if self.buffered.len() < HEADER_LEN => return Ok(None),
            None => {
                let Ok(raw) = self.buffered.cursor().peek_header::<RawHeader>() else {
                    return Ok(None);
                };
                let header = Header::decode(&raw.0, &self.limits).inspect_err(|&error| {
                    self.failed = Some(error);
                })?;
                self.trim(HEADER_LEN)?;
                header
            }
        };
        let control_len = widen(header.control_len);
        let body_len = control_len + widen(header.payload_len);
        if self.buffered.len() < body_len {
            self.pending = Some(header);
            return Ok(None);
        }
        // The body's segments move out of the buffer as they are (the
        // whole buffer when it ends with this message, the usual case);
        // only a segment straddling a boundary becomes two views.
        let mut payload = if self.buffered.len() == body_len {
            core::mem::take(&mut self.buffered)
        } else {
            split_chain(&mut self.buffered, body_len)?
        };
        let control = if control_len == 0 {
            IoChain::new()
        } else {
            split_chain(&mut payload, control_len)?
        };
        Ok(Some(Frame {
            header,
            control,
            payload,
        }))
    }

    fn trim(&mut self, n: usize) -> Result<(), WireError> {
        self.buffered
            .trim_front(n)
            .map_err(|_| WireError::Truncated {
                needed: n,
                available: self.buffered.len(),
            })
    }
}

/// The first `n` bytes of `chain`, taken out of it (cannot fail: callers
/// checked the length).
fn split_chain(chain: &mut IoChain, n: usize) -> Result<IoChain, WireError> {
    let available = chain.len();
    chain.split_to(n).map_err(|_| WireError::Truncated {
        needed: n,
        available,
    })
}

/// A wire length as a `usize` (lossless where `usize` has 32 bits or more,
/// which are the only targets Ebbflow builds for).
fn widen(len: u32) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}

/// The message as one chain: a fresh buffer with the header and the control
/// bytes, then the payload's segments unchanged (never copied). The header's
/// lengths are set from `control` and `payload`.
///
/// # Errors
///
/// [`WireError::ControlTooLong`] or [`WireError::PayloadTooLong`] if a part
/// is over `limits` (nothing is built).
pub fn encode_message(
    header: Header,
    control: &[u8],
    payload: IoChain,
    limits: &Limits,
) -> Result<IoChain, WireError> {
    encode_with(header, control.len(), payload, limits, |out| {
        out.copy_from_slice(control);
    })
}

/// As [`encode_message`], with the control part still a chain (a
/// [`crate::Message`]'s): it is copied once, straight into the header's
/// buffer, and an empty one costs nothing.
pub(crate) fn encode_chain(
    header: Header,
    control: &IoChain,
    payload: IoChain,
    limits: &Limits,
) -> Result<IoChain, WireError> {
    encode_with(header, control.len(), payload, limits, |out| {
        // Cannot fail: `out` is exactly `control.len()` bytes.
        let _ = control.copy_to_slice(out);
    })
}

/// Checks the lengths, then builds one buffer of the header and
/// `control_len` bytes that `write_control` fills, put in front of the
/// payload's own chain (no new chain, no move of its segments).
fn encode_with(
    header: Header,
    control_len: usize,
    mut payload: IoChain,
    limits: &Limits,
    write_control: impl FnOnce(&mut [u8]),
) -> Result<IoChain, WireError> {
    let wire_control_len = u32::try_from(control_len).unwrap_or(u32::MAX);
    if wire_control_len > limits.max_control_len {
        return Err(WireError::ControlTooLong {
            len: wire_control_len,
            limit: limits.max_control_len,
        });
    }
    let payload_len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    if payload_len > limits.max_payload_len {
        return Err(WireError::PayloadTooLong {
            len: payload_len,
            limit: limits.max_payload_len,
        });
    }
    let header = Header {
        control_len: wire_control_len,
        payload_len,
        ..header
    };
    let mut head = IoBufMut::with_capacity(HEADER_LEN + control_len);
    head.extend_from_slice(&header.encode());
    if control_len > 0 {
        write_control(head.extend_zeroed(control_len));
    }
    payload.push_front(head.freeze());
    Ok(payload)
}

/// The hello a node sends first: its id as the source, its limits, and
/// `version` in the header (always [`crate::VERSION`], except in tests of
/// a version mismatch).
#[must_use]
pub fn hello_message(source: NodeId, limits: Limits, version: u16) -> IoChain {
    let header = Header {
        kind: Kind::Hello,
        destination: 0,
        message: MessageNumber(0),
        source,
        correlation: 0,
        control_len: u32::try_from(Hello::LEN).unwrap_or(u32::MAX),
        payload_len: 0,
        core: None,
    };
    let mut bytes = IoBufMut::with_capacity(HEADER_LEN + Hello::LEN);
    bytes.extend_from_slice(&header.encode_as(version));
    bytes.extend_from_slice(&Hello { limits }.encode());
    IoChain::from(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_iobuf::IoBuf;

    fn header(kind: Kind, correlation: u64) -> Header {
        Header {
            kind,
            destination: 300,
            message: MessageNumber(1),
            source: NodeId(1),
            correlation,
            control_len: 0,
            payload_len: 0,
            core: None,
        }
    }

    #[test]
    fn two_messages_in_one_segment_come_out_in_order() {
        let mut stream = encode_message(
            header(Kind::Call, 1),
            b"ctl",
            IoChain::from(IoBuf::copy_from_slice(b"first")),
            &Limits::DEFAULT,
        )
        .unwrap();
        let mut second = encode_message(
            header(Kind::OneWay, 0),
            b"",
            IoChain::new(),
            &Limits::DEFAULT,
        )
        .unwrap();
        stream.append(&mut second);
        stream.coalesce();
        let mut deframer = Deframer::new(Limits::DEFAULT);
        deframer.push(stream);
        let first = deframer.next_frame().unwrap().unwrap();
        assert_eq!(first.header.correlation, 1);
        assert_eq!(first.control, *b"ctl".as_slice());
        assert_eq!(first.payload, *b"first".as_slice());
        let second = deframer.next_frame().unwrap().unwrap();
        assert_eq!(second.header.kind, Kind::OneWay);
        assert!(second.payload.is_empty());
        assert!(deframer.next_frame().unwrap().is_none());
        assert_eq!(deframer.buffered(), 0);
    }

    #[test]
    fn an_error_sticks() {
        let mut deframer = Deframer::new(Limits::DEFAULT);
        deframer.push(IoChain::from(IoBuf::copy_from_slice(&[0u8; 40])));
        let error = WireError::BadMagic { found: [0; 4] };
        assert_eq!(deframer.next_frame().unwrap_err(), error);
        let good = encode_message(
            header(Kind::OneWay, 0),
            b"",
            IoChain::new(),
            &Limits::DEFAULT,
        )
        .unwrap();
        deframer.push(good);
        assert_eq!(deframer.next_frame().unwrap_err(), error);
    }

    #[test]
    fn oversized_parts_are_refused_before_building() {
        let limits = Limits {
            max_control_len: 2,
            max_payload_len: 4,
        };
        let payload = IoChain::from(IoBuf::copy_from_slice(b"12345"));
        assert_eq!(
            encode_message(header(Kind::Call, 1), b"abc", IoChain::new(), &limits).unwrap_err(),
            WireError::ControlTooLong { len: 3, limit: 2 }
        );
        assert_eq!(
            encode_message(header(Kind::Call, 1), b"", payload, &limits).unwrap_err(),
            WireError::PayloadTooLong { len: 5, limit: 4 }
        );
    }
}
