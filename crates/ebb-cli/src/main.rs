//! `ebb-cli`: the Ebbflow command line behind the `./ebb` script.
//!
//! `./ebb` installs what is missing and then runs this binary with
//! `EBB_ROOT` set to the repository root. Subcommands: `run APP`, `test`,
//! `bench NAME`, `cluster`, `list`, `loadgen` (see `./ebb --help`).

mod caller_dir;
mod cli;
mod root;
mod steps;
mod test_summary;
mod userstack;

use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode};

use clap::{CommandFactory, Parser};

use cli::{Cli, Command};
use ebb_cli::{c_apps, child, cluster, native, packed_files, stop, tap};

/// Exit code for a name that is not an application or benchmark.
const EXIT_UNKNOWN_NAME: u8 = 2;
/// Exit code for any other error of this CLI (not of a child).
const EXIT_ERROR: u8 = 1;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        let mut help = Cli::command();
        println!("{}", help.render_help());
        return ExitCode::SUCCESS;
    };
    let starts: Vec<PathBuf> = [
        std::env::current_dir().ok(),
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf)),
    ]
    .into_iter()
    .flatten()
    .collect();
    let root = match root::find_root(std::env::var_os("EBB_ROOT"), &starts) {
        Ok(root) => root,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    match dispatch(command, &root) {
        Ok(code) => ExitCode::from(code),
        Err((code, message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

/// Runs `command`; `Ok` carries the exit code to return (a child's), `Err` an
/// exit code and a message for the user.
fn dispatch(command: Command, root: &Path) -> Result<u8, (u8, String)> {
    match command {
        Command::Run {
            app,
            native: options,
            args,
        } if c_apps::is_c_app(&app) => {
            if let Some(why) = c_apps::not_native(&app).filter(|_| options.native) {
                return Err((
                    EXIT_ERROR,
                    format!("'{app}' does not run with --native yet: {why}"),
                ));
            }
            stop::watch(&[stop::SIGTERM, stop::SIGINT]);
            if options.userstack {
                let binary = c_apps::build_userstack(root, &app).map_err(|e| (EXIT_ERROR, e))?;
                let args = c_apps::native_args(&app, &args);
                let reach = c_apps::userstack_reach(&args);
                return userstack::run_c_program(&app, &binary, &args, &reach)
                    .map_err(|e| (EXIT_ERROR, e));
            }
            let built = c_apps::build(root, &app).map_err(|e| (EXIT_ERROR, e))?;
            if !options.native {
                return c_apps::run_hosted(&app, &built, &args).map_err(|e| (EXIT_ERROR, e));
            }
            // The native image's build script reads the program to link
            // from the environment, which cargo passes on. Set before any
            // thread of ours reads the environment (`stop::watch` only
            // registers signal flags; it starts no thread).
            std::env::set_var(c_apps::LINK_ENV, &built.native_inputs);
            let mut settings = native_settings(&options);
            let _packed = pack_files(root, &options, &mut settings)?;
            let args = c_apps::native_args(&app, &args);
            match options.net.unwrap_or_default() {
                cli::NetKind::User => native::run(root, c_apps::IMAGE, &settings, &args),
                cli::NetKind::Tap => tap::run(root, c_apps::IMAGE, &settings, &args),
            }
            .map_err(|e| (EXIT_ERROR, e))
        }
        Command::Run {
            app,
            native: options,
            mut args,
        } => {
            require_app(root, &app)?;
            stop::watch(&[stop::SIGTERM, stop::SIGINT]);
            if options.native {
                if options.files.is_some() && app != c_apps::IMAGE {
                    return Err((
                        EXIT_ERROR,
                        format!(
                            "--files is for C programs ({}, {}): '{app}' has no file system to fill",
                            c_apps::C_APPS.join(", "),
                            c_apps::IMAGE
                        ),
                    ));
                }
                let mut settings = native_settings(&options);
                let _packed = pack_files(root, &options, &mut settings)?;
                return match options.net.unwrap_or_default() {
                    cli::NetKind::User => native::run(root, &app, &settings, &args),
                    cli::NetKind::Tap => tap::run(root, &app, &settings, &args),
                }
                .map_err(|e| (EXIT_ERROR, e));
            }
            if let Some(cores) = options.cores {
                // Hosted applications take the core count themselves.
                args.splice(0..0, ["--cores".to_owned(), cores.to_string()]);
            }
            if options.userstack {
                if options.cores.is_none() {
                    // The user-space stack serves one TAP queue from core 0.
                    args.splice(0..0, ["--cores".to_owned(), "1".to_owned()]);
                }
                return userstack::run(root, &app, &args).map_err(|e| (EXIT_ERROR, e));
            }
            eprintln!("ebb: building {app} (release, hosted)...");
            // `cargo run` execs the application: the signal passed on
            // reaches it, and it exits 128 + the signal too.
            let code = child::run(&mut cargo_run(root, &["-p", &app], &args))
                .map_err(|e| (EXIT_ERROR, e))?;
            Ok(stop::report(&app).unwrap_or(code))
        }
        Command::Test { quick, tests } => {
            // Each step is stopped with its process group (the counted
            // steps' test binaries and servers too: `test_summary`).
            stop::watch(&[stop::SIGTERM, stop::SIGINT]);
            Ok(steps::run_all(steps::STEPS, root, quick, &tests))
        }
        Command::Bench { name: None, .. } => {
            println!("benchmarks: {}", root::join_names(&root::benches(root)));
            println!("run one with: ./ebb bench NAME [-- ARGS]");
            Ok(0)
        }
        Command::Bench {
            name: Some(name),
            args,
        } => {
            if !root::is_bench(root, &name) {
                return Err((
                    EXIT_UNKNOWN_NAME,
                    format!(
                        "no benchmark '{name}'; available: {}",
                        root::join_names(&root::benches(root))
                    ),
                ));
            }
            stop::watch(&[stop::SIGTERM, stop::SIGINT]);
            child::run(&mut cargo_run(
                root,
                &[
                    "-p",
                    "ebb-bench",
                    "--bin",
                    &format!("{}{name}", root::BENCH_BINARY_PREFIX),
                ],
                &args,
            ))
            .map_err(|e| (EXIT_ERROR, e))
        }
        Command::Loadgen { args } => {
            stop::watch(&[stop::SIGTERM, stop::SIGINT]);
            child::run(&mut cargo_run(root, &["-p", "ebb-loadgen"], &args))
                .map_err(|e| (EXIT_ERROR, e))
        }
        Command::Cluster { action } => cluster_command(action, root),
        Command::List => {
            println!("applications: {}", root::join_names(&root::apps(root)));
            println!("C programs:   {}", c_apps::C_APPS.join(", "));
            println!("benchmarks:   {}", root::join_names(&root::benches(root)));
            Ok(0)
        }
    }
}

/// `Ok` if `app` is an application under apps/; else exit code 2 and the
/// names there are.
fn require_app(root: &Path, app: &str) -> Result<(), (u8, String)> {
    if root::is_app(root, app) {
        return Ok(());
    }
    Err((
        EXIT_UNKNOWN_NAME,
        format!(
            "no application '{app}'; available: {} (C programs: {})",
            root::join_names(&root::apps(root)),
            c_apps::C_APPS.join(", ")
        ),
    ))
}

/// `./ebb cluster ...`.
fn cluster_command(action: cli::ClusterCommand, root: &Path) -> Result<u8, (u8, String)> {
    let result = match action {
        cli::ClusterCommand::Up(mut options) => {
            require_app(root, &options.app)?;
            // Relative to where the user ran ./ebb, not the repository
            // root the script changed to.
            let caller = caller_dir::caller_dir();
            options.share = options
                .share
                .map(|share| caller_dir::from_caller(&share, caller.as_deref()));
            // Caught: `up` outlives the signal to stop its nodes and
            // delete its namespace. SIGHUP (its terminal closed) and
            // SIGQUIT (Ctrl-\) too: by default they would end it and
            // leave the namespace, bridge and TAP devices behind.
            stop::watch(&[stop::SIGTERM, stop::SIGINT, stop::SIGHUP, stop::SIGQUIT]);
            cluster::up(root, &options)
        }
        cli::ClusterCommand::Add { nodes } => cluster::add(root, nodes),
        cli::ClusterCommand::Ps => cluster::ps(root),
        cli::ClusterCommand::Logs { node } => cluster::logs(root, node),
        cli::ClusterCommand::Down => cluster::down(root),
    };
    result.map_err(|e| (EXIT_ERROR, e))
}

/// `--files DIR`: packs DIR and hands it to the guest (kept until the
/// run ends).
fn pack_files(
    root: &Path,
    options: &cli::NativeArgs,
    settings: &mut native::Settings,
) -> Result<Option<packed_files::PackedFiles>, (u8, String)> {
    let Some(dir) = &options.files else {
        return Ok(None);
    };
    let scratch = root.join("target").join("native");
    packed_files::attach(dir, &scratch, settings)
        .map(Some)
        .map_err(|e| (EXIT_ERROR, e))
}

/// The settings of a `--native` run from its command-line options.
fn native_settings(options: &cli::NativeArgs) -> native::Settings {
    let defaults = native::Settings::default();
    native::Settings {
        cores: options.cores.map_or(defaults.cores, usize::from),
        mem: options.mem.clone().unwrap_or(defaults.mem),
        machine: options.machine.map_or(defaults.machine, Into::into),
        accel: options.accel.map_or(defaults.accel, Into::into),
        timeout: options.timeout.unwrap_or(defaults.timeout),
        verbose: options.verbose,
        boot_args: options.boot_arg.clone(),
        forwards: options.forward.clone(),
        qemu_args: options.qemu_arg.clone(),
        ..defaults
    }
}

/// `cargo run --release SELECT... -- ARGS...` in `root`, with `EBB_ROOT` set.
fn cargo_run(root: &Path, select: &[&str], args: &[String]) -> Process {
    let mut c = Process::new("cargo");
    c.args(["run", "--release"])
        .args(select)
        .arg("--")
        .args(args)
        .current_dir(root)
        .env("EBB_ROOT", root);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use root::tests::TempDir;

    fn args_of(c: &Process) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn cargo_run_builds_the_documented_command() {
        let dir = TempDir::new("cargo-run");
        let c = cargo_run(&dir.0, &["-p", "hello"], &["--x".into(), "y".into()]);
        assert_eq!(c.get_program(), "cargo");
        assert_eq!(
            args_of(&c),
            ["run", "--release", "-p", "hello", "--", "--x", "y"]
        );
        assert_eq!(c.get_current_dir(), Some(dir.0.as_path()));
        assert!(c
            .get_envs()
            .any(|(k, v)| k == "EBB_ROOT" && v == Some(dir.0.as_os_str())));
    }

    #[test]
    fn unknown_names_exit_2_with_the_available_names() {
        let dir = TempDir::new("unknown");
        std::fs::create_dir_all(dir.0.join("apps/hello")).expect("mkdir");
        std::fs::write(dir.0.join("apps/hello/Cargo.toml"), "").expect("write");
        std::fs::create_dir_all(dir.0.join("bench/src/bin")).expect("mkdir");
        std::fs::write(dir.0.join("bench/src/bin/bench-ebbref.rs"), "").expect("write");
        assert_eq!(
            dispatch(
                Command::Run {
                    app: "nope".into(),
                    native: cli::NativeArgs::default(),
                    args: vec![]
                },
                &dir.0
            ),
            Err((
                2,
                "no application 'nope'; available: hello (C programs: speedtest1, sqlite-kv, redis)"
                    .to_owned()
            ))
        );
        assert_eq!(
            dispatch(
                Command::Bench {
                    name: Some("../x".into()),
                    args: vec![]
                },
                &dir.0
            ),
            Err((2, "no benchmark '../x'; available: ebbref".to_owned()))
        );
        assert_eq!(
            dispatch(
                Command::Bench {
                    name: None,
                    args: vec![]
                },
                &dir.0
            ),
            Ok(0)
        );
        assert_eq!(dispatch(Command::List, &dir.0), Ok(0));
    }

    #[test]
    fn loadgen_runs_the_ebb_loadgen_package() {
        let dir = TempDir::new("loadgen");
        let c = cargo_run(
            &dir.0,
            &["-p", "ebb-loadgen"],
            &["--rate".into(), "10".into()],
        );
        assert_eq!(
            args_of(&c),
            [
                "run",
                "--release",
                "-p",
                "ebb-loadgen",
                "--",
                "--rate",
                "10"
            ]
        );
    }
}
