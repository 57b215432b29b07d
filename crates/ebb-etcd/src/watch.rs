//! Watches: an etcd watch stream forwarded, change by change, to a
//! [`Watch`] that any executor can poll.

use std::task::{Context, Poll};

use ebb_core::{Change, MapError, Watch, WatchStream};
use etcd_client::{EventType, Watcher};
use tokio::sync::mpsc;

use crate::classify::{map_error, Effect};
use crate::prefix::AppPrefix;

/// Starts a task on the current (the map's) tokio runtime that reads
/// `stream` and hands each change under `prefix` to the returned
/// [`Watch`]; the task cancels the etcd watch when the `Watch` is dropped.
///
/// Changes wait in an unbounded queue until read: a watch is for keys
/// that change rarely (registrations, Ebb entries), and dropping changes
/// would break the promise that nothing is silently lost.
pub fn forward_watch(
    mut watcher: Watcher,
    mut stream: etcd_client::WatchStream,
    prefix: AppPrefix,
    endpoint: String,
) -> Watch {
    let (changes, receiver) = mpsc::unbounded_channel();
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
                        if changes.send(Ok(Change { key, value })).is_err() {
                            return;
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
                let _ = changes.send(Err(error));
                return;
            }
        }
    });
    Watch::new(Box::new(EtcdWatch {
        changes: receiver,
        ended: None,
    }))
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

/// The [`WatchStream`] reading what the forwarding task sends.
struct EtcdWatch {
    changes: mpsc::UnboundedReceiver<Result<Change, MapError>>,
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

    #[test]
    fn an_ended_watch_keeps_saying_why() {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut watch = EtcdWatch {
            changes: receiver,
            ended: None,
        };
        let change = Change {
            key: "nodes/1".to_owned(),
            value: None,
        };
        sender.send(Ok(change.clone())).unwrap();
        sender
            .send(Err(MapError::WatchEnded("gone".to_owned())))
            .unwrap();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert_eq!(watch.poll_change(&mut cx), Poll::Ready(Ok(change)));
        for _ in 0..2 {
            assert_eq!(
                watch.poll_change(&mut cx),
                Poll::Ready(Err(MapError::WatchEnded("gone".to_owned())))
            );
        }
    }
}
