//! The parsed command line, the same type on every platform, and the
//! `no_std` parser native images use (hosted parses with clap and fills
//! the same [`Args`], `hosted/clap_command.rs`).
//!
//! The grammar is clap's for the option kinds of [`crate::Opt`]:
//! `--long VALUE`, `--long=VALUE`, `-s VALUE`, `-sVALUE`, `-s=VALUE`,
//! clustered switches (`-Cvv`), `--` ending the options, a repeated option
//! overriding the earlier one (clap's `args_override_self`). Errors read as
//! clap's do, so a user sees the same sentence on every platform.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::str::FromStr;

use crate::options::{Kind, Operands, Opt, Section};

/// A command line the application cannot run with: printed with the
/// usage line, exit code [`crate::exit::USAGE`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One option's occurrences.
#[derive(Clone, Debug)]
struct Entry {
    opt: Opt,
    count: u32,
    value: Option<String>,
}

/// The parsed command line: every declared option (the application's and
/// the platform's) and the operands.
#[derive(Clone, Debug, Default)]
pub struct Args {
    entries: Vec<Entry>,
    operands: Vec<String>,
}

impl Args {
    /// No option given yet, for every option of `sections`.
    pub(crate) fn empty(sections: &[Section]) -> Args {
        Args {
            entries: sections
                .iter()
                .flat_map(|section| section.options)
                .map(|&opt| Entry {
                    opt,
                    count: 0,
                    value: None,
                })
                .collect(),
            operands: Vec::new(),
        }
    }

    fn entry(&self, id: &str) -> &Entry {
        self.entries
            .iter()
            .find(|entry| entry.opt.is(id))
            .unwrap_or_else(|| panic!("no option '{id}' is declared"))
    }

    fn entry_mut(&mut self, id: &str) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|entry| entry.opt.is(id))
    }

    /// Records one occurrence of option `id` (the hosted clap bridge).
    pub(crate) fn record(&mut self, id: &str, value: Option<String>) {
        if let Some(entry) = self.entry_mut(id) {
            entry.count += 1;
            if value.is_some() {
                entry.value = value;
            }
        }
    }

    /// Records the operands (the hosted clap bridge).
    #[cfg_attr(target_os = "none", allow(dead_code))]
    pub(crate) fn set_operands(&mut self, operands: Vec<String>) {
        self.operands = operands;
    }

    /// Whether switch `id` (its long name) was given.
    ///
    /// # Panics
    ///
    /// If no option `id` is declared (a programming error).
    #[must_use]
    pub fn flag(&self, id: &str) -> bool {
        self.entry(id).count > 0
    }

    /// How often switch `id` was given (`-vv`: 2).
    ///
    /// # Panics
    ///
    /// If no option `id` is declared.
    #[must_use]
    pub fn count(&self, id: &str) -> u32 {
        self.entry(id).count
    }

    /// The value of option `id` (the last one given), if any.
    ///
    /// # Panics
    ///
    /// If no option `id` is declared.
    #[must_use]
    pub fn value(&self, id: &str) -> Option<&str> {
        self.entry(id).value.as_deref()
    }

    /// The value of `id` parsed as `T`, `default` when absent; a value
    /// that does not parse is a [`UsageError`] saying `expected`.
    ///
    /// # Errors
    ///
    /// The value does not parse.
    pub fn parse_or<T: FromStr>(
        &self,
        id: &str,
        default: T,
        expected: &str,
    ) -> Result<T, UsageError> {
        match self.value(id) {
            None => Ok(default),
            Some(text) => text.parse().map_err(|_| self.invalid(id, text, expected)),
        }
    }

    /// The error for value `text` of option `id`: clap's sentence.
    #[must_use]
    pub fn invalid(&self, id: &str, text: &str, expected: &str) -> UsageError {
        UsageError(format!(
            "invalid value '{text}' for '{}': {expected}",
            self.entry(id).opt.spec()
        ))
    }

    /// The operands, in order.
    #[must_use]
    pub fn operands(&self) -> &[String] {
        &self.operands
    }
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed {
    /// Run with these arguments.
    Run(Args),
    /// Print the help and exit 0.
    Help,
}

/// Parses `argv` (without the program name) against `sections`, with
/// free operands if `operands` is given.
///
/// # Errors
///
/// An unknown option, a missing or unexpected value, or an operand where
/// none is accepted: the error says which, in clap's words.
pub fn parse<'a>(
    sections: &[Section],
    operands: Option<Operands>,
    argv: impl IntoIterator<Item = &'a str>,
) -> Result<Parsed, UsageError> {
    let mut args = Args::empty(sections);
    let find = |matches: &dyn Fn(&Opt) -> bool| {
        sections
            .iter()
            .flat_map(|section| section.options)
            .find(|opt| matches(opt))
            .copied()
    };
    let mut argv = argv.into_iter();
    let mut only_operands = false;
    while let Some(arg) = argv.next() {
        if only_operands || arg == "-" || !arg.starts_with('-') {
            if operands.is_none() {
                return Err(unexpected(arg));
            }
            args.operands.push(arg.to_string());
            continue;
        }
        if arg == "--" {
            only_operands = true;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            if name == "help" {
                return Ok(Parsed::Help);
            }
            let opt =
                find(&|opt| opt.long == name).ok_or_else(|| unexpected(&format!("--{name}")))?;
            take(&mut args, opt, inline, &mut argv)?;
            continue;
        }
        // A cluster of short switches, the last of which may take a value.
        let mut rest = &arg[1..];
        while let Some(letter) = rest.chars().next() {
            rest = &rest[letter.len_utf8()..];
            if letter == 'h' {
                return Ok(Parsed::Help);
            }
            let opt = find(&|opt| opt.short == Some(letter))
                .ok_or_else(|| unexpected(&format!("-{letter}")))?;
            if let Kind::Value(_) = opt.kind {
                let inline = (!rest.is_empty()).then(|| rest.strip_prefix('=').unwrap_or(rest));
                take(&mut args, opt, inline, &mut argv)?;
                break;
            }
            take(&mut args, opt, None, &mut argv)?;
        }
    }
    Ok(Parsed::Run(args))
}

/// Records `opt` with its value: `inline` or the next argument.
fn take<'a>(
    args: &mut Args,
    opt: Opt,
    inline: Option<&str>,
    argv: &mut impl Iterator<Item = &'a str>,
) -> Result<(), UsageError> {
    let value = match (opt.kind, inline) {
        (Kind::Value(_), Some(value)) => Some(value.to_string()),
        (Kind::Value(_), None) => match argv.next() {
            Some(value) if !value.starts_with('-') || value == "-" => Some(value.to_string()),
            _ => {
                return Err(UsageError(format!(
                    "a value is required for '{}' but none was supplied",
                    opt.spec()
                )))
            }
        },
        (_, Some(value)) => {
            return Err(UsageError(format!(
                "unexpected value '{value}' for '{}' found; no more were expected",
                opt.spec()
            )))
        }
        (_, None) => None,
    };
    args.record(opt.long, value);
    Ok(())
}

fn unexpected(arg: &str) -> UsageError {
    UsageError(format!("unexpected argument '{arg}' found"))
}
