//! Command-line grammar of `./ebb` (clap derive).

use clap::{Parser, Subcommand};

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
        /// Arguments for the application (put them after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Check formatting, run lints, then all unit and integration tests (what CI runs).
    Test {
        /// Skip the formatting and lint steps: only run the tests.
        #[arg(long)]
        quick: bool,
    },
    /// Run a benchmark from bench/src/bin; without NAME, list the benchmarks.
    Bench {
        /// The benchmark: a binary of the ebb-bench package.
        name: Option<String>,
        /// Arguments for the benchmark (put them after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, requires = "name")]
        args: Vec<String>,
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
                args: strings(&["x", "--", "y"]),
            }))
        );
    }

    #[test]
    fn run_without_app_is_an_error() {
        assert_eq!(parse(&["run"]), Err(ErrorKind::MissingRequiredArgument));
    }

    #[test]
    fn test_quick_flag() {
        assert_eq!(parse(&["test"]), Ok(Some(Command::Test { quick: false })));
        assert_eq!(
            parse(&["test", "--quick"]),
            Ok(Some(Command::Test { quick: true }))
        );
        assert_eq!(parse(&["test", "--fast"]), Err(ErrorKind::UnknownArgument));
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
