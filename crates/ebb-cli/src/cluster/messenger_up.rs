//! `./ebb cluster up APP` for an application whose nodes join a
//! distributed application (they take a boot contract: echo and
//! memcached do) and that has no frontend program of its own.
//!
//! An application says so in its manifest:
//!
//! ```toml
//! [package.metadata.ebb]
//! node = true
//! ```
//!
//! (a manifest entry rather than a guess from the code: `up` reads it
//! before it builds anything, and an application without it keeps the
//! console-line readiness, `APP: ready:`). Then `up` runs the frontend
//! runtime itself (`ebb_cluster::frontend::run_frontend`): each node is
//! told `node= frontend= ebb_ids= messenger_port=`, counts as ready once
//! it has announced itself to `up`'s Messenger (10.96.0.1:7000, inside
//! the namespace), and a node lost is lost to the Messenger too. A node
//! announces itself before it serves its clients (memcached first joins
//! the cache), so `up` says the nodes are ready only once every node's
//! console also shows the application's ready line (`APP: ready: ...`),
//! and prints that line with the node's address: it says where clients
//! reach the node (`memcached: ready: listening on 0.0.0.0:11211`). The
//! runtime keeps the state file as `up` does for other applications, so
//! `ps`, `logs` and `down` work the same.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ebb_cluster::frontend::{
    run_frontend, FrontendHandle, FrontendOptions, MapChoice, DEFAULT_MESSENGER_PORT,
};

use super::add_request::{self, AddRequest};
use super::state::{console_log, NodeRow, Recorder};
use super::{say_booting, say_ready, say_stopped, UpOptions, WATCH};
use crate::{native, stop};

/// Whether `app`'s manifest says its nodes take a boot contract
/// (`[package.metadata.ebb]` with `node = true`).
pub fn takes_boot_contract(root: &Path, app: &str) -> bool {
    let Ok(manifest) = std::fs::read_to_string(root.join("apps").join(app).join("Cargo.toml"))
    else {
        return false;
    };
    let mut in_ebb = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_ebb = line == "[package.metadata.ebb]";
        } else if in_ebb {
            let words: Vec<&str> = line.split('=').map(str::trim).collect();
            if words == ["node", "true"] {
                return true;
            }
        }
    }
    false
}

/// What the frontend's task leaves for `up`.
#[derive(Default)]
struct Outcome {
    namespace: Option<String>,
    failures: Vec<String>,
}

/// Runs the cluster with the frontend runtime (see the module
/// documentation) until Ctrl-C, SIGTERM, SIGHUP or SIGQUIT.
pub fn up(root: &Path, options: &UpOptions, dir: &Path) -> Result<u8, String> {
    let mut frontend = FrontendOptions::new(native::image_path(root, &options.app));
    frontend.cores = usize::from(options.cores);
    frontend.memory.clone_from(&options.memory);
    frontend.args.clone_from(&options.args);
    frontend.ready_timeout = Duration::from_secs(options.ready_timeout);
    frontend.verbose = options.verbose;
    frontend.share.clone_from(&options.share);
    frontend.log_dir = dir.to_owned();
    frontend.network_tag = "cluster".to_owned();
    // The runtime keeps the state file (and says which node changed).
    frontend.state_dir = Some(dir.to_owned());
    frontend.app.clone_from(&options.app);
    frontend.map = MapChoice::parse(&options.etcd);
    let outcome = Arc::new(Mutex::new(Outcome::default()));
    let shared = Arc::clone(&outcome);
    let state_dir = dir.to_owned();
    let options = options.clone();
    let log_dir = dir.to_owned();
    // Requests left by an `add` whose `up` ended are not this cluster's.
    add_request::clear(dir);
    let code = run_frontend(frontend, move |handle| async move {
        let namespace = handle.namespace().to_owned();
        let lock = || shared.lock().unwrap_or_else(PoisonError::into_inner);
        lock().namespace = Some(namespace.clone());
        let frontend = format!("10.96.0.1, its Messenger on port {DEFAULT_MESSENGER_PORT}");
        say_booting(&options, &namespace, &frontend);
        let failures: Vec<String> = handle
            .allocate(usize::from(options.nodes))
            .await
            .into_iter()
            .filter_map(|result| result.err().map(|e| e.to_string()))
            .collect();
        let shown = Recorder::new(&options.app, &namespace).state(&handle.nodes());
        print!("{}", shown.table());
        if let Some(code) = stop::report("the cluster") {
            return i32::from(code);
        }
        if !failures.is_empty() {
            lock().failures = failures;
            return 1;
        }
        let deadline = Instant::now() + Duration::from_secs(options.ready_timeout);
        match ready_lines(&options.app, &consoles(&shown.nodes, &log_dir), deadline).await {
            Ok(lines) => eprint!("{lines}"),
            Err(not_ready) => {
                lock().failures = vec![not_ready];
                return 1;
            }
        }
        say_ready(&shown);
        while stop::received().is_none() {
            ebb_event::sleep(WATCH).await;
            for request in add_request::take_requests(&log_dir) {
                add_nodes(&handle, &options, &log_dir, &request).await;
            }
        }
        eprintln!("ebb: stopping the nodes...");
        i32::from(stop::report("the cluster").unwrap_or(0))
    });
    let outcome = std::mem::take(&mut *outcome.lock().unwrap_or_else(PoisonError::into_inner));
    if let Some(namespace) = &outcome.namespace {
        say_stopped(&state_dir, namespace);
    }
    let code = code?;
    if !outcome.failures.is_empty() {
        return Err(outcome.failures.join("\nerror: "));
    }
    // A signal the runtime caught (128 + it) is `up`'s code as well.
    Ok(stop::report("the cluster").unwrap_or_else(|| u8::try_from(code).unwrap_or(1)))
}

/// `./ebb cluster add`'s request (`add_request`): boots the nodes asked
/// for as `up` booted the first ones, waits for their ready lines, and
/// answers with those and the node table.
async fn add_nodes(handle: &FrontendHandle, options: &UpOptions, dir: &Path, request: &AddRequest) {
    let count = match &request.nodes {
        Ok(count) => *count,
        Err(why) => return add_request::answer(request, false, why),
    };
    eprintln!(
        "ebb: ./ebb cluster add: booting {count} more node{}",
        plural(count)
    );
    let mut added = Vec::new();
    let mut failures = String::new();
    for result in handle.allocate(usize::from(count)).await {
        match result {
            Ok(node) => added.push(node.id.0),
            Err(error) => failures.push_str(&format!("error: {error}\n")),
        }
    }
    let shown = Recorder::new(&options.app, handle.namespace()).state(&handle.nodes());
    let rows: Vec<NodeRow> = shown
        .nodes
        .iter()
        .filter(|row| added.contains(&row.id))
        .cloned()
        .collect();
    let deadline = Instant::now() + Duration::from_secs(options.ready_timeout);
    let ready = match ready_lines(&options.app, &consoles(&rows, dir), deadline).await {
        Ok(lines) => lines,
        Err(not_ready) => {
            failures.push_str(&format!("error: {not_ready}\n"));
            String::new()
        }
    };
    eprint!("{ready}{failures}");
    let text = format!("{ready}{failures}{}", shown.table());
    add_request::answer(request, failures.is_empty(), &text);
}

/// "s" unless one.
fn plural(count: u16) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

/// Each node's address and console log in `dir`.
fn consoles(rows: &[NodeRow], dir: &Path) -> Vec<(String, PathBuf)> {
    rows.iter()
        .map(|row| (row.address.clone(), console_log(dir, row.id)))
        .collect()
}

/// How often a console is read for the ready line.
const CONSOLE_POLL: Duration = Duration::from_millis(100);

/// `ebb: ADDRESS: APP: ready: ...`, a line for each console (an
/// announced node's address and console log), once every one shows its
/// ready line; or, at `deadline` or when a stop signal comes, which
/// nodes did not.
async fn ready_lines(
    app: &str,
    consoles: &[(String, PathBuf)],
    deadline: Instant,
) -> Result<String, String> {
    let needle = format!("{app}: ready:");
    loop {
        let lines: Vec<Result<String, &str>> = consoles
            .iter()
            .map(|(address, log)| ready_line(log, &needle).ok_or(address.as_str()))
            .collect();
        if lines.iter().all(Result::is_ok) {
            let shown = consoles
                .iter()
                .zip(lines.into_iter().flatten())
                .map(|((address, _), line)| format!("ebb: {address}: {line}\n"));
            return Ok(shown.collect());
        }
        if Instant::now() >= deadline || stop::received().is_some() {
            let waiting: Vec<&str> = lines.into_iter().filter_map(Result::err).collect();
            return Err(format!(
                "{} announced {} but did not print \"{needle}\" in time (see ./ebb cluster logs)",
                waiting.join(", "),
                if waiting.len() == 1 {
                    "itself"
                } else {
                    "themselves"
                },
            ));
        }
        ebb_event::sleep(CONSOLE_POLL).await;
    }
}

/// The first line of the console log at `log` holding `needle`, from
/// `needle` on.
fn ready_line(log: &Path, needle: &str) -> Option<String> {
    let console = std::fs::read(log).ok()?;
    let text = String::from_utf8_lossy(&console);
    let at = text.find(needle)?;
    Some(
        text[at..]
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_takes_a_boot_contract_when_its_manifest_says_so() {
        let root = std::env::temp_dir().join(format!("ebb-takes-contract-{}", std::process::id()));
        let app = root.join("apps/demo");
        std::fs::create_dir_all(&app).expect("mkdir");
        assert!(!takes_boot_contract(&root, "demo"));
        std::fs::write(
            app.join("Cargo.toml"),
            "[package]\nname = \"demo\"\nnode = true\n",
        )
        .expect("write");
        assert!(
            !takes_boot_contract(&root, "demo"),
            "not in [package.metadata.ebb]"
        );
        std::fs::write(
            app.join("Cargo.toml"),
            "[package]\nname = \"demo\"\n\n[package.metadata.ebb]\nnode = true\n\n[dependencies]\n",
        )
        .expect("write");
        assert!(takes_boot_contract(&root, "demo"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_ready_line_is_read_from_the_console() {
        let log = std::env::temp_dir().join(format!("ebb-ready-line-{}", std::process::id()));
        std::fs::write(&log, "boot\r\nnode 1: a member\r\n").expect("write");
        assert_eq!(ready_line(&log, "memcached: ready:"), None);
        std::fs::write(
            &log,
            "boot\r\n[t] memcached: ready: listening on 0.0.0.0:11211\r\nmore\r\n",
        )
        .expect("write");
        assert_eq!(
            ready_line(&log, "memcached: ready:").as_deref(),
            Some("memcached: ready: listening on 0.0.0.0:11211")
        );
        let _ = std::fs::remove_file(&log);
        assert_eq!(ready_line(&log, "memcached: ready:"), None);
    }
}
