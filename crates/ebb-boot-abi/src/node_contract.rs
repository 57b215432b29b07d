//! A node's place in a distributed application (DESIGN §5), as its
//! launcher tells it: four platform options on the command line, all or
//! none of them.
//!
//! | word | meaning |
//! | --- | --- |
//! | `node=N` | the node's id (a `NodeId`, not an address) |
//! | `frontend=A.B.C.D:PORT` | where the frontend's Messenger listens; the node announces itself there |
//! | `ebb_ids=START-END` | the node's range of global Ebb ids, `START` included, `END` excluded, handed out by the frontend |
//! | `messenger_port=PORT` | the port this node's Messenger listens on |
//!
//! A native node reads them from the kernel command line (`-append`), a
//! hosted one from the `EBB_NODE` environment variable (the same words);
//! [`NodeContract`]'s `Display` writes them. Parsing is strict: a bad
//! value, a word given twice, some of the four without the others, or an
//! empty id range is a [`NodeContractError`] naming the word.

use core::fmt;
use core::net::SocketAddrV4;
use core::ops::Range;

/// What a node learns from its launcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeContract {
    /// The node's id.
    pub node: u32,
    /// The frontend's Messenger address.
    pub frontend: SocketAddrV4,
    /// The first of the node's global Ebb ids.
    pub ebb_ids_start: u32,
    /// The end (excluded) of the node's global Ebb ids; above the start.
    pub ebb_ids_end: u32,
    /// The port this node's Messenger listens on (not 0).
    pub messenger_port: u16,
}

/// The four words' keys, in the order [`NodeContract`]'s `Display` writes
/// them.
pub const NODE_KEYS: [&str; 4] = ["node", "frontend", "ebb_ids", "messenger_port"];

/// Why the node words are not a contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeContractError {
    /// A word's value does not parse.
    BadValue {
        /// The word's key.
        key: &'static str,
        /// What the value should look like.
        expected: &'static str,
    },
    /// A word was given twice.
    Repeated {
        /// The word's key.
        key: &'static str,
    },
    /// Some node words were given, but not this one.
    Missing {
        /// The word's key.
        key: &'static str,
    },
    /// `ebb_ids=START-END` with `END` not above `START`.
    EmptyRange {
        /// The start given.
        start: u32,
        /// The end given.
        end: u32,
    },
}

impl fmt::Display for NodeContractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeContractError::BadValue { key, expected } => {
                write!(f, "{key}= takes {expected}")
            }
            NodeContractError::Repeated { key } => write!(f, "{key}= is given twice"),
            NodeContractError::Missing { key } => write!(
                f,
                "{key}= is missing: a node needs all of node=, frontend=, ebb_ids= and messenger_port="
            ),
            NodeContractError::EmptyRange { start, end } => write!(
                f,
                "ebb_ids={start}-{end} is empty: the end (excluded) must be above the start"
            ),
        }
    }
}

impl core::error::Error for NodeContractError {}

impl fmt::Display for NodeContract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node={} frontend={} ebb_ids={}-{} messenger_port={}",
            self.node, self.frontend, self.ebb_ids_start, self.ebb_ids_end, self.messenger_port
        )
    }
}

/// The node words seen so far, each parsed as it comes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeWords {
    node: Option<u32>,
    frontend: Option<SocketAddrV4>,
    ebb_ids: Option<(u32, u32)>,
    messenger_port: Option<u16>,
    /// The first error; later words change nothing.
    error: Option<NodeContractError>,
}

impl NodeWords {
    /// Takes `key=value` if `key` is a node word (returns whether it is).
    pub fn take(&mut self, key: &str, value: &str) -> bool {
        let Some(&key) = NODE_KEYS.iter().find(|k| **k == key) else {
            return false;
        };
        if self.error.is_none() {
            if let Err(error) = self.set(key, value) {
                self.error = Some(error);
            }
        }
        true
    }

    fn set(&mut self, key: &'static str, value: &str) -> Result<(), NodeContractError> {
        let repeated = match key {
            "node" => self.node.is_some(),
            "frontend" => self.frontend.is_some(),
            "ebb_ids" => self.ebb_ids.is_some(),
            _ => self.messenger_port.is_some(),
        };
        if repeated {
            return Err(NodeContractError::Repeated { key });
        }
        let bad = |expected| NodeContractError::BadValue { key, expected };
        match key {
            // Node 0 is the frontend, which has no boot contract.
            "node" => {
                self.node = Some(
                    number(value)
                        .filter(|&node| node != 0)
                        .ok_or(bad("a node id, 1 to 4294967295 (0 is the frontend)"))?,
                );
            }
            "frontend" => {
                let addr: SocketAddrV4 = value
                    .parse()
                    .map_err(|_| bad("an IPv4 address and port, A.B.C.D:PORT"))?;
                if addr.port() == 0 || addr.ip().is_unspecified() {
                    return Err(bad(
                        "an IPv4 address and port, A.B.C.D:PORT (not 0.0.0.0, not port 0)",
                    ));
                }
                self.frontend = Some(addr);
            }
            "ebb_ids" => {
                let expected = "a range of global Ebb ids, START-END (END excluded)";
                let (start, end) = value.split_once('-').ok_or(bad(expected))?;
                let start = number(start).ok_or(bad(expected))?;
                let end = number(end).ok_or(bad(expected))?;
                if end <= start {
                    return Err(NodeContractError::EmptyRange { start, end });
                }
                self.ebb_ids = Some((start, end));
            }
            _ => {
                let port = number(value)
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|&p| p != 0)
                    .ok_or(bad("a port, 1 to 65535"))?;
                self.messenger_port = Some(port);
            }
        }
        Ok(())
    }

    /// The contract: `None` when no node word was given.
    ///
    /// # Errors
    ///
    /// The first bad word, or the first of the four that is missing.
    pub fn finish(self) -> Result<Option<NodeContract>, NodeContractError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        match (self.node, self.frontend, self.ebb_ids, self.messenger_port) {
            (None, None, None, None) => Ok(None),
            (
                Some(node),
                Some(frontend),
                Some((ebb_ids_start, ebb_ids_end)),
                Some(messenger_port),
            ) => Ok(Some(NodeContract {
                node,
                frontend,
                ebb_ids_start,
                ebb_ids_end,
                messenger_port,
            })),
            (node, frontend, ebb_ids, _) => {
                let key = if node.is_none() {
                    "node"
                } else if frontend.is_none() {
                    "frontend"
                } else if ebb_ids.is_none() {
                    "ebb_ids"
                } else {
                    "messenger_port"
                };
                Err(NodeContractError::Missing { key })
            }
        }
    }
}

impl NodeContract {
    /// The node's global Ebb ids.
    #[must_use]
    pub fn ebb_ids(&self) -> Range<u32> {
        self.ebb_ids_start..self.ebb_ids_end
    }

    /// Parses the node words among `words` (others are ignored): what a
    /// hosted node does with `EBB_NODE`.
    ///
    /// # Errors
    ///
    /// As [`NodeWords::finish`].
    pub fn parse_words<'a>(
        words: impl IntoIterator<Item = &'a str>,
    ) -> Result<Option<NodeContract>, NodeContractError> {
        let mut seen = NodeWords::default();
        for word in words {
            if let Some((key, value)) = word.split_once('=') {
                seen.take(key, value);
            }
        }
        seen.finish()
    }
}

/// A decimal `u32` with digits only (no sign, no spaces; leading zeros
/// are allowed).
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::parse_cmdline;
    use core::net::Ipv4Addr;
    use std::format;
    use std::string::ToString;

    fn node_of(cmdline: &str) -> Result<Option<NodeContract>, NodeContractError> {
        parse_cmdline(cmdline, |word| panic!("unknown word {word}"))
            .0
            .node
    }

    #[test]
    fn the_four_words_make_a_contract_beside_other_options() {
        let contract = node_of(
            "cores=2 node=3 frontend=10.99.0.1:7100 ebb_ids=32832-32896 messenger_port=7101 -- x",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            contract,
            NodeContract {
                node: 3,
                frontend: SocketAddrV4::new(Ipv4Addr::new(10, 99, 0, 1), 7100),
                ebb_ids_start: 32_832,
                ebb_ids_end: 32_896,
                messenger_port: 7101,
            }
        );
        assert_eq!(contract.ebb_ids(), 32_832..32_896);
        assert_eq!(
            contract.to_string(),
            "node=3 frontend=10.99.0.1:7100 ebb_ids=32832-32896 messenger_port=7101"
        );
        assert_eq!(node_of("cores=2"), Ok(None), "not a node of a cluster");
    }

    #[test]
    fn each_mistake_is_named() {
        let all = "node=3 frontend=10.99.0.1:7100 ebb_ids=32832-32896 messenger_port=7101";
        let error = |line: &str| node_of(line).unwrap_err();
        let bad = |key, expected| NodeContractError::BadValue { key, expected };
        assert_eq!(
            error("node=-1 frontend=10.99.0.1:7100 ebb_ids=1-2 messenger_port=1"),
            bad("node", "a node id, 1 to 4294967295 (0 is the frontend)")
        );
        assert_eq!(
            error("node=0 frontend=10.99.0.1:7100 ebb_ids=1-2 messenger_port=1"),
            bad("node", "a node id, 1 to 4294967295 (0 is the frontend)")
        );
        assert_eq!(
            error("node=1 frontend=10.99.0.1 ebb_ids=1-2 messenger_port=1"),
            bad("frontend", "an IPv4 address and port, A.B.C.D:PORT")
        );
        assert!(matches!(
            error("node=1 frontend=0.0.0.0:7 ebb_ids=1-2 messenger_port=1"),
            NodeContractError::BadValue {
                key: "frontend",
                ..
            }
        ));
        assert_eq!(
            error("node=1 frontend=10.99.0.1:7 ebb_ids=5-5 messenger_port=1"),
            NodeContractError::EmptyRange { start: 5, end: 5 }
        );
        assert!(matches!(
            error("node=1 frontend=10.99.0.1:7 ebb_ids=5 messenger_port=1"),
            NodeContractError::BadValue { key: "ebb_ids", .. }
        ));
        assert_eq!(
            error("node=1 frontend=10.99.0.1:7 ebb_ids=1-2 messenger_port=0"),
            bad("messenger_port", "a port, 1 to 65535")
        );
        assert_eq!(
            error(&format!("{all} node=4")),
            NodeContractError::Repeated { key: "node" }
        );
        assert_eq!(
            error("node=3 ebb_ids=1-2"),
            NodeContractError::Missing { key: "frontend" }
        );
        assert_eq!(
            error("messenger_port=9"),
            NodeContractError::Missing { key: "node" }
        );
        assert_eq!(
            NodeContractError::Missing { key: "frontend" }.to_string(),
            "frontend= is missing: a node needs all of node=, frontend=, ebb_ids= and messenger_port="
        );
    }

    #[test]
    fn hosted_nodes_read_the_same_words() {
        let words = "node=7 frontend=127.0.0.1:7100 ebb_ids=40000-40064 messenger_port=7107";
        let contract = NodeContract::parse_words(words.split_whitespace())
            .unwrap()
            .unwrap();
        assert_eq!(contract.to_string(), words);
        assert_eq!(NodeContract::parse_words([]), Ok(None));
    }
}
