//! Command-line grammar of `./ebb` (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::cluster::UpOptions;
use crate::native::{Accel, Machine};

/// `./ebb`: the single entry point of the Ebbflow repository.
#[derive(Debug, Parser)]
#[command(
    name = "ebb",
    bin_name = "./ebb",
    version,
    about = "Ebbflow: run applications, tests and benchmarks",
    after_help = "Run `./ebb` from anywhere: it installs what is missing, then runs this CLI \
                  from the repository root."
)]
pub struct Cli {
    /// What to do; without one, this help is printed.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands of `./ebb`.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Run an application from apps/ (`./ebb run hello -- ARGS`); exits with its exit code.
    Run {
        /// The application: a directory under apps/ holding a Cargo package of that name.
        app: String,
        /// Native-platform options (`--native` and friends).
        #[command(flatten)]
        native: NativeArgs,
        /// Arguments for the application (put them after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Check formatting, run lints, then all unit and integration tests (what CI runs).
    Test {
        /// Skip the formatting and lint steps: only run the tests.
        #[arg(long)]
        quick: bool,
        /// Run only these tests: `cargo test --profile test-release` arguments, after
        /// `--` (e.g. `-- -p ebb-userstack --test namespace`); default: the
        /// whole workspace.
        #[arg(last = true)]
        tests: Vec<String>,
    },
    /// Run a benchmark from bench/src/bin; without NAME, list the benchmarks.
    Bench {
        /// The benchmark: a binary of the ebb-bench package.
        name: Option<String>,
        /// Arguments for the benchmark (put them after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, requires = "name")]
        args: Vec<String>,
    },
    /// A cluster of native nodes of one application on one network (needs root):
    /// `up`, `ps`, `logs NODE`, `down`.
    Cluster {
        /// What to do with the cluster.
        #[command(subcommand)]
        action: ClusterCommand,
    },
    /// List the applications and benchmarks.
    List,
    /// Run the load generator: `./ebb loadgen -- --server HOST:PORT ...` (`-- --help` lists its options).
    Loadgen {
        /// Arguments for ebb-loadgen (put them after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `./ebb cluster ...`.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub enum ClusterCommand {
    /// Boot N native nodes of APP on one network, print the node table, run until Ctrl-C.
    ///
    /// Builds APP's native image and boots the nodes side by side on one network in a new
    /// namespace (frontend 10.96.0.1, node K at 10.96.0.K+1); a node is ready when its
    /// console says `APP: ready:`. Runs until Ctrl-C, SIGTERM or `./ebb cluster down`, then
    /// stops the nodes and deletes the namespace. Needs root (namespace, bridge, TAP devices).
    Up(UpOptions),
    /// Add N native nodes to the running cluster (`up` of an application with `node = true`).
    ///
    /// The running `./ebb cluster up` boots them as it booted the others (same cores, memory
    /// and arguments), each with its boot contract; prints their ready lines and the table.
    Add {
        /// How many nodes to add.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=253))]
        nodes: u16,
    },
    /// Print the running cluster's node table (id, address, cores, memory, state).
    Ps,
    /// Print node NODE's console (also after the cluster stopped, until the next `up`).
    Logs {
        /// The node's id (from `./ebb cluster ps`).
        node: u32,
    },
    /// Stop the running cluster: its nodes, its namespace (also after a frontend that died).
    Down,
}

/// How a native guest's virtio-net reaches the host (`--net`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum NetKind {
    /// QEMU user networking: no root, one queue; `--forward` ports to 127.0.0.1.
    #[default]
    User,
    /// A TAP device in a new network namespace (root), one queue pair per vCPU;
    /// the guest is 10.98.0.2, the host side 10.98.0.1.
    Tap,
}

/// `./ebb run APP --native [--cores N] [--mem SIZE] [--machine M] [--accel A] [-v]`.
#[derive(Debug, Default, PartialEq, Eq, Args)]
pub struct NativeArgs {
    /// Build APP as a native image and boot it under QEMU (exits with its exit code).
    #[arg(long)]
    pub native: bool,
    /// Run APP on Ebbflow's own network stack over a TAP device in a new network namespace
    /// (needs root); prints the address and how to reach it, deletes the namespace on exit.
    #[arg(long, conflicts_with = "native")]
    pub userstack: bool,
    /// Cores: QEMU's vCPUs with --native (the guest runs 1 core so far); hosted apps get
    /// `--cores N`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub cores: Option<u16>,
    /// Guest memory with --native, in QEMU's -m syntax [default: 512M].
    #[arg(long, value_name = "SIZE", requires = "native")]
    pub mem: Option<String>,
    /// QEMU machine for --native [default: q35].
    #[arg(long, value_enum, requires = "native")]
    pub machine: Option<MachineArg>,
    /// Accelerator for --native: auto is KVM where the CPU has vmx/svm, else TCG [default: auto].
    #[arg(long, value_enum, requires = "native")]
    pub accel: Option<AccelArg>,
    /// Seconds before QEMU is stopped (--native) [default: none, the guest runs until it exits
    /// or Ctrl-C; tests set one].
    #[arg(long, value_name = "SECS", requires = "native")]
    pub timeout: Option<u64>,
    /// With --native: print the build and QEMU commands and the platform's boot summary.
    #[arg(short, long, requires = "native")]
    pub verbose: bool,
    /// An extra platform option for the native kernel command line, e.g.
    /// `crash=page-fault` (see crates/ebb-native/README.md); repeatable.
    #[arg(long, value_name = "KEY[=VALUE]", requires = "native")]
    pub boot_arg: Vec<String>,
    /// With --native (q35): forward TCP port 127.0.0.1:HOST to the guest's port GUEST through
    /// QEMU user networking (`PORT` alone: the same number on both sides); repeatable.
    #[arg(long, value_name = "[HOST:]GUEST", requires = "native")]
    pub forward: Vec<String>,
    /// With --native: how the guest's virtio-net reaches the host [default: user]. `tap`
    /// creates a network namespace `ebb-APP-PID` with a TAP device (multi-queue with
    /// --cores N > 1), runs QEMU inside it, gives the guest 10.98.0.2/24, prints how to
    /// reach it (`ip netns exec NS ...`) and deletes the namespace on exit (needs root).
    #[arg(long, value_enum, value_name = "user|tap", requires = "native")]
    pub net: Option<NetKind>,
    /// With --native: one more QEMU argument (repeatable; `--qemu-arg=-device`
    /// for values starting with '-'), e.g. extra devices in tests. A `-netdev`
    /// among them replaces the default user networking (bring its virtio-net
    /// device too).
    #[arg(
        long,
        value_name = "ARG",
        requires = "native",
        allow_hyphen_values = true
    )]
    pub qemu_arg: Vec<String>,
    /// With --native: pack directory DIR for the guest; a C program finds its files and
    /// directories under `/` (directories and regular files only, at most 128 MiB packed).
    #[arg(long, value_name = "DIR", requires = "native")]
    pub files: Option<PathBuf>,
}

/// `--machine`: the QEMU machine (clap's side of [`Machine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MachineArg {
    /// PCIe, ACPI, SeaBIOS: for everything that needs devices.
    Q35,
    /// No PCI, qboot: boots fastest; for boot-only work.
    Microvm,
}

impl From<MachineArg> for Machine {
    fn from(machine: MachineArg) -> Machine {
        match machine {
            MachineArg::Q35 => Machine::Q35,
            MachineArg::Microvm => Machine::Microvm,
        }
    }
}

/// `--accel`: the QEMU accelerator (clap's side of [`Accel`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelArg {
    /// KVM where the CPU has hardware virtualization (vmx/svm) and /dev/kvm
    /// exists, TCG otherwise.
    Auto,
    /// QEMU's emulator.
    Tcg,
    /// Hardware virtualization.
    Kvm,
}

impl From<AccelArg> for Accel {
    fn from(accel: AccelArg) -> Accel {
        match accel {
            AccelArg::Auto => Accel::Auto,
            AccelArg::Tcg => Accel::Tcg,
            AccelArg::Kvm => Accel::Kvm,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Option<Command>, ErrorKind> {
        Cli::try_parse_from(std::iter::once("ebb").chain(args.iter().copied()))
            .map(|cli| cli.command)
            .map_err(|e| e.kind())
    }

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn no_arguments_means_no_command() {
        assert_eq!(parse(&[]), Ok(None));
    }

    #[test]
    fn run_takes_app_and_arguments_after_double_dash() {
        assert_eq!(
            parse(&["run", "hello", "--", "--cores", "2", "-v"]),
            Ok(Some(Command::Run {
                app: "hello".into(),
                native: NativeArgs::default(),
                args: strings(&["--cores", "2", "-v"]),
            }))
        );
    }

    #[test]
    fn run_accepts_plain_arguments_without_double_dash() {
        assert_eq!(
            parse(&["run", "hello", "a", "b"]),
            Ok(Some(Command::Run {
                app: "hello".into(),
                native: NativeArgs::default(),
                args: strings(&["a", "b"]),
            }))
        );
    }

    #[test]
    fn run_keeps_a_second_double_dash_for_the_app() {
        assert_eq!(
            parse(&["run", "hello", "--", "x", "--", "y"]),
            Ok(Some(Command::Run {
                app: "hello".into(),
                native: NativeArgs::default(),
                args: strings(&["x", "--", "y"]),
            }))
        );
    }

    #[test]
    fn run_native_options_come_before_the_app_arguments() {
        assert_eq!(
            parse(&[
                "run",
                "hello",
                "--native",
                "--cores",
                "2",
                "--mem",
                "1G",
                "--machine",
                "microvm",
                "--accel",
                "tcg",
                "--timeout",
                "5",
                "-v",
                "--boot-arg",
                "crash=ud2",
                "--",
                "--x",
            ]),
            Ok(Some(Command::Run {
                app: "hello".into(),
                native: NativeArgs {
                    native: true,
                    userstack: false,
                    cores: Some(2),
                    mem: Some("1G".into()),
                    machine: Some(MachineArg::Microvm),
                    accel: Some(AccelArg::Tcg),
                    timeout: Some(5),
                    verbose: true,
                    boot_arg: vec!["crash=ud2".into()],
                    forward: vec![],
                    net: None,
                    qemu_arg: vec![],
                    files: None,
                },
                args: strings(&["--x"]),
            }))
        );
        assert_eq!(
            parse(&["run", "hello", "--mem", "1G"]),
            Err(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            parse(&["run", "hello", "--cores", "3"]),
            Ok(Some(Command::Run {
                app: "hello".into(),
                native: NativeArgs {
                    cores: Some(3),
                    ..NativeArgs::default()
                },
                args: vec![],
            }))
        );
    }

    #[test]
    fn run_native_net_is_user_or_tap() {
        let Ok(Some(Command::Run { native, .. })) = parse(&[
            "run",
            "memcached",
            "--native",
            "--net",
            "tap",
            "--cores",
            "2",
        ]) else {
            panic!("--net tap parses");
        };
        assert_eq!(native.net, Some(NetKind::Tap));
        assert_eq!(native.cores, Some(2));
        assert_eq!(
            parse(&["run", "memcached", "--net", "tap"]),
            Err(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            parse(&["run", "memcached", "--native", "--net", "bridge"]),
            Err(ErrorKind::InvalidValue)
        );
    }

    #[test]
    fn run_userstack_is_a_hosted_option() {
        assert_eq!(
            parse(&["run", "echo", "--userstack", "--", "--udp-port", "9"]),
            Ok(Some(Command::Run {
                app: "echo".into(),
                native: NativeArgs {
                    userstack: true,
                    ..NativeArgs::default()
                },
                args: strings(&["--udp-port", "9"]),
            }))
        );
        assert_eq!(
            parse(&["run", "echo", "--userstack", "--native"]),
            Err(ErrorKind::ArgumentConflict)
        );
    }

    #[test]
    fn run_without_app_is_an_error() {
        assert_eq!(parse(&["run"]), Err(ErrorKind::MissingRequiredArgument));
    }

    #[test]
    fn test_quick_flag() {
        assert_eq!(
            parse(&["test"]),
            Ok(Some(Command::Test {
                quick: false,
                tests: vec![]
            }))
        );
        assert_eq!(
            parse(&["test", "--quick"]),
            Ok(Some(Command::Test {
                quick: true,
                tests: vec![]
            }))
        );
        assert_eq!(parse(&["test", "--fast"]), Err(ErrorKind::UnknownArgument));
        assert_eq!(
            parse(&["test", "--quick", "--", "-p", "ebb-userstack"]),
            Ok(Some(Command::Test {
                quick: true,
                tests: vec!["-p".to_owned(), "ebb-userstack".to_owned()]
            }))
        );
    }

    #[test]
    fn bench_name_is_optional_and_takes_arguments() {
        assert_eq!(
            parse(&["bench"]),
            Ok(Some(Command::Bench {
                name: None,
                args: vec![],
            }))
        );
        assert_eq!(
            parse(&["bench", "ebbref", "--", "--runs", "5"]),
            Ok(Some(Command::Bench {
                name: Some("ebbref".into()),
                args: strings(&["--runs", "5"]),
            }))
        );
    }

    #[test]
    fn loadgen_passes_its_arguments_through() {
        assert_eq!(
            parse(&["loadgen", "--", "--rate", "5000", "-p", "binary"]),
            Ok(Some(Command::Loadgen {
                args: strings(&["--rate", "5000", "-p", "binary"]),
            }))
        );
        assert_eq!(
            parse(&["loadgen"]),
            Ok(Some(Command::Loadgen { args: vec![] }))
        );
    }

    #[test]
    fn cluster_up_takes_nodes_resources_and_app_arguments() {
        assert_eq!(
            parse(&[
                "cluster", "up", "echo", "--nodes", "3", "--cores", "2", "--memory", "512M", "--",
                "--port", "7",
            ]),
            Ok(Some(Command::Cluster {
                action: ClusterCommand::Up(UpOptions {
                    app: "echo".into(),
                    nodes: 3,
                    cores: 2,
                    memory: "512M".into(),
                    ready_timeout: 120,
                    verbose: false,
                    share: None,
                    etcd: "start".into(),
                    args: strings(&["--port", "7"]),
                })
            }))
        );
        let Ok(Some(Command::Cluster {
            action: ClusterCommand::Up(up),
        })) = parse(&["cluster", "up", "echo", "--nodes", "1"])
        else {
            panic!("defaults");
        };
        assert_eq!((up.cores, up.memory.as_str(), up.share), (1, "256M", None));
        let Ok(Some(Command::Cluster {
            action: ClusterCommand::Up(up),
        })) = parse(&[
            "cluster",
            "up",
            "filecheck",
            "--nodes",
            "1",
            "--share",
            "/srv/data",
        ])
        else {
            panic!("--share");
        };
        assert_eq!(up.share, Some("/srv/data".into()));
        assert_eq!(
            parse(&["cluster", "up", "echo"]),
            Err(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            parse(&["cluster", "up", "echo", "--nodes", "0"]),
            Err(ErrorKind::ValueValidation)
        );
        assert_eq!(
            parse(&["cluster", "up", "echo", "--nodes", "254"]),
            Err(ErrorKind::ValueValidation)
        );
        assert_eq!(
            parse(&["cluster", "logs", "2"]),
            Ok(Some(Command::Cluster {
                action: ClusterCommand::Logs { node: 2 }
            }))
        );
        assert_eq!(
            parse(&["cluster", "add"]),
            Ok(Some(Command::Cluster {
                action: ClusterCommand::Add { nodes: 1 }
            }))
        );
        assert_eq!(
            parse(&["cluster", "add", "--nodes", "2"]),
            Ok(Some(Command::Cluster {
                action: ClusterCommand::Add { nodes: 2 }
            }))
        );
        assert_eq!(
            parse(&["cluster", "add", "--nodes", "0"]),
            Err(ErrorKind::ValueValidation)
        );
        assert_eq!(
            parse(&["cluster", "ps"]),
            Ok(Some(Command::Cluster {
                action: ClusterCommand::Ps
            }))
        );
        assert_eq!(
            parse(&["cluster", "down"]),
            Ok(Some(Command::Cluster {
                action: ClusterCommand::Down
            }))
        );
    }

    #[test]
    fn list_and_unknown_subcommands() {
        assert_eq!(parse(&["list"]), Ok(Some(Command::List)));
        assert_eq!(parse(&["frobnicate"]), Err(ErrorKind::InvalidSubcommand));
    }

    #[test]
    fn help_and_version_are_not_commands() {
        assert_eq!(parse(&["--help"]), Err(ErrorKind::DisplayHelp));
        assert_eq!(parse(&["--version"]), Err(ErrorKind::DisplayVersion));
    }

    #[test]
    fn grammar_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
