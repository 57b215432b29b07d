//! The help text and the usage line, rendered from the option table the
//! way clap renders its default help (clap 4's `HelpTemplate`: `-s, --long
//! <VALUE>` columns aligned two spaces past the longest, `-h, --help`
//! last under `Options:`, other headings after it). Native images print
//! this; hosted prints clap's own, and `hosted::clap_command`'s tests check
//! that the two are the same text.

use alloc::format;
use alloc::string::String;
use core::fmt::Write;

use crate::options::{Kind, Operands, Opt, Section};

/// clap's automatic `-h, --help`.
const HELP: Opt = Opt {
    short: Some('h'),
    long: "help",
    kind: Kind::Flag,
    help: "Print help",
};

/// `Usage: NAME [OPTIONS] [FILTER]...`.
#[must_use]
pub fn usage(name: &str, operands: Option<Operands>) -> String {
    let mut line = format!("Usage: {name} [OPTIONS]");
    if let Some(operands) = operands {
        let _ = write!(line, " [{}]...", operands.name);
    }
    line
}

/// The whole `--help` text, ending in a newline.
#[must_use]
pub fn render(name: &str, about: &str, sections: &[Section], operands: Option<Operands>) -> String {
    let mut text = String::new();
    if !about.is_empty() {
        let _ = writeln!(text, "{about}\n");
    }
    let _ = writeln!(text, "{}\n", usage(name, operands));
    if let Some(operands) = operands {
        let spec = format!("[{}]...", operands.name);
        let _ = writeln!(text, "Arguments:");
        let longest = spec.len().max(2);
        let _ = writeln!(text, "  {spec:longest$}  {}\n", operands.help);
    }
    // The application's options and `--help` under `Options:`, then each
    // headed section.
    let untitled = sections
        .iter()
        .filter(|section| section.heading.is_none())
        .flat_map(|section| section.options.iter())
        .chain([&HELP]);
    write_block(&mut text, "Options", untitled);
    for section in sections.iter().filter(|section| section.heading.is_some()) {
        text.push('\n');
        write_block(
            &mut text,
            section.heading.unwrap_or_default(),
            section.options.iter(),
        );
    }
    text
}

/// One heading and its options, aligned as clap aligns them.
fn write_block<'a>(
    text: &mut String,
    heading: &str,
    options: impl Iterator<Item = &'a Opt> + Clone,
) {
    // clap's width: the spec (`--long <VALUE>`) plus 4 for `-s, `.
    let width = |opt: &Opt| format!("{}", opt.spec()).len() + 4;
    let longest = options.clone().map(width).max().unwrap_or(0).max(2);
    let _ = writeln!(text, "{heading}:");
    for opt in options {
        let mut line = String::from("  ");
        match opt.short {
            Some(short) => {
                let _ = write!(line, "-{short}, ");
            }
            None => line.push_str("    "),
        }
        let _ = write!(line, "{}", opt.spec());
        let column = longest + 4;
        let _ = writeln!(text, "{line:column$}{}", opt.help);
    }
}
