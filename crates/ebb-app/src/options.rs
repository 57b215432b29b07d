//! Options declared once: a table of [`Opt`]s that every platform reads.
//! Hosted renders it into a `clap::Command` (`hosted/clap_command.rs`);
//! native parses it with [`crate::parse`] and prints [`crate::help`]'s
//! text, which a host test checks is byte for byte clap's.

/// What an option takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A switch: present or not.
    Flag,
    /// A switch that counts its occurrences (`-v`, `-vv`).
    Count,
    /// One value, named as in the help (`--port <PORT>`). Given twice, the
    /// last one wins, as memcached's getopt loop does.
    Value(&'static str),
}

/// One command-line option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opt {
    /// `-p`.
    pub short: Option<char>,
    /// `--port`; also the option's id. Every option has one (the help's
    /// column layout and clap's ids rely on it).
    pub long: &'static str,
    /// Flag, count or value.
    pub kind: Kind,
    /// One line of help (keep it short: the text is not wrapped).
    pub help: &'static str,
}

impl Opt {
    /// `-s, --long <VALUE>`.
    #[must_use]
    pub const fn value(
        short: char,
        long: &'static str,
        value: &'static str,
        help: &'static str,
    ) -> Opt {
        Opt {
            short: Some(short),
            long,
            kind: Kind::Value(value),
            help,
        }
    }

    /// `--long <VALUE>`.
    #[must_use]
    pub const fn long_value(long: &'static str, value: &'static str, help: &'static str) -> Opt {
        Opt {
            short: None,
            long,
            kind: Kind::Value(value),
            help,
        }
    }

    /// `-s, --long`.
    #[must_use]
    pub const fn flag(short: char, long: &'static str, help: &'static str) -> Opt {
        Opt {
            short: Some(short),
            long,
            kind: Kind::Flag,
            help,
        }
    }

    /// `--long`.
    #[must_use]
    pub const fn long_flag(long: &'static str, help: &'static str) -> Opt {
        Opt {
            short: None,
            long,
            kind: Kind::Flag,
            help,
        }
    }

    /// `-s, --long`, counted.
    #[must_use]
    pub const fn count(short: char, long: &'static str, help: &'static str) -> Opt {
        Opt {
            short: Some(short),
            long,
            kind: Kind::Count,
            help,
        }
    }

    /// Whether `id` names this option (its long name).
    #[must_use]
    pub fn is(&self, id: &str) -> bool {
        self.long == id
    }

    /// How the help and the errors name it: `--port <PORT>`, `--verbose...`.
    pub(crate) fn spec(&self) -> Spec {
        Spec(*self)
    }
}

/// [`Opt::spec`]'s text.
pub(crate) struct Spec(Opt);

impl core::fmt::Display for Spec {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "--{}", self.0.long)?;
        match self.0.kind {
            Kind::Value(name) => write!(f, " <{name}>"),
            // clap marks a switch that may repeat.
            Kind::Count => f.write_str("..."),
            Kind::Flag => Ok(()),
        }
    }
}

/// Options under one heading of the help (`Options:`, `Platform options:`).
#[derive(Clone, Copy, Debug)]
pub struct Section {
    /// The heading, without the colon; `None` for the application's own,
    /// which the help lists under `Options:`.
    pub heading: Option<&'static str>,
    /// The options, in help order.
    pub options: &'static [Opt],
}

/// Free arguments after the options (`native-tests`' test filters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operands {
    /// Their name in the help (`FILTER`).
    pub name: &'static str,
    /// One line of help.
    pub help: &'static str,
}
