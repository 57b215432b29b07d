//! The receiving Ebbs of the message-layer tests. [`Echo`] echoes message
//! 1 (recording where the payload's views point, to check for copies),
//! refuses message 2 with code 7, counts message 3. [`Where`] has a
//! representative per core, which answers with its core's number and
//! records where the request's payload lay ([`SEEN`]); message
//! [`WHERE_LATER`] gets the same answer deferred (after a yield).

#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::sync::Mutex;

use ebb_core::{CoreId, Ebb, EbbError, FaultContext};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Answer, Message, MessageNumber, Request, Service, ServiceError};

/// Answered with the request's own body.
pub const ECHO: MessageNumber = MessageNumber(1);
/// Refused with code 7.
pub const REFUSE: MessageNumber = MessageNumber(2);
/// Counted; answered with an empty body.
pub const NOTE: MessageNumber = MessageNumber(3);

/// See the module.
#[derive(Default)]
pub struct Echo {
    /// Every echoed payload view, as (address, length).
    pub views: RefCell<Vec<(usize, usize)>>,
    /// Messages 3 received.
    pub notes: Cell<usize>,
}

impl Service for Echo {
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        match request.message {
            ECHO => {
                self.views.borrow_mut().extend(
                    request
                        .body
                        .payload
                        .segments()
                        .map(|v| (v.as_ptr() as usize, v.len())),
                );
                Ok(request.body)
            }
            REFUSE => Err(ServiceError::Refused(7)),
            NOTE => {
                self.notes.set(self.notes.get() + 1);
                Ok(Message::default())
            }
            _ => Err(ServiceError::UnknownMessage),
        }
    }
}

/// [`Where`]'s message: answered with the core's number, 4 bytes
/// little-endian.
pub const WHERE: MessageNumber = MessageNumber(1);

/// [`WHERE`]'s answer, given later (`Answer::Later`).
pub const WHERE_LATER: MessageNumber = MessageNumber(2);

/// Where [`Where`]'s representatives saw request payloads: (core, segment
/// addresses).
pub static SEEN: Mutex<Vec<(usize, Vec<usize>)>> = Mutex::new(Vec::new());

/// See the module.
pub struct Where;

/// A core's representative of [`Where`].
pub struct WhereRep {
    core: CoreId,
}

impl Service for WhereRep {
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        let segments = request
            .body
            .payload
            .segments()
            .map(|s| s.as_ptr() as usize)
            .collect();
        SEEN.lock().unwrap().push((self.core.0, segments));
        let core = u32::try_from(self.core.0).unwrap().to_le_bytes();
        Ok(Message::payload(IoChain::from(IoBuf::from_vec(
            core.to_vec(),
        ))))
    }

    fn answer(&self, request: Request) -> Answer {
        let later = request.message == WHERE_LATER;
        let reply = self.handle(request);
        if !later {
            return Answer::Now(reply);
        }
        Answer::Later(Box::pin(async move {
            ebb_event::yield_now().await;
            reply
        }))
    }
}

impl Ebb for Where {
    type Rep = WhereRep;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static WhereRep, EbbError> {
        Ok(Box::leak(Box::new(WhereRep { core: ctx.core })))
    }
}
