//! The option table rendered into a `clap::Command`, and clap's matches
//! read back into the platform-neutral [`Args`]: hosted command lines are
//! parsed by clap, native ones by [`crate::parse`], from one declaration.

use std::string::String;
use std::vec::Vec;

use clap::{Arg, ArgAction, ArgMatches, Command};

use crate::args::Args;
use crate::options::{Kind, Operands, Section};

/// The id clap knows the operands by.
const OPERANDS: &str = "operands";

/// `name`'s command: `sections`' options (headed ones under their
/// heading), the operands, clap's `-h, --help`.
#[must_use]
pub fn command(
    name: &'static str,
    about: &'static str,
    sections: &[Section],
    operands: Option<Operands>,
) -> Command {
    // A repeated option overrides the earlier one, as memcached's getopt
    // loop (and the native parser) do.
    let mut command = Command::new(name).about(about).args_override_self(true);
    if let Some(operands) = operands {
        command = command.arg(
            Arg::new(OPERANDS)
                .value_name(operands.name)
                .help(operands.help)
                .num_args(0..)
                .action(ArgAction::Append),
        );
    }
    for section in sections {
        for opt in section.options {
            let mut arg = Arg::new(opt.long).long(opt.long).help(opt.help);
            if let Some(short) = opt.short {
                arg = arg.short(short);
            }
            arg = match opt.kind {
                Kind::Flag => arg.action(ArgAction::SetTrue),
                Kind::Count => arg.action(ArgAction::Count),
                Kind::Value(value) => arg.value_name(value).action(ArgAction::Set),
            };
            if let Some(heading) = section.heading {
                arg = arg.help_heading(heading);
            }
            command = command.arg(arg);
        }
    }
    command
}

/// clap's matches as [`Args`].
#[must_use]
pub fn to_args(matches: &ArgMatches, sections: &[Section]) -> Args {
    let mut args = Args::empty(sections);
    for opt in sections.iter().flat_map(|section| section.options) {
        match opt.kind {
            Kind::Flag => {
                if matches.get_flag(opt.long) {
                    args.record(opt.long, None);
                }
            }
            Kind::Count => {
                for _ in 0..matches.get_count(opt.long) {
                    args.record(opt.long, None);
                }
            }
            Kind::Value(_) => {
                if let Some(value) = matches.get_one::<String>(opt.long) {
                    args.record(opt.long, Some(value.clone()));
                }
            }
        }
    }
    if let Ok(Some(operands)) = matches.try_get_many::<String>(OPERANDS) {
        args.set_operands(operands.cloned().collect::<Vec<_>>());
    }
    args
}

#[cfg(test)]
mod tests {
    use std::format;
    use std::string::ToString;

    use super::*;
    use crate::args::{parse, Parsed};
    use crate::options::Opt;
    use crate::{help, Operands};

    const OPTIONS: &[Opt] = &[
        Opt::value('p', "port", "PORT", "TCP port to listen on (default 11211)"),
        Opt::long_value("sink-port", "PORT", "Sink TCP port"),
        Opt::flag('C', "disable-cas", "Do not use CAS"),
        Opt::long_flag("exit-after-one", "Exit after one connection"),
        Opt::count('v', "verbose", "Verbose (repeat for more)"),
    ];
    const OPERANDS: Operands = Operands {
        name: "FILTER",
        help: "Run the tests whose names contain one of these",
    };

    /// Options under a heading of their own, as a platform's are.
    const PLATFORM: &[Opt] = &[
        Opt::long_value("cores", "N", "Number of cores"),
        Opt::long_flag("no-pin", "Do not pin cores to CPUs"),
        Opt::long_value("tap-ip", "ADDR/LEN", "Static address, e.g. 10.0.0.2/24"),
    ];

    fn sections() -> [Section; 2] {
        [
            Section {
                heading: None,
                options: OPTIONS,
            },
            Section {
                heading: Some("Platform options"),
                options: PLATFORM,
            },
        ]
    }

    fn clap_help(sections: &[Section], operands: Option<Operands>) -> String {
        command("demo", "A demo server.", sections, operands)
            .render_help()
            .to_string()
    }

    #[test]
    fn the_native_help_is_claps_help() {
        for operands in [None, Some(OPERANDS)] {
            let all = sections();
            for sections in [&all[..1], &all[..]] {
                let ours = help::render("demo", "A demo server.", sections, operands);
                assert_eq!(ours, clap_help(sections, operands));
            }
        }
    }

    /// What a parse gives, comparable across the two parsers.
    fn outcome(
        sections: &[Section],
        operands: Option<Operands>,
        argv: &[&str],
    ) -> (String, String) {
        let ours = match parse(sections, operands, argv.iter().copied()) {
            Ok(Parsed::Run(args)) => summary(sections, &args),
            Ok(Parsed::Help) => "help".to_string(),
            Err(error) => format!("error: {error}"),
        };
        let theirs = match command("demo", "", sections, operands)
            .try_get_matches_from(["demo"].iter().chain(argv))
        {
            Ok(matches) => summary(sections, &to_args(&matches, sections)),
            Err(error) if error.kind() == clap::error::ErrorKind::DisplayHelp => "help".to_string(),
            Err(error) => error
                .to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .to_string(),
        };
        (ours, theirs)
    }

    fn summary(sections: &[Section], args: &Args) -> String {
        let mut text = String::new();
        for opt in sections.iter().flat_map(|section| section.options) {
            match opt.kind {
                Kind::Value(_) => text += &format!("{}={:?} ", opt.long, args.value(opt.long)),
                _ => text += &format!("{}={} ", opt.long, args.count(opt.long)),
            }
        }
        text + &format!("{:?}", args.operands())
    }

    #[test]
    fn both_parsers_read_every_command_line_alike() {
        let cases: &[&[&str]] = &[
            &[],
            &["-p", "1"],
            &["-p1"],
            &["-p=1"],
            &["--port", "1"],
            &["--port=1", "--port", "2"],
            &["-Cvv", "-v"],
            &["-vCp", "7"],
            &["--disable-cas", "--verbose", "--sink-port=9"],
            &["--cores", "3", "--no-pin", "--tap-ip=10.0.0.2/24"],
            &["-h"],
            &["--help"],
            &["-vh"],
            &["--nope"],
            &["-x"],
            &["-p"],
            &["--port"],
            &["-p", "-v"],
            &["--disable-cas=1"],
            &["stray"],
            &["--", "-p"],
        ];
        for operands in [None, Some(OPERANDS)] {
            for sections in [&sections()[..1], &sections()[..]] {
                for argv in cases {
                    let (ours, theirs) = outcome(sections, operands, argv);
                    assert_eq!(ours, theirs, "{argv:?} with operands {operands:?}");
                }
            }
        }
        // With operands, free arguments and `--` are collected.
        let (ours, _) = outcome(&sections()[..1], Some(OPERANDS), &["a", "-v", "--", "-p"]);
        assert!(ours.ends_with(r#"["a", "-p"]"#), "{ours}");
    }

    #[test]
    fn values_that_do_not_parse_are_refused_in_claps_words() {
        let Ok(Parsed::Run(args)) = parse(&sections()[..1], None, ["-p", "x"]) else {
            panic!("parses");
        };
        assert_eq!(
            args.parse_or::<u16>("port", 1, "a port number")
                .unwrap_err()
                .0,
            "invalid value 'x' for '--port <PORT>': a port number"
        );
        assert_eq!(args.parse_or::<u16>("sink-port", 5, "a port").unwrap(), 5);
    }
}
