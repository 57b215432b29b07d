//! `./ebb cluster up APP` for an application whose nodes join a
//! distributed application (they take a boot contract: echo does,
//! memcached does not) and that has no frontend program of its own.
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
//! the namespace), and a node lost is lost to the Messenger too. The
//! runtime keeps the state file as `up` does for other applications, so
//! `ps`, `logs` and `down` work the same.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ebb_cluster::frontend::{run_frontend, FrontendOptions, MapChoice, DEFAULT_MESSENGER_PORT};

use super::state::Recorder;
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
        say_ready(&shown);
        while stop::received().is_none() {
            ebb_event::sleep(WATCH).await;
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
}
