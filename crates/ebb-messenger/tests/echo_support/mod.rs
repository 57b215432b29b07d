//! The receiving Ebb of the message-layer tests: echoes message 1
//! (recording where the payload's views point, to check for copies),
//! refuses message 2 with code 7, counts message 3.

#![allow(dead_code)]

use std::cell::{Cell, RefCell};

use ebb_messenger::{Message, MessageNumber, Request, Service, ServiceError};

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
