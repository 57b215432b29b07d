//! What an etcd-client error means for the map's caller.

use ebb_core::{Lease, MapError};
use etcd_client::Error;
use tonic::{Code, ConnectError, Status};

/// Whether an operation may change what etcd holds: it decides what a
/// failure after the request was handed to the client means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// It only reads (get, list, watch): a failure wrote nothing.
    Reads,
    /// It writes (put, delete, a transaction, a lease's grant, keep-alive
    /// or revoke): a request that went out but was not answered may or may
    /// not have been applied.
    Writes,
}

impl Effect {
    /// The error for an operation whose request went out but whose answer
    /// never came: [`MapError::OutcomeUnknown`] if it writes, else
    /// [`MapError::Unreachable`] (a read changed nothing).
    pub fn unanswered(self, endpoint: &str, reason: String) -> MapError {
        let endpoint = endpoint.to_owned();
        match self {
            Effect::Writes => MapError::OutcomeUnknown { endpoint, reason },
            Effect::Reads => MapError::Unreachable { endpoint, reason },
        }
    }
}

/// The map error for `error`, from an operation on `endpoint` (about
/// `lease`, when it concerned one) whose request was handed to the client
/// (for a failed connect, pass [`Effect::Reads`]: nothing was sent).
///
/// gRPC `Unavailable` because tonic could not connect (a
/// [`tonic::ConnectError`] beneath it) means the request never went out:
/// [`MapError::Unreachable`]. Any other `Unavailable` may come after it
/// went out (tonic reports a missed HTTP/2 keep-alive ping mid-call so;
/// etcd answers "request timed out" so when a proposal may still commit,
/// its `api/v3rpc/rpctypes/error.go`; etcd's own Go client retries a
/// write only when no connection was available, its `clientv3/retry.go`),
/// and so may `DeadlineExceeded`, `Cancelled` (tonic's per-request
/// timeout), `Unknown` (a connection broken mid-call) and transport or I/O
/// errors: all leave a write's outcome unknown ([`Effect::unanswered`];
/// for a read, unreachable). etcd's "requested lease not found" means the
/// lease expired; anything else is etcd refusing the request.
pub fn map_error(error: &Error, endpoint: &str, lease: Option<Lease>, effect: Effect) -> MapError {
    let unreachable = || MapError::Unreachable {
        endpoint: endpoint.to_owned(),
        reason: reason(error),
    };
    let unanswered = || effect.unanswered(endpoint, reason(error));
    match (error, lease) {
        (Error::TransportError(_) | Error::IoError(_), _) => unanswered(),
        (Error::GRpcStatus(status), Some(lease))
            if status.code() == Code::NotFound && status.message().contains("lease not found") =>
        {
            MapError::LeaseExpired(lease)
        }
        (Error::GRpcStatus(status), _) => match status.code() {
            Code::Unavailable if never_connected(status) => unreachable(),
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
                unanswered()
            }
            _ => MapError::Refused(format!("{endpoint} said: {}", status.message())),
        },
        // etcd-client's keep-alive says so when etcd answered a TTL of 0.
        (Error::LeaseKeepAliveError(why), Some(lease)) if why.contains("lease not found") => {
            MapError::LeaseExpired(lease)
        }
        // The request or keep-alive stream broke: etcd went away mid-call.
        (Error::WatchError(_) | Error::LeaseKeepAliveError(_), _) => unanswered(),
        _ => MapError::Refused(format!("{endpoint}: {error}")),
    }
}

/// Whether `status` comes from tonic failing to connect (so its request
/// was never sent).
fn never_connected(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(cause) = source {
        if cause.is::<ConnectError>() {
            return true;
        }
        source = cause.source();
    }
    false
}

/// What went wrong, as a user reads it: a gRPC status's message and the
/// errors beneath it (e.g. `tcp connect error: Connection refused (os
/// error 111)`), not its debug dump.
fn reason(error: &Error) -> String {
    let Error::GRpcStatus(status) = error else {
        return error.to_string();
    };
    let mut reason = status.message().to_owned();
    let mut source = std::error::Error::source(status);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !reason.contains(&cause_text) {
            reason = format!("{reason}: {cause_text}");
        }
        source = cause.source();
    }
    if reason.is_empty() {
        reason = format!("gRPC status {:?}", status.code());
    }
    reason
}

/// Whether `error` says the connection is not worth keeping (the next
/// operation connects again): etcd was unreachable, or a request went out
/// and its answer never came.
pub fn needs_reconnect(error: &MapError) -> bool {
    matches!(
        error,
        MapError::Unreachable { .. } | MapError::OutcomeUnknown { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified() {
        let at = "etcd at 127.0.0.1:2379";
        let lease = Some(Lease(7));
        let not_found =
            Error::GRpcStatus(Status::not_found("etcdserver: requested lease not found"));
        assert_eq!(
            map_error(&not_found, at, lease, Effect::Writes),
            MapError::LeaseExpired(Lease(7))
        );
        let down = Error::GRpcStatus(refused());
        match map_error(&down, at, None, Effect::Writes) {
            MapError::Unreachable { endpoint, reason } => {
                assert_eq!(endpoint, at);
                assert_eq!(reason, "connection refused");
            }
            other => panic!("{other:?}"),
        }
        let too_big =
            Error::GRpcStatus(Status::invalid_argument("etcdserver: request is too large"));
        match map_error(&too_big, at, None, Effect::Writes) {
            MapError::Refused(why) => {
                assert!(why.contains("too large") && why.contains(at), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let expired = Error::LeaseKeepAliveError("lease not found".to_owned());
        assert_eq!(
            map_error(&expired, at, lease, Effect::Writes),
            MapError::LeaseExpired(Lease(7))
        );
        let broken = Error::LeaseKeepAliveError("channel closed".to_owned());
        assert!(matches!(
            map_error(&broken, at, lease, Effect::Writes),
            MapError::OutcomeUnknown { .. }
        ));
    }

    /// What tonic gives when it cannot connect: `Unavailable` with the
    /// [`ConnectError`] beneath it.
    fn refused() -> Status {
        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        Status::from_error(Box::new(ConnectError(Box::new(refused))))
    }

    /// A request that went out but was not answered: unknown for a write,
    /// unreachable (nothing written) for a read; one tonic could not
    /// connect for is unreachable for both.
    #[test]
    fn unanswered_writes_have_an_unknown_outcome() {
        let at = "etcd at 127.0.0.1:2379";
        let unanswered = [
            Status::deadline_exceeded("Timeout expired"),
            Status::cancelled("Timeout expired"),
            Status::unknown("h2 protocol error: connection reset"),
            Status::unavailable("keep-alive timed out"),
            Status::unavailable("etcdserver: request timed out"),
        ];
        for status in unanswered {
            let message = status.message().to_owned();
            let error = Error::GRpcStatus(status);
            assert_eq!(
                map_error(&error, at, None, Effect::Writes),
                MapError::OutcomeUnknown {
                    endpoint: at.to_owned(),
                    reason: message.clone(),
                },
            );
            assert_eq!(
                map_error(&error, at, None, Effect::Reads),
                MapError::Unreachable {
                    endpoint: at.to_owned(),
                    reason: message,
                },
            );
        }
        let io = Error::IoError(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(matches!(
            map_error(&io, at, None, Effect::Writes),
            MapError::OutcomeUnknown { endpoint, .. } if endpoint == at
        ));
        assert!(matches!(
            map_error(&io, at, None, Effect::Reads),
            MapError::Unreachable { endpoint, .. } if endpoint == at
        ));
        let never_sent = Error::GRpcStatus(refused());
        for effect in [Effect::Writes, Effect::Reads] {
            assert!(matches!(
                map_error(&never_sent, at, None, effect),
                MapError::Unreachable { reason, .. } if reason.contains("refused")
            ));
        }
    }

    #[test]
    fn unknown_outcomes_and_unreachable_etcd_reconnect() {
        let endpoint = "etcd at 127.0.0.1:2379".to_owned();
        let reason = "gone".to_owned();
        assert!(needs_reconnect(&MapError::Unreachable {
            endpoint: endpoint.clone(),
            reason: reason.clone(),
        }));
        assert!(needs_reconnect(&MapError::OutcomeUnknown {
            endpoint,
            reason
        }));
        assert!(!needs_reconnect(&MapError::LeaseExpired(Lease(7))));
        assert!(!needs_reconnect(&MapError::Refused("too large".to_owned())));
    }
}
