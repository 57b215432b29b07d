//! The command line and environment of a distributed application's
//! nodes (issue 17): `./ebb cluster up APP -- ARGS` reaches every node.
//!
//! The hosted node (the frontend) holds the application's arguments (the
//! words after `--`) and its environment, and serves them on every core
//! as the reserved Ebb [`COMMAND_LINE_EBB`]: message [`ARGS`] answers the
//! arguments, [`ENVIRONMENT`] the environment. A node fetches both once
//! ([`load`]) and reads them from then on without asking
//! ([`command_line`]), whatever its platform: a native node has no other
//! way to them than its kernel command line, which cannot carry spaces,
//! empty words or much length, and an environment not at all.
//!
//! **Which environment.** Only the variables whose names start with
//! [`ENV_PREFIX`] (`EBB_APP_`) are served ([`forwarded`]): whoever
//! reaches the frontend's Messenger port may ask, and a shell's
//! environment holds what no node should get (credentials, agent
//! sockets, `SUDO_*`). An application names its settings `EBB_APP_...`.
//!
//! Layouts (`docs/messenger.md`, "Command line and environment"): the
//! reply's payload is a `u32` count, then each argument (a `u32` length
//! and UTF-8), or each variable (name, then value); the request is
//! empty.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use ebb_core::{EbbError, EbbId, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use spin::Once;

use crate::bound::within;
use crate::layout::{LayoutError, Reader, Writer};
use crate::{
    Answer, Message, MessageNumber, MessengerError, MessengerRef, Request, ServiceError,
    FRONTEND_NODE,
};

/// The hosted node's command line service (a reserved id, the same in
/// every build).
pub const COMMAND_LINE_EBB: EbbId = EbbId::reserved(25);
/// Its message: the application's arguments.
pub const ARGS: MessageNumber = MessageNumber(1);
/// Its message: the application's environment.
pub const ENVIRONMENT: MessageNumber = MessageNumber(2);
/// The refusal code of a request that is not empty.
pub const COMMAND_LINE_MALFORMED: u32 = 1;
/// The prefix of the environment variables the nodes get.
pub const ENV_PREFIX: &str = "EBB_APP_";
/// How long [`load`] waits for each reply.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether variable `name` is served to the nodes.
#[must_use]
pub fn forwarded(name: &str) -> bool {
    name.len() > ENV_PREFIX.len() && name.starts_with(ENV_PREFIX)
}

/// An application's arguments and environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandLine {
    /// The arguments, as given after `--`.
    pub args: Vec<String>,
    /// The forwarded variables, by name.
    pub env: Vec<(String, String)>,
}

impl CommandLine {
    /// `args`, and those of `env` that are [`forwarded`], sorted by name.
    #[must_use]
    pub fn new(args: Vec<String>, env: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut env: Vec<_> = env
            .into_iter()
            .filter(|(name, _)| forwarded(name))
            .collect();
        env.sort();
        env.dedup_by(|a, b| a.0 == b.0);
        CommandLine { args, env }
    }

    /// Variable `name`'s value, if it was forwarded.
    #[must_use]
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.as_str())
    }

    /// The reply to [`ARGS`].
    #[must_use]
    pub fn encode_args(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.u32(count(self.args.len()));
        for arg in &self.args {
            out.str(arg);
        }
        out.finish()
    }

    /// The reply to [`ENVIRONMENT`].
    #[must_use]
    pub fn encode_env(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.u32(count(self.env.len()));
        for (name, value) in &self.env {
            out.str(name).str(value);
        }
        out.finish()
    }

    /// Decodes the reply to [`ARGS`].
    ///
    /// # Errors
    ///
    /// [`LayoutError`]: not that layout exactly.
    pub fn decode_args(payload: &[u8]) -> Result<Vec<String>, LayoutError> {
        let mut r = Reader::new(payload);
        let count = r.count("arguments", 4)?;
        let mut args = Vec::new();
        for _ in 0..count {
            args.push(r.string("argument")?);
        }
        r.end()?;
        Ok(args)
    }

    /// Decodes the reply to [`ENVIRONMENT`].
    ///
    /// # Errors
    ///
    /// [`LayoutError`]: not that layout exactly.
    pub fn decode_env(payload: &[u8]) -> Result<Vec<(String, String)>, LayoutError> {
        let mut r = Reader::new(payload);
        let count = r.count("variables", 8)?;
        let mut env = Vec::new();
        for _ in 0..count {
            env.push((r.string("variable name")?, r.string("variable value")?));
        }
        r.end()?;
        Ok(env)
    }

    /// Makes every core of `messenger`'s node answer
    /// [`COMMAND_LINE_EBB`] with this command line (the hosted node's
    /// side).
    ///
    /// # Errors
    ///
    /// The calling thread is not a core of that node.
    pub fn serve(self: &Arc<Self>, messenger: MessengerRef) -> Result<(), EbbError> {
        let command_line = Arc::clone(self);
        messenger.get()?.local().shared().register(
            COMMAND_LINE_EBB,
            Arc::new(move |request: Request| Answer::Now(command_line.answer(&request))),
        );
        Ok(())
    }

    fn answer(&self, request: &Request) -> Result<Message, ServiceError> {
        let body = match request.message {
            ARGS => self.encode_args(),
            ENVIRONMENT => self.encode_env(),
            _ => return Err(ServiceError::UnknownMessage),
        };
        if !request.body.payload.is_empty() || !request.body.control.is_empty() {
            return Err(ServiceError::Refused(COMMAND_LINE_MALFORMED));
        }
        Ok(Message::payload(IoChain::from(IoBuf::from_vec(body))))
    }

    /// Asks node `hosted` for the command line, each call waiting at most
    /// `limit`.
    ///
    /// # Errors
    ///
    /// [`CommandLineError`]: the call failed, no reply came in time, or
    /// the reply does not decode.
    pub async fn fetch(
        messenger: MessengerRef,
        hosted: NodeId,
        limit: Duration,
    ) -> Result<CommandLine, CommandLineError> {
        let args = ask(messenger, hosted, ARGS, limit).await?;
        let env = ask(messenger, hosted, ENVIRONMENT, limit).await?;
        Ok(CommandLine {
            args: CommandLine::decode_args(&args).map_err(CommandLineError::Malformed)?,
            env: CommandLine::decode_env(&env).map_err(CommandLineError::Malformed)?,
        })
    }
}

/// A count on the wire (far below `u32::MAX` in a Messenger payload).
fn count(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// One call to the command line service; its reply's payload.
async fn ask(
    messenger: MessengerRef,
    hosted: NodeId,
    message: MessageNumber,
    limit: Duration,
) -> Result<Vec<u8>, CommandLineError> {
    let call = messenger
        .get()
        .map_err(|_| CommandLineError::Messenger(MessengerError::ConnectionLost))?
        .call_with(hosted, None, COMMAND_LINE_EBB, message, Message::default());
    let reply = within(limit, call)
        .await
        .ok_or(CommandLineError::NoReply {
            waited_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
        })?
        .map_err(CommandLineError::Messenger)?;
    Ok(reply.payload.to_vec())
}

/// Why a node could not fetch the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandLineError {
    /// The call failed (the hosted node unreachable or lost, or it does
    /// not serve the command line).
    Messenger(MessengerError),
    /// No reply came in time.
    NoReply {
        /// How long it was waited for.
        waited_ms: u64,
    },
    /// The reply does not decode.
    Malformed(LayoutError),
}

impl fmt::Display for CommandLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandLineError::Messenger(error) => {
                write!(
                    f,
                    "cannot fetch the command line from the hosted node: {error}"
                )
            }
            CommandLineError::NoReply { waited_ms } => write!(
                f,
                "the hosted node did not send the command line within {waited_ms} ms"
            ),
            CommandLineError::Malformed(error) => {
                write!(f, "the hosted node's command line does not decode: {error}")
            }
        }
    }
}

impl core::error::Error for CommandLineError {}

/// This address space's command line, once fetched.
static LOADED: Once<CommandLine> = Once::new();

/// Fetches this node's command line from the frontend (node 0) through
/// `messenger` the first time, and gives the copy kept from then on.
///
/// # Errors
///
/// [`CommandLineError`], from the first fetch (a later call tries again).
pub async fn load(messenger: MessengerRef) -> Result<&'static CommandLine, CommandLineError> {
    if let Some(loaded) = LOADED.get() {
        return Ok(loaded);
    }
    let fetched = CommandLine::fetch(messenger, FRONTEND_NODE, FETCH_TIMEOUT).await?;
    // Two cores that both fetched keep the first copy (they are equal).
    Ok(LOADED.call_once(|| fetched))
}

/// This address space's command line, if [`load`] fetched it.
#[must_use]
pub fn command_line() -> Option<&'static CommandLine> {
    LOADED.get()
}

/// For `format!` in messages: the arguments joined by spaces.
impl fmt::Display for CommandLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted: Vec<String> = self.args.iter().map(|arg| format!("{arg:?}")).collect();
        f.write_str(&quoted.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn only_the_application_s_variables_are_kept() {
        let line = CommandLine::new(
            vec!["a b".to_string(), String::new()],
            [
                ("EBB_APP_SIZE", "3"),
                ("AWS_SECRET_ACCESS_KEY", "x"),
                ("EBB_APP_", "empty name"),
                ("EBB_APP_MODE", "fast"),
                ("HOME", "/root"),
            ]
            .map(|(n, v)| (n.to_string(), v.to_string())),
        );
        assert_eq!(
            line.env,
            [
                ("EBB_APP_MODE".to_string(), "fast".to_string()),
                ("EBB_APP_SIZE".to_string(), "3".to_string())
            ]
        );
        assert_eq!(line.var("EBB_APP_SIZE"), Some("3"));
        assert_eq!(line.var("HOME"), None);
        assert_eq!(
            CommandLine::decode_args(&line.encode_args()),
            Ok(line.args.clone())
        );
        assert_eq!(
            CommandLine::decode_env(&line.encode_env()),
            Ok(line.env.clone())
        );
        assert_eq!(line.to_string(), "\"a b\" \"\"");
    }

    #[test]
    fn replies_are_strict() {
        assert_eq!(CommandLine::decode_args(&[0, 0, 0, 0]), Ok(vec![]));
        assert_eq!(
            CommandLine::decode_args(&[0, 0, 0, 0, 1]),
            Err(LayoutError::Trailing { extra: 1 })
        );
        assert_eq!(
            CommandLine::decode_args(&[1, 0, 0, 0, 1, 0, 0, 0, 0xff]),
            Err(LayoutError::NotUtf8 { field: "argument" })
        );
        assert!(matches!(
            CommandLine::decode_env(&[9, 0, 0, 0]),
            Err(LayoutError::Truncated {
                field: "variables",
                ..
            })
        ));
    }
}
