//! `filecheck-frontend`: the hosted frontend of filecheck
//! (`./ebb cluster up filecheck --nodes N --share DIR -- FROM TO` runs
//! it). It shares DIR with the nodes (the FileSystem Ebb), has each node
//! copy FROM to TO (TO.K for node K when there are several) through it,
//! and compares the node's digest of what it read with the host's
//! digests of FROM and of the copy.
//!
//! Exit code: 0 every copy matched, 1 a copy failed or a digest differs
//! (or the cluster could not run), 2 a wrong command line, 128 + the
//! signal after SIGINT/SIGTERM.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use ebb_cluster::frontend::{exit_code, run_frontend, usage_error, FrontendArgs};
use filecheck_frontend::{copy_on, host_digest};

const PROGRAM: &str = "filecheck-frontend";
const USAGE: &str = "-- FROM TO (paths in the --share directory)";

fn main() -> ExitCode {
    let args = match FrontendArgs::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(error) => return usage_error(PROGRAM, &error, USAGE),
    };
    let Some(share) = args.options.share.clone() else {
        return usage_error(
            PROGRAM,
            "filecheck needs a directory to share: --share DIR",
            USAGE,
        );
    };
    let [from, to] = <[String; 2]>::try_from(args.rest.clone()).unwrap_or_default();
    if from.is_empty() || to.is_empty() {
        return usage_error(PROGRAM, "filecheck copies one file", USAGE);
    }
    let nodes = args.nodes;
    let ran = run_frontend(args.options, move |frontend| async move {
        let mut failed = false;
        let original = host_digest(&share.join(&from));
        for allocated in frontend.allocate(nodes).await {
            let node = match allocated {
                Ok(node) => node,
                Err(error) => {
                    eprintln!("error: {error}");
                    failed = true;
                    continue;
                }
            };
            let to = if nodes > 1 {
                format!("{to}.{}", node.id)
            } else {
                to.clone()
            };
            let copied = copy_on(frontend.messenger(), &node, &from, &to).await;
            let copy = host_digest(&share.join(&to));
            match (&copied, &original, &copy) {
                (Ok(copied), Ok(original), Ok(copy)) if copied == original && copy == original => {
                    println!(
                        "filecheck: node {}: copied {from} to {to}: {} bytes, digest {:#018x}: OK",
                        node.id, copied.bytes, copied.digest
                    );
                }
                _ => {
                    failed = true;
                    println!(
                        "filecheck: node {}: {from} to {to}: MISMATCH or failure: node {copied:?}, \
                         host {original:?} and {copy:?}",
                        node.id
                    );
                }
            }
        }
        i32::from(failed)
    });
    exit_code(ran)
}
