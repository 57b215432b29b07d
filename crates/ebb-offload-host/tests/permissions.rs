//! EACCES from the hosted node: the server must run as an unprivileged
//! user, since root's CAP_DAC_OVERRIDE passes every permission check
//! (capabilities(7)). So the test runs node 0 in a child process (this
//! test binary again, `serve_as_child`) under `setpriv --reuid=65534
//! --regid=65534 --clear-groups`, sharing a directory owned by root: a
//! file of mode 0600, a directory of mode 0700 and the directory itself
//! (0755, not writable by the child) refuse it, and node 1 gets
//! `PermissionDenied` for each; what the permissions allow still works.
//! Needs root (to drop to another user); skipped otherwise.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_messenger::{acceptor, create_messenger, MessengerSettings, FRONTEND_NODE};
use ebb_offload::{FsError, OpenFlags};
use ebb_offload_host::FileServer;
use ebb_testbed::child::KilledOnDrop;
use ebb_testbed::{skip_unless, Need};
use support::{node_config, on_client, Scratch};

/// The variable that makes `serve_as_child` serve this directory.
const CHILD_ROOT: &str = "EBB_OFFLOAD_CHILD_ROOT";

/// Node 0 for the test below, when started by it (otherwise it returns
/// at once): shares `$EBB_OFFLOAD_CHILD_ROOT`, prints `listening ADDR`
/// and serves until killed.
#[test]
fn serve_as_child() {
    let Some(root) = std::env::var_os(CHILD_ROOT) else {
        return;
    };
    let server = Arc::new(FileServer::new(root.as_ref()).expect("the root is shared"));
    ebb_hosted::run_task(node_config(), move || async move {
        let messenger = create_messenger(MessengerSettings::new(FRONTEND_NODE)).unwrap();
        FileServer::serve(&server, messenger).unwrap();
        let addr = ebb_net::listen("127.0.0.1:0".parse().unwrap(), acceptor(messenger)).unwrap();
        println!("listening {addr}");
        std::future::pending::<()>().await;
    })
    .unwrap();
}

#[test]
fn permission_denied_comes_back_as_eacces() {
    skip_unless!(Need::Root);
    // util-linux's setpriv drops the child's user, group and groups.
    if Command::new("setpriv").arg("--version").output().is_err() {
        ebb_testbed::skip(
            ebb_testbed::function_name!(),
            "setpriv (util-linux) is not installed",
        );
        return;
    }
    let root = Scratch::new("eacces");
    let mode = |path: &str, mode: u32| {
        std::fs::set_permissions(root.join(path), std::fs::Permissions::from_mode(mode)).unwrap();
    };
    std::fs::write(root.join("locked"), b"root only").unwrap();
    mode("locked", 0o600);
    std::fs::create_dir(root.join("private")).unwrap();
    mode("private", 0o700);
    std::fs::write(root.join("public"), b"anyone").unwrap();
    mode("public", 0o644);
    std::fs::set_permissions(&root.0, std::fs::Permissions::from_mode(0o755)).unwrap();

    let child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "serve_as_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ROOT, &root.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("setpriv starts");
    let mut child = KilledOnDrop(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest writes `test serve_as_child ... ` before it.
            if let Some((_, addr)) = line.split_once("listening ") {
                let _ = tx.send(addr.trim().to_owned());
            }
        }
    });
    let started = Instant::now();
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            panic!(
                "the unprivileged server did not listen within {:?}",
                started.elapsed()
            )
        });
    let addr = addr.parse().unwrap();

    let results = on_client(addr, |fs| async move {
        let read = OpenFlags::READ;
        let create = OpenFlags::WRITE | OpenFlags::CREATE;
        let public = fs.open("public", read, 0).await;
        let public = match public {
            Ok(handle) => Ok(fs.read(handle, 100).await.map(|data| data.to_vec())),
            Err(error) => Err(error),
        };
        (
            vec![
                ("read a 0600 file", fs.open("locked", read, 0).await.err()),
                ("list a 0700 directory", fs.readdir("private").await.err()),
                (
                    "create in a 0755 directory",
                    fs.open("new", create, 0o644).await.err(),
                ),
                ("unlink in it", fs.unlink("public").await.err()),
                ("mkdir in it", fs.mkdir("made", 0o755).await.err()),
            ],
            public,
            fs.stat("locked").await.map(|stat| stat.size),
        )
    });
    let (refused, public, stat) = results;
    for (what, got) in &refused {
        assert_eq!(got.as_ref(), Some(&FsError::PermissionDenied), "{what}");
    }
    assert_eq!(
        public,
        Ok(Ok(b"anyone".to_vec())),
        "what the permissions allow works"
    );
    assert_eq!(
        stat,
        Ok(9),
        "stat needs only search permission on the directory"
    );
    assert!(!root.join("new").exists() && !root.join("made").exists());
    assert!(root.join("public").exists());
    drop(child);
}
