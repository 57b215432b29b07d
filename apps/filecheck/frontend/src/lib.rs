//! The frontend's side of filecheck, written once for the program
//! (`src/main.rs`) and its test: ask a node to copy a file of the shared
//! directory ([`copy_on`]), and digest files on the host the node's way
//! ([`host_digest`]), so that the three digests (the node's of what it
//! read, the host's of the original and of the copy) can be compared.
#![forbid(unsafe_code)]

use std::io::Read;
use std::path::Path;

use ebb_cluster::frontend::AllocatedNode;
use ebb_core::EbbId;
use ebb_messenger::{MessengerError, MessengerRef};
use filecheck::{decode_copied, digest, Copied, CopyOrder, COPY, DIGEST_START};

/// Has `node` copy `from` to `to` (paths in the shared directory): what
/// it reports, or the call's error (a failed copy is
/// `MessengerError::Refused` whose code `filecheck::refused` reads).
pub async fn copy_on(
    messenger: MessengerRef,
    node: &AllocatedNode,
    from: &str,
    to: &str,
) -> Result<Copied, String> {
    let rep = messenger
        .get()
        .map_err(|e| format!("no Messenger here: {e}"))?;
    let copier = EbbId::new(node.ebb_ids.start).map_err(|e| e.to_string())?;
    let order = CopyOrder {
        from: from.into(),
        to: to.into(),
    };
    let reply = rep
        .call_with(node.id, None, copier, COPY, order.message())
        .await
        .map_err(|error| explain(&error))?;
    decode_copied(&reply.control.to_vec())
        .ok_or_else(|| format!("node {} sent a copy report that does not decode", node.id))
}

/// A failed call in words: a refused copy names its file error.
#[must_use]
pub fn explain(error: &MessengerError) -> String {
    match error {
        MessengerError::Refused { node, code } => match filecheck::refused(*code) {
            Some(file_error) => format!("node {node}: {file_error}"),
            None => format!("node {node} could not copy (see its console)"),
        },
        other => other.to_string(),
    }
}

/// The length and digest of the host file `path`, as the node digests.
///
/// # Errors
///
/// The file cannot be read.
pub fn host_digest(path: &Path) -> std::io::Result<Copied> {
    let mut file = std::fs::File::open(path)?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut copied = Copied {
        bytes: 0,
        digest: DIGEST_START,
    };
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            return Ok(copied);
        }
        copied.digest = digest(copied.digest, &buffer[..n]);
        copied.bytes += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_digests_as_the_node_does_and_refusals_are_explained() {
        let path = std::env::temp_dir().join(format!("filecheck-digest-{}", std::process::id()));
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let host = host_digest(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(host.bytes, 3_000_000);
        assert_eq!(host.digest, digest(DIGEST_START, &data));
        let refused = MessengerError::Refused {
            node: ebb_core::NodeId(1),
            code: filecheck::refusal(&ebb_offload_error()),
        };
        assert_eq!(
            explain(&refused),
            "node 1: no such file or directory (ENOENT)"
        );
    }

    fn ebb_offload_error() -> ebb_offload::FsError {
        ebb_offload::FsError::NotFound
    }
}
