//! Watches: the changes under a prefix, one at a time.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::MapError;

/// One change to a watched key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The key, relative to the application (as given to the map).
    pub key: String,
    /// Its new value; `None`: deleted (by `delete`, a revoked or an
    /// expired lease).
    pub value: Option<Vec<u8>>,
}

/// What an implementation gives [`Watch`]: the next change, when there is
/// one.
pub trait WatchStream: Send {
    /// The next change, or why the watch ended (after which it keeps
    /// returning that error).
    fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Result<Change, MapError>>;
}

/// The changes to the keys under a prefix, in the order the store made
/// them. Dropping it ends the watch.
pub struct Watch {
    stream: Box<dyn WatchStream>,
}

impl Watch {
    /// A watch reading from `stream`.
    #[must_use]
    pub fn new(stream: Box<dyn WatchStream>) -> Watch {
        Watch { stream }
    }

    /// The next change.
    ///
    /// # Errors
    ///
    /// The watch ended ([`MapError::WatchEnded`]) or the store became
    /// unreachable ([`MapError::Unreachable`]).
    pub fn changed(&mut self) -> NextChange<'_> {
        NextChange { watch: self }
    }

    /// The next change if there is one already, without waiting.
    pub fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Result<Change, MapError>> {
        self.stream.poll_change(cx)
    }
}

impl core::fmt::Debug for Watch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Watch")
    }
}

/// The future of [`Watch::changed`].
pub struct NextChange<'a> {
    watch: &'a mut Watch,
}

impl Future for NextChange<'_> {
    type Output = Result<Change, MapError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().watch.stream.poll_change(cx)
    }
}
