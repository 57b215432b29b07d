//! `./ebb cluster up APP` for an application with a **frontend program**:
//! a hosted binary that allocates the nodes itself and drives them over
//! the Messenger (`ebb_cluster::frontend::run_frontend`).
//!
//! An application has one when `apps/APP/frontend/Cargo.toml` is a
//! package named `APP-frontend` (its binary has the same name). A package
//! of its own rather than a `[[bin]]` beside the node program: the node
//! program's package is built for `x86_64-unknown-none`, where a std
//! binary using `ebb-cluster` cannot compile, and cargo builds every
//! binary of a package for the target (the native lint step does).
//!
//! `up` builds the native image and the frontend program (hosted,
//! release), then runs it with `--image PATH --nodes N --cores C --memory
//! M --ready-timeout SECS --log-dir target/cluster --state-dir
//! target/cluster --etcd start|none|HOST:PORT [--share DIR] [-v] -- ARGS`
//! (`ebb_cluster::frontend::FrontendArgs`),
//! passing SIGINT and SIGTERM on, and exits with its exit code. The
//! program's runtime keeps the state file, so `ps`, `logs` and `down`
//! see its cluster (`down` stops the program, which stops its nodes).

use std::path::Path;
use std::process::Command;

use super::UpOptions;
use crate::child;

/// The frontend program's package name for `app`, if `app` has one.
pub fn package(root: &Path, app: &str) -> Option<String> {
    let name = format!("{app}-frontend");
    let manifest = root.join("apps").join(app).join("frontend/Cargo.toml");
    let manifest = std::fs::read_to_string(manifest).ok()?;
    manifest
        .lines()
        .any(|line| {
            line.split_once('=').is_some_and(|(key, value)| {
                key.trim() == "name" && value.trim().trim_matches('"') == name
            })
        })
        .then_some(name)
}

/// The frontend program's command line.
pub fn command(binary: &Path, options: &UpOptions, image: &Path, log_dir: &Path) -> Command {
    let mut command = Command::new(binary);
    command
        .arg("--image")
        .arg(image)
        .args(["--nodes", &options.nodes.to_string()])
        .args(["--cores", &options.cores.to_string()])
        .args(["--memory", &options.memory])
        .args(["--ready-timeout", &options.ready_timeout.to_string()])
        .arg("--log-dir")
        .arg(log_dir)
        .arg("--state-dir")
        .arg(log_dir)
        .args(["--etcd", &options.etcd]);
    if let Some(share) = &options.share {
        command.arg("--share").arg(share);
    }
    if options.verbose {
        command.arg("-v");
    }
    if !options.args.is_empty() {
        command.arg("--").args(&options.args);
    }
    command
}

/// Builds the frontend program `package` and runs it (see the module
/// documentation); its exit code.
pub fn run(
    root: &Path,
    package: &str,
    options: &UpOptions,
    image: &Path,
    log_dir: &Path,
) -> Result<u8, String> {
    let binary = match child::build_hosted(root, package)? {
        child::Built::Binary(binary) => binary,
        child::Built::Stopped(code) => return Ok(code),
    };
    let mut frontend = command(&binary, options, image, log_dir);
    if options.verbose {
        eprintln!("ebb: {}", child::describe(&frontend));
    }
    child::run(&mut frontend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_has_a_frontend_program_when_its_frontend_package_is_named_after_it() {
        let root =
            std::env::temp_dir().join(format!("ebb-frontend-program-{}", std::process::id()));
        let dir = root.join("apps/demo/frontend");
        std::fs::create_dir_all(&dir).expect("mkdir");
        assert_eq!(package(&root, "demo"), None);
        std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"other\"\n").expect("write");
        assert_eq!(package(&root, "demo"), None);
        std::fs::write(
            dir.join("Cargo.toml"),
            "[package]\nname = \"demo-frontend\"\n",
        )
        .expect("write");
        assert_eq!(package(&root, "demo"), Some("demo-frontend".to_owned()));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_frontend_program_gets_the_nodes_shape_and_the_apps_arguments() {
        let options = UpOptions {
            app: "demo".to_owned(),
            nodes: 3,
            cores: 2,
            memory: "512M".to_owned(),
            ready_timeout: 60,
            verbose: true,
            share: Some("/srv/data".into()),
            etcd: "start".to_owned(),
            args: vec!["--rounds".to_owned(), "2".to_owned()],
        };
        let words = crate::native::shell_words(&command(
            Path::new("/t/release/demo-frontend"),
            &options,
            Path::new("/img"),
            Path::new("/logs"),
        ));
        assert_eq!(
            words,
            "/t/release/demo-frontend --image /img --nodes 3 --cores 2 --memory 512M \
             --ready-timeout 60 --log-dir /logs --state-dir /logs --etcd start --share /srv/data \
             -v -- --rounds 2"
        );
    }
}
