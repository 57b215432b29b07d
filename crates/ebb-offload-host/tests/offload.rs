//! The FileSystem Ebb between two hosted nodes over kernel TCP on
//! 127.0.0.1: node 0 shares a scratch directory, node 1 ships every
//! operation to it with `ebb_offload::RemoteFileSystem`. The operations work
//! (a 10 MiB file goes in and out in chunks, as several IoBufs), Linux's
//! errors come back typed, every way out of the directory is refused
//! with `Escape` and leaves the outside untouched, it passes the check
//! every FileSystem backend passes, a node whose hosted
//! node shares nothing hears so, and a forgotten node's files are closed.

mod support;

use std::os::unix::fs::symlink;

use ebb_core::NodeId;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_offload::{FileKind, FsError, OpenFlags, CHUNK};
use support::{on_client, Scratch, ServerNode};

/// `len` bytes of a pattern that differs at every offset of a chunk.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| u8::try_from((i * 31 + i / 4099) % 251).unwrap() ^ seed)
        .collect()
}

/// `data` as a chain of buffers of 1 MiB and a bit (chunk boundaries fall
/// inside them).
fn chain(data: &[u8]) -> IoChain {
    let mut chain = IoChain::new();
    for piece in data.chunks((1 << 20) + 7) {
        chain.push_back(IoBuf::from_vec(piece.to_vec()));
    }
    chain
}

#[test]
fn every_operation_works_through_the_hosted_node() {
    let root = Scratch::new("ops");
    let node = ServerNode::start(Some(&root.0));
    let big = pattern(20 * CHUNK + 12_345, 7);
    let expected = big.clone();
    let (read_back, sequential, stat, listing, after_close) =
        on_client(node.addr, move |fs| async move {
            fs.mkdir("d/", 0o755).await.unwrap();
            let rw = OpenFlags::READ | OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::EXCLUSIVE;
            let handle = fs.open("d/f", rw, 0o640).await.unwrap();
            let input = chain(&big);
            assert!(input.segment_count() > 2, "the write is several buffers");
            assert_eq!(fs.pwrite(handle, input, 0).await.unwrap(), big.len() as u64);
            let read_back = fs.pread(handle, big.len() + 100, 0).await.unwrap();
            // Sequential: the position starts at 0 and moves on.
            let first = fs.read(handle, 10).await.unwrap().to_vec();
            let second = fs.read(handle, 10).await.unwrap().to_vec();
            let stat = fs.stat("d/f").await.unwrap();
            fs.close(handle).await.unwrap();
            let after_close = fs.read(handle, 1).await.err();
            // Append, rename, list, unlink.
            let log = fs
                .open(
                    "log",
                    OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::APPEND,
                    0o600,
                )
                .await
                .unwrap();
            for line in [&b"one\n"[..], b"two\n"] {
                fs.write(log, IoChain::from(IoBuf::copy_from_slice(line)))
                    .await
                    .unwrap();
            }
            fs.close(log).await.unwrap();
            fs.rename("log", "d/log").await.unwrap();
            let listing = fs.readdir("d").await.unwrap();
            fs.unlink("d/log").await.unwrap();
            (
                (read_back.segment_count(), read_back.to_vec()),
                [first, second].concat(),
                stat,
                listing,
                after_close,
            )
        });
    let (segments, read_back) = read_back;
    assert_eq!(
        read_back.len(),
        expected.len(),
        "a read past the end stops at the end"
    );
    assert!(
        read_back == expected,
        "the bytes read are the bytes written"
    );
    assert!(
        segments >= 3,
        "a read of 3 chunks is a chain of their buffers, not a copy"
    );
    assert_eq!(sequential, expected[..20]);
    assert_eq!(
        (stat.kind, stat.size, stat.mode & 0o777),
        (FileKind::File, expected.len() as u64, 0o640 & !umask())
    );
    assert_eq!(after_close, Some(FsError::BadHandle));
    let names: Vec<_> = listing.iter().map(|e| (e.name.as_str(), e.kind)).collect();
    assert_eq!(names, [("f", FileKind::File), ("log", FileKind::File)]);
    assert_eq!(std::fs::read(root.join("d/f")).unwrap(), expected);
    assert!(!root.join("d/log").exists());
}

/// The remote backend passes the check every FileSystem backend passes
/// (`ebb_fs::conformance`, which the in-memory file system passes in
/// `ebb-posix-files`): code written against the interface gets the same
/// answers from the hosted node's files as from memory.
#[test]
fn the_shared_directory_does_what_every_file_system_does() {
    let root = Scratch::new("conformance");
    let node = ServerNode::start(Some(&root.0));
    let checked = on_client(node.addr, |fs| async move {
        ebb_fs::conformance::check(&fs, "conformance").await
    });
    assert_eq!(checked, Ok(()));
    let server = node.server.as_ref().unwrap();
    assert_eq!(
        server.open_files(NodeId(1)),
        0,
        "the check closes what it opens"
    );
}

fn umask() -> u32 {
    // The server's files get the process's umask, as open(2) says.
    let mask = rustix::process::umask(rustix::fs::Mode::empty());
    rustix::process::umask(mask);
    mask.bits()
}

#[test]
fn linux_errors_come_back_typed() {
    let root = Scratch::new("errors");
    std::fs::create_dir_all(root.join("full/inner")).unwrap();
    std::fs::create_dir(root.join("empty")).unwrap();
    std::fs::write(root.join("file"), b"x").unwrap();
    let node = ServerNode::start(Some(&root.0));
    let errors = on_client(node.addr, |fs| async move {
        let read = OpenFlags::READ;
        let exclusive = OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::EXCLUSIVE;
        vec![
            ("open missing", fs.open("missing", read, 0).await.err()),
            ("stat missing", fs.stat("no/such").await.err()),
            ("unlink missing", fs.unlink("missing").await.err()),
            (
                "exclusive create",
                fs.open("file", exclusive, 0o600).await.err(),
            ),
            ("mkdir existing", fs.mkdir("full", 0o755).await.err()),
            ("open a directory", fs.open("full", read, 0).await.err()),
            ("unlink a directory", fs.unlink("full").await.err()),
            ("through a file", fs.open("file/x", read, 0).await.err()),
            ("readdir a file", fs.readdir("file").await.err()),
            (
                "rename over a full dir",
                fs.rename("empty", "full").await.err(),
            ),
            (
                "unknown handle",
                fs.read(ebb_offload::Handle(77), 1).await.err(),
            ),
            ("empty path", fs.stat("").await.err()),
            ("NUL in path", fs.stat("a\0b").await.err()),
            ("the root itself", fs.unlink(".").await.err()),
            ("too long", fs.stat(&"x".repeat(3000)).await.err()),
            // A trailing slash says "a directory" (POSIX): not dropped.
            ("unlink file/", fs.unlink("file/").await.err()),
            ("rename file/", fs.rename("file/", "moved").await.err()),
            ("rename to file/", fs.rename("file", "moved/").await.err()),
            ("unlink empty/", fs.unlink("empty/").await.err()),
        ]
    });
    let expected = [
        FsError::NotFound,
        FsError::NotFound,
        FsError::NotFound,
        FsError::Exists,
        FsError::Exists,
        FsError::IsDir,
        FsError::IsDir,
        FsError::NotDir,
        FsError::NotDir,
        FsError::NotEmpty,
        FsError::BadHandle,
        FsError::InvalidPath,
        FsError::InvalidPath,
        FsError::InvalidPath,
        FsError::NameTooLong,
        FsError::NotDir,
        FsError::NotDir,
        FsError::NotDir,
        FsError::IsDir,
    ];
    for ((what, got), want) in errors.iter().zip(expected) {
        assert_eq!(got.as_ref(), Some(&want), "{what}");
    }
    assert_eq!(std::fs::read(root.join("file")).unwrap(), b"x");
    assert!(!root.join("moved").exists());
}

#[test]
fn set_id_and_sticky_modes_are_refused() {
    let root = Scratch::new("modes");
    let node = ServerNode::start(Some(&root.0));
    let errors = on_client(node.addr, |fs| async move {
        let create = OpenFlags::WRITE | OpenFlags::CREATE;
        [
            fs.open("setuid", create, 0o4755).await.err(),
            fs.open("setgid", create, 0o2755).await.err(),
            fs.mkdir("sticky", 0o1777).await.err(),
            fs.mkdir("plain", 0o755).await.err(),
        ]
    });
    assert_eq!(
        errors,
        [
            Some(FsError::BadRequest),
            Some(FsError::BadRequest),
            Some(FsError::BadRequest),
            None
        ]
    );
    for refused in ["setuid", "setgid", "sticky"] {
        assert!(!root.join(refused).exists(), "{refused} was not created");
    }
    assert!(root.join("plain").is_dir());
}

#[test]
fn nothing_escapes_the_shared_directory() {
    let base = Scratch::new("escape");
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), b"secret").unwrap();
    std::fs::write(root.join("inside"), b"inside").unwrap();
    // Relative, absolute, and a chain of links whose last step leaves;
    // and links that stay inside, which work.
    symlink("../outside/secret", root.join("up")).unwrap();
    symlink(outside.join("secret"), root.join("absolute")).unwrap();
    symlink("link2", root.join("link1")).unwrap();
    symlink("sub/link3", root.join("link2")).unwrap();
    symlink("../../outside", root.join("sub/link3")).unwrap();
    symlink("../outside/new", root.join("dangling")).unwrap();
    symlink("/proc/self/root/etc/passwd", root.join("magic")).unwrap();
    symlink("../inside", root.join("sub/back")).unwrap();
    let node = ServerNode::start(Some(&root));
    let read = OpenFlags::READ;
    let create = OpenFlags::WRITE | OpenFlags::CREATE;
    let (refused, inside) = on_client(node.addr, move |fs| async move {
        let refused = vec![
            ("`..`", fs.open("../outside/secret", read, 0).await.err()),
            (
                "`..` inside a path",
                fs.open("sub/../../outside/secret", read, 0).await.err(),
            ),
            ("absolute path", fs.open("/etc/passwd", read, 0).await.err()),
            ("relative symlink out", fs.open("up", read, 0).await.err()),
            ("absolute symlink", fs.open("absolute", read, 0).await.err()),
            ("symlink chain out", fs.readdir("link1").await.err()),
            (
                "stat through the chain",
                fs.stat("link1/secret").await.err(),
            ),
            (
                "create through a dangling link",
                fs.open("dangling", create, 0o600).await.err(),
            ),
            ("magic link", fs.open("magic", read, 0).await.err()),
            (
                "mkdir through the chain",
                fs.mkdir("link1/new", 0o755).await.err(),
            ),
            (
                "unlink through the chain",
                fs.unlink("link1/secret").await.err(),
            ),
            ("rename out", fs.rename("inside", "../stolen").await.err()),
            (
                "rename in from out",
                fs.rename("link1/secret", "stolen").await.err(),
            ),
            ("absolute rename", fs.rename("/tmp/x", "x").await.err()),
        ];
        let via_link = fs.open("sub/back", read, 0).await.unwrap();
        let inside = fs.read(via_link, 100).await.unwrap().to_vec();
        (refused, inside)
    });
    for (what, got) in &refused {
        assert_eq!(got.as_ref(), Some(&FsError::Escape), "{what}");
    }
    assert_eq!(inside, b"inside", "a symlink that stays inside is followed");
    assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"secret");
    let outside_now: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside_now, ["secret"], "nothing was made outside");
    assert!(!base.join("stolen").exists());
    assert!(root.join("inside").exists());
}

#[test]
fn a_node_whose_hosted_node_shares_nothing_hears_so() {
    let node = ServerNode::start(None);
    let error = on_client(node.addr, |fs| async move { fs.stat(".").await.err() });
    assert_eq!(error, Some(FsError::NotShared));
    assert!(error
        .unwrap()
        .to_string()
        .contains("no directory is shared"));
}

#[test]
fn a_forgotten_nodes_files_are_closed() {
    let root = Scratch::new("forget");
    std::fs::write(root.join("a"), b"a").unwrap();
    let node = ServerNode::start(Some(&root.0));
    let handles = on_client(node.addr, |fs| async move {
        let mut handles = Vec::new();
        for _ in 0..3 {
            handles.push(fs.open("a", OpenFlags::READ, 0).await.unwrap());
        }
        handles
    });
    let server = node.server.as_ref().unwrap();
    assert_eq!(handles.len(), 3);
    assert_eq!(server.open_files(NodeId(1)), 3);
    assert_eq!(server.forget_node(NodeId(1)), 3);
    assert_eq!(server.open_files(NodeId(1)), 0);
}

#[test]
fn a_failed_copy_leaves_no_file_open() {
    let root = Scratch::new("copy");
    std::fs::write(root.join("a"), b"abc").unwrap();
    let node = ServerNode::start(Some(&root.0));
    let (into_missing_dir, from_missing, copied) = on_client(node.addr, |fs| async move {
        (
            filecheck::copy_file(&fs, "a", "no/such").await.err(),
            filecheck::copy_file(&fs, "missing", "b").await.err(),
            filecheck::copy_file(&fs, "a", "b").await,
        )
    });
    assert_eq!(into_missing_dir, Some(FsError::NotFound));
    assert_eq!(from_missing, Some(FsError::NotFound));
    assert_eq!(copied.map(|c| c.bytes), Ok(3));
    let server = node.server.as_ref().unwrap();
    assert_eq!(server.open_files(NodeId(1)), 0, "every handle was closed");
}

#[test]
fn an_unreachable_hosted_node_is_an_error_not_a_hang() {
    // A port nobody listens on: the connect is refused.
    let port = ebb_testbed::free_port().unwrap();
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let error = on_client(addr, |fs| async move { fs.stat(".").await.err() });
    assert!(
        matches!(
            error,
            Some(FsError::Unreachable(
                ebb_messenger::MessengerError::Unreachable { .. }
            ))
        ),
        "{error:?}"
    );
}

#[test]
fn a_hosted_node_that_never_answers_is_a_timeout_not_a_hang() {
    // Node 0 takes the FileSystem's messages and never answers them (a
    // frozen server: the connection stays open).
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = ebb_event::oneshot::<()>();
    let server = std::thread::spawn(move || {
        ebb_hosted::run_task(support::node_config(), move || async move {
            let messenger = ebb_messenger::create_messenger(ebb_messenger::MessengerSettings::new(
                ebb_messenger::FRONTEND_NODE,
            ))
            .unwrap();
            messenger.get().unwrap().local().shared().register(
                ebb_offload::FILE_SYSTEM_EBB,
                std::sync::Arc::new(|_request| {
                    ebb_messenger::Answer::Later(Box::pin(std::future::pending()))
                }),
            );
            let addr = ebb_net::listen(
                "127.0.0.1:0".parse().unwrap(),
                ebb_messenger::acceptor(messenger),
            )
            .unwrap();
            addr_tx.send(addr).unwrap();
            let _ = stop_rx.await;
        })
        .unwrap();
    });
    let addr = addr_rx.recv_timeout(support::WITHIN).unwrap();
    let error = on_client(addr, |fs| async move {
        let fs = fs.with_call_bound(std::time::Duration::from_millis(500));
        fs.stat("anything").await.err()
    });
    assert_eq!(
        error,
        Some(FsError::TimedOut {
            node: ebb_messenger::FRONTEND_NODE,
            waited_ms: 500
        })
    );
    stop_tx.send(());
    server.join().unwrap();
}
