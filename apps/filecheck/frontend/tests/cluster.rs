//! Function offload from a native node (needs root, /dev/net/tun, `ip`
//! and QEMU; skipped otherwise): the frontend runtime shares a scratch
//! directory (`FrontendOptions::share`, `--share`) holding a 64 MiB file,
//! and one native filecheck node under QEMU copies it through the
//! FileSystem Ebb: it reads it in pieces over the Messenger, digests
//! them, and writes the same buffers back to a second file. The node's
//! digest of what it read, the host's digest of the original and the
//! host's digest of the copy must all agree (and the copy equal the
//! original byte for byte). A copy of a missing file is refused with
//! `NotFound`, and one through `..` with `Escape`, as the node's error
//! reply says. Afterwards no namespace or QEMU of the test is left.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ebb_cluster::frontend::{run_frontend, FrontendOptions};
use ebb_offload::FsError;
use ebb_testbed::{skip_unless, Need};
use filecheck::{digest, Copied, DIGEST_START};
use filecheck_frontend::{copy_on, host_digest};

/// The file's size: the 64 MiB.
const FILE_LEN: usize = 64 << 20;
/// The whole test's bound: a TCG boot, 64 MiB each way through our TCP
/// stack under TCG on a loaded host, the teardown.
const TEST_LIMIT: Duration = Duration::from_secs(900);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .canonicalize()
        .expect("the workspace root")
}

/// A scratch directory of the test, deleted afterwards.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the frontend saw.
#[derive(Debug)]
struct Seen {
    namespace: String,
    qemu: Option<u32>,
    copy: Result<Copied, String>,
    missing: Option<Result<Copied, String>>,
    escape: Option<Result<Copied, String>>,
}

#[test]
fn a_native_node_copies_64_mib_through_the_hosted_node_byte_exact() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu);
    let image = ebb_testbed::native_image::build(&workspace_root(), "filecheck")
        .expect("filecheck's native image builds");
    let scratch =
        Scratch(std::env::temp_dir().join(format!("ebb-filecheck-{}", std::process::id())));
    let share = scratch.0.join("share");
    std::fs::create_dir_all(&share).unwrap();
    // Every byte depends on its offset, so a piece out of place shows.
    let original: Vec<u8> = (0..FILE_LEN)
        .map(|i| u8::try_from((i ^ (i >> 9) ^ (i >> 17)) & 0xff).unwrap())
        .collect();
    std::fs::write(share.join("in.bin"), &original).unwrap();
    let original_digest = digest(DIGEST_START, &original);

    let mut options = FrontendOptions::new(image);
    options.ready_timeout = Duration::from_secs(300);
    options.log_dir = scratch.0.join("logs");
    options.messenger_port = 7300;
    options.memory = "512M".to_owned();
    options.share = Some(share.clone());
    let (seen_tx, seen_rx) = mpsc::channel::<Seen>();
    let started = Instant::now();
    let frontend = std::thread::spawn(move || {
        run_frontend(options, move |frontend| async move {
            let mut seen = Seen {
                namespace: frontend.namespace().to_owned(),
                qemu: None,
                copy: Err("the node did not come up".to_owned()),
                missing: None,
                escape: None,
            };
            let node = match frontend.allocate(1).await.pop() {
                Some(Ok(node)) => node,
                other => {
                    seen.copy = Err(format!("allocation: {other:?}"));
                    let _ = seen_tx.send(seen);
                    return 1;
                }
            };
            seen.qemu = Some(node.pid);
            let messenger = frontend.messenger();
            seen.copy = copy_on(messenger, &node, "in.bin", "out.bin").await;
            seen.missing = Some(copy_on(messenger, &node, "missing.bin", "x.bin").await);
            seen.escape = Some(copy_on(messenger, &node, "../in.bin", "x.bin").await);
            let _ = seen_tx.send(seen);
            0
        })
    });
    let deadline = Instant::now() + TEST_LIMIT;
    let seen = loop {
        match seen_rx.recv_timeout(Duration::from_millis(200)) {
            Ok(seen) => break seen,
            Err(_) if frontend.is_finished() => {
                panic!("the frontend ended without a report: {:?}", frontend.join())
            }
            Err(_) => assert!(Instant::now() < deadline, "no report within {TEST_LIMIT:?}"),
        }
    };
    let code = frontend.join().expect("the frontend thread");
    eprintln!(
        "filecheck: 64 MiB copied through the hosted node in {:?}",
        started.elapsed()
    );

    let copied = seen.copy.expect("the node copies the file");
    assert_eq!(copied.bytes, FILE_LEN as u64, "the node read every byte");
    assert_eq!(
        copied.digest, original_digest,
        "the node read the bytes the host has"
    );
    assert_eq!(
        host_digest(&share.join("in.bin")).unwrap(),
        copied,
        "the host digests as the node does"
    );
    assert_eq!(
        host_digest(&share.join("out.bin")).expect("the copy exists"),
        copied,
        "the copy's length and digest on the host"
    );
    assert!(
        std::fs::read(share.join("out.bin")).unwrap() == original,
        "the copy is the original, byte for byte"
    );

    assert_eq!(
        seen.missing,
        Some(Err(format!("node 1: {}", FsError::NotFound))),
        "a missing file"
    );
    assert_eq!(
        seen.escape,
        Some(Err(format!("node 1: {}", FsError::Escape))),
        "a path through `..`"
    );
    assert!(!share.join("x.bin").exists());
    assert_eq!(code, Ok(0));

    // Nothing left: the namespace (its TAP device and bridge went with
    // it), the QEMU.
    assert!(
        !ebb_testbed::netns::exists(&seen.namespace),
        "{} is left",
        seen.namespace
    );
    if let Some(pid) = seen.qemu {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert!(!comm.contains("qemu"), "QEMU {pid} is still running");
    }
}
