//! Watches: an etcd watch stream forwarded, change by change, to a
//! [`Watch`] that any executor can poll.

use std::task::{Context, Poll};

use ebb_core::{Change, MapError, Watch, WatchStream, WATCH_QUEUE_LIMIT};
use etcd_client::{EventType, Watcher};
use tokio::sync::mpsc;

use crate::classify::{map_error, Effect};
use crate::prefix::AppPrefix;

/// Starts a task on the current (the map's) tokio runtime that reads
/// `stream` and hands each change under `prefix` to the returned
/// [`Watch`] of map prefix `watched`; the task cancels the etcd watch when
/// the `Watch` is dropped.
///
/// Changes wait in a [`ChangeQueue`] until read: at most
/// [`WATCH_QUEUE_LIMIT`] of them, as in the in-process map; one more ends
/// the watch (and cancels the etcd watch) with [`MapError::WatchEnded`]
/// after the ones it holds, so a watch nobody reads cannot grow without
/// bound, and no change is silently lost.
pub fn forward_watch(
    mut watcher: Watcher,
    mut stream: etcd_client::WatchStream,
    prefix: AppPrefix,
    watched: String,
    endpoint: String,
) -> Watch {
    let (changes, receiver) = ChangeQueue::new(watched);
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                () = changes.closed() => {
                    let _ = watcher.cancel().await;
                    return;
                }
                message = stream.message() => message,
            };
            let ended = match message {
                Ok(Some(answer)) => {
                    for event in answer.events() {
                        let Some(kv) = event.kv() else { continue };
                        let Some(key) = prefix.map_key(kv.key()) else {
                            continue;
                        };
                        let value = match event.event_type() {
                            EventType::Put => Some(kv.value().to_vec()),
                            EventType::Delete => None,
                        };
                        match changes.push(Change { key, value }) {
                            Queued::Yes => {}
                            Queued::FellBehind => {
                                let _ = watcher.cancel().await;
                                return;
                            }
                            Queued::ReaderGone => return,
                        }
                    }
                    ended_by(
                        answer.canceled(),
                        answer.compact_revision(),
                        answer.cancel_reason(),
                    )
                }
                Ok(None) => Some(MapError::WatchEnded(format!(
                    "{endpoint} closed the watch stream"
                ))),
                Err(error) => Some(map_error(&error, &endpoint, None, Effect::Reads)),
            };
            if let Some(error) = ended {
                changes.end(error);
                return;
            }
        }
    });
    Watch::new(Box::new(receiver))
}

/// Why a watch answer ended the watch, if it did: etcd cancelled it, or
/// compacted past it (etcd's rpc.proto, WatchResponse).
fn ended_by(canceled: bool, compact_revision: i64, reason: &str) -> Option<MapError> {
    if compact_revision != 0 {
        return Some(MapError::WatchEnded(format!(
            "etcd compacted its history past the watch (revision {compact_revision})"
        )));
    }
    canceled.then(|| {
        MapError::WatchEnded(if reason.is_empty() {
            "etcd cancelled the watch".to_owned()
        } else {
            format!("etcd cancelled the watch: {reason}")
        })
    })
}

/// What [`ChangeQueue::push`] did with a change.
#[derive(Debug, PartialEq, Eq)]
enum Queued {
    /// It waits to be read.
    Yes,
    /// [`WATCH_QUEUE_LIMIT`] changes were unread: the watch ended instead.
    FellBehind,
    /// Nobody reads the watch any more.
    ReaderGone,
}

/// The forwarding task's end of a watch's queue: room for
/// [`WATCH_QUEUE_LIMIT`] unread changes and the error that ends it.
struct ChangeQueue {
    sender: mpsc::Sender<Result<Change, MapError>>,
    /// The map prefix watched, as the fell-behind error names it.
    watched: String,
}

impl ChangeQueue {
    fn new(watched: String) -> (ChangeQueue, EtcdWatch) {
        let (sender, changes) = mpsc::channel(WATCH_QUEUE_LIMIT + 1);
        let watch = EtcdWatch {
            changes,
            ended: None,
        };
        (ChangeQueue { sender, watched }, watch)
    }

    /// Queues `change`, or ends the watch if [`WATCH_QUEUE_LIMIT`] changes
    /// wait unread (the last place is kept for the error: only this task
    /// sends, so places only free up between the check and the send).
    fn push(&self, change: Change) -> Queued {
        if self.sender.is_closed() {
            return Queued::ReaderGone;
        }
        if self.sender.capacity() <= 1 {
            // The same words as the in-process map's.
            self.end(MapError::WatchEnded(format!(
                "it fell behind: {WATCH_QUEUE_LIMIT} changes under {:?} were not read; \
                 watch again and list to catch up",
                self.watched
            )));
            return Queued::FellBehind;
        }
        match self.sender.try_send(Ok(change)) {
            Ok(()) => Queued::Yes,
            Err(mpsc::error::TrySendError::Closed(_)) => Queued::ReaderGone,
            // Not reached (see above); ending is the safe answer.
            Err(mpsc::error::TrySendError::Full(_)) => Queued::FellBehind,
        }
    }

    /// Ends the watch with `error`, after the changes it holds.
    fn end(&self, error: MapError) {
        let _ = self.sender.try_send(Err(error));
    }

    /// Done when the [`Watch`] is dropped.
    async fn closed(&self) {
        self.sender.closed().await;
    }
}

/// The [`WatchStream`] reading what the forwarding task sends.
struct EtcdWatch {
    changes: mpsc::Receiver<Result<Change, MapError>>,
    /// Why it ended, repeated to every later poll.
    ended: Option<MapError>,
}

impl WatchStream for EtcdWatch {
    fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Result<Change, MapError>> {
        if let Some(error) = &self.ended {
            return Poll::Ready(Err(error.clone()));
        }
        match self.changes.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(change))) => Poll::Ready(Ok(change)),
            Poll::Ready(Some(Err(error))) => {
                self.ended = Some(error.clone());
                Poll::Ready(Err(error))
            }
            Poll::Ready(None) => {
                let error = MapError::WatchEnded("the etcd map was dropped".to_owned());
                self.ended = Some(error.clone());
                Poll::Ready(Err(error))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelled_and_compacted_watches_end() {
        assert_eq!(ended_by(false, 0, ""), None);
        assert!(matches!(
            ended_by(true, 0, "permission denied"),
            Some(MapError::WatchEnded(why)) if why.contains("permission denied")
        ));
        assert!(matches!(
            ended_by(true, 42, ""),
            Some(MapError::WatchEnded(why)) if why.contains("compacted") && why.contains("42")
        ));
    }

    fn change(n: usize) -> Change {
        Change {
            key: format!("nodes/{n}"),
            value: Some(b"up".to_vec()),
        }
    }

    #[test]
    fn an_ended_watch_keeps_saying_why() {
        let (queue, mut watch) = ChangeQueue::new("nodes/".to_owned());
        let change = change(1);
        assert_eq!(queue.push(change.clone()), Queued::Yes);
        queue.end(MapError::WatchEnded("gone".to_owned()));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert_eq!(watch.poll_change(&mut cx), Poll::Ready(Ok(change)));
        for _ in 0..2 {
            assert_eq!(
                watch.poll_change(&mut cx),
                Poll::Ready(Err(MapError::WatchEnded("gone".to_owned())))
            );
        }
    }

    /// Like the in-process map's watch: the limit's worth of unread changes
    /// is kept, one more ends the watch after them, saying it fell behind.
    #[test]
    fn a_watch_nobody_reads_ends_after_the_limit_having_lost_nothing() {
        let (queue, mut watch) = ChangeQueue::new("nodes/".to_owned());
        for n in 0..WATCH_QUEUE_LIMIT {
            assert_eq!(queue.push(change(n)), Queued::Yes, "change {n}");
        }
        assert_eq!(queue.push(change(WATCH_QUEUE_LIMIT)), Queued::FellBehind);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for n in 0..WATCH_QUEUE_LIMIT {
            assert_eq!(watch.poll_change(&mut cx), Poll::Ready(Ok(change(n))));
        }
        let said = format!(
            "it fell behind: {WATCH_QUEUE_LIMIT} changes under \"nodes/\" were not read; \
             watch again and list to catch up"
        );
        for _ in 0..2 {
            assert_eq!(
                watch.poll_change(&mut cx),
                Poll::Ready(Err(MapError::WatchEnded(said.clone())))
            );
        }
    }

    #[test]
    fn a_queue_whose_watch_is_dropped_says_so() {
        let (queue, watch) = ChangeQueue::new("nodes/".to_owned());
        drop(watch);
        assert_eq!(queue.push(change(1)), Queued::ReaderGone);
    }
}
