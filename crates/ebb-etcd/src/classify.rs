//! What an etcd-client error means for the map's caller.

use ebb_core::{Lease, MapError};
use etcd_client::Error;
use tonic::Code;

/// The map error for `error`, from an operation on `endpoint` (about
/// `lease`, when it concerned one).
///
/// Transport failures, refused connections and gRPC `Unavailable` or
/// `DeadlineExceeded` mean etcd could not be reached (the client then
/// reconnects); etcd's "requested lease not found" means the lease
/// expired; anything else is etcd refusing the request.
pub fn map_error(error: &Error, endpoint: &str, lease: Option<Lease>) -> MapError {
    let unreachable = || MapError::Unreachable {
        endpoint: endpoint.to_owned(),
        reason: reason(error),
    };
    match (error, lease) {
        (Error::TransportError(_) | Error::IoError(_), _) => unreachable(),
        (Error::GRpcStatus(status), Some(lease))
            if status.code() == Code::NotFound && status.message().contains("lease not found") =>
        {
            MapError::LeaseExpired(lease)
        }
        (Error::GRpcStatus(status), _) => match status.code() {
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
                unreachable()
            }
            _ => MapError::Refused(format!("{endpoint} said: {}", status.message())),
        },
        // etcd-client's keep-alive says so when etcd answered a TTL of 0.
        (Error::LeaseKeepAliveError(why), Some(lease)) if why.contains("lease not found") => {
            MapError::LeaseExpired(lease)
        }
        // The request or keep-alive stream broke: etcd went away mid-call.
        (Error::WatchError(_) | Error::LeaseKeepAliveError(_), _) => unreachable(),
        _ => MapError::Refused(format!("{endpoint}: {error}")),
    }
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
/// operation connects again).
pub fn is_unreachable(error: &MapError) -> bool {
    matches!(error, MapError::Unreachable { .. })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Status;

    #[test]
    fn errors_are_classified() {
        let at = "etcd at 127.0.0.1:2379";
        let lease = Some(Lease(7));
        let not_found =
            Error::GRpcStatus(Status::not_found("etcdserver: requested lease not found"));
        assert_eq!(
            map_error(&not_found, at, lease),
            MapError::LeaseExpired(Lease(7))
        );
        let down = Error::GRpcStatus(Status::unavailable("connection refused"));
        match map_error(&down, at, None) {
            MapError::Unreachable { endpoint, reason } => {
                assert_eq!(endpoint, at);
                assert_eq!(reason, "connection refused");
            }
            other => panic!("{other:?}"),
        }
        let too_big =
            Error::GRpcStatus(Status::invalid_argument("etcdserver: request is too large"));
        match map_error(&too_big, at, None) {
            MapError::Refused(why) => {
                assert!(why.contains("too large") && why.contains(at), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let expired = Error::LeaseKeepAliveError("lease not found".to_owned());
        assert_eq!(
            map_error(&expired, at, lease),
            MapError::LeaseExpired(Lease(7))
        );
        let broken = Error::LeaseKeepAliveError("channel closed".to_owned());
        assert!(is_unreachable(&map_error(&broken, at, lease)));
    }
}
