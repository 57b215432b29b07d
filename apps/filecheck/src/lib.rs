//! filecheck: function offload end to end (issue 17). A node of the
//! cluster serves one message, [`COPY`]: it reads a file of the hosted
//! node's shared directory through the FileSystem Ebb
//! (`ebb_offload::RemoteFileSystem`), a piece at a time, digests each piece,
//! writes the very same buffers to another file there (the read's reply
//! payloads go out as the write's, no copy), and replies with the length
//! and the digest. The frontend compares both files' digests on the host.
//!
//! * [`node`]: the node role (a boot contract: `./ebb cluster up filecheck
//!   --nodes 1 --share DIR`).
//! * [`copy`]: the copy itself; [`wire`]: [`COPY`]'s control structures.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod copy;
pub mod node;
pub mod wire;

pub use copy::{copy_file, digest, Copied, DIGEST_START};
pub use wire::{copied_message, decode_copied, refusal, refused, CopyOrder, COPY};

use ebb_app::{App, Args, Launch, UsageError};

/// The node program.
pub static APP: App = App {
    name: "filecheck",
    about: "A node that copies files of the hosted node's shared directory through the FileSystem Ebb and reports their digest.",
    options: &[],
    operands: None,
    setup,
};

/// What a node started on its own is told.
pub const NOT_A_NODE: &str = "filecheck runs as a node of a cluster that shares a directory: \
     start it with ./ebb cluster up filecheck --nodes 1 --share DIR";

fn setup(_args: &Args) -> Result<Launch, UsageError> {
    match ebb_app::node_contract() {
        Ok(Some(contract)) => Ok(Launch::new(move || {
            ebb_event::spawn_task(node::join(contract));
        })),
        Ok(None) => Err(UsageError(NOT_A_NODE.into())),
        Err(error) => Err(UsageError(alloc::format!("a wrong boot contract: {error}"))),
    }
}
