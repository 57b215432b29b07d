//! The frontend's side, written once against the Messenger: each round,
//! a slice of data to every node still in the ring (all calls in flight
//! at once), then the token around the ring, then the check: the ring's
//! total against the sum of the nodes' replies and of the frontend's own
//! digests. A node whose call fails is reported lost, with the error, and
//! left out from then on; a ring broken at a node is tried again over the
//! others.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use ebb_core::NodeId;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Call, Message, MessageNumber, MessengerError, MessengerRef};

use crate::wire::{Token, TokenReply, WorkDone, WorkOrder, WorkerNode, TOKEN, WORK};
use crate::work::{digest_bytes, slice_data, WorkPlan};

/// Exit code: every node still in the ring finished every round, and
/// every total matched (lost nodes, listed in the report, do not change
/// it).
pub const EXIT_OK: i32 = 0;
/// Exit code: a total or a digest did not match.
pub const EXIT_MISMATCH: i32 = 1;
/// Exit code: no node was given, or none was left.
pub const EXIT_NO_NODES: i32 = 3;

/// What happened to one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeOutcome {
    /// The node.
    pub node: WorkerNode,
    /// Its digest of each round it finished, in order.
    pub digests: Vec<(u32, u64)>,
    /// Why it was left out, and in which round, if it was.
    pub lost: Option<(u32, String)>,
}

/// One round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundOutcome {
    /// The round (from 1).
    pub round: u32,
    /// The nodes whose digests the ring added.
    pub nodes: usize,
    /// The ring's total, if a ring completed.
    pub total: Option<u64>,
    /// The sum of the frontend's own digests of those nodes' slices.
    pub expected: u64,
    /// Whether the total, the nodes' replies and the frontend's digests
    /// all agree.
    pub matched: bool,
}

/// The run: per node, per round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The plan run.
    pub plan: WorkPlan,
    /// Every node given, in ring order.
    pub nodes: Vec<NodeOutcome>,
    /// Every round run.
    pub rounds: Vec<RoundOutcome>,
}

impl Report {
    /// The nodes left out, with their reasons.
    pub fn lost(&self) -> impl Iterator<Item = &NodeOutcome> {
        self.nodes.iter().filter(|node| node.lost.is_some())
    }

    /// The process's exit code ([`EXIT_OK`], [`EXIT_MISMATCH`] or
    /// [`EXIT_NO_NODES`]).
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        if self.nodes.iter().all(|node| node.lost.is_some())
            || self.rounds.len() < self.plan.rounds as usize
        {
            EXIT_NO_NODES
        } else if self.rounds.iter().all(|round| round.matched) {
            EXIT_OK
        } else {
            EXIT_MISMATCH
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plan = &self.plan;
        writeln!(
            f,
            "ring: {} nodes, {} rounds of {} bytes per node (seed {})",
            self.nodes.len(),
            plan.rounds,
            plan.bytes,
            plan.seed
        )?;
        for node in &self.nodes {
            write!(f, "node {}: ", node.node.node)?;
            match &node.lost {
                Some((round, why)) => write!(f, "LOST in round {round}: {why}")?,
                None => write!(f, "{} rounds", node.digests.len())?,
            }
            if let Some((_, last)) = node.digests.last() {
                write!(f, ", last digest {last:#018x}")?;
            }
            writeln!(f)?;
        }
        for round in &self.rounds {
            write!(f, "round {}: {} nodes, ", round.round, round.nodes)?;
            match round.total {
                Some(total) => write!(f, "ring total {total:#018x}")?,
                None => f.write_str("no ring")?,
            }
            let verdict = if round.matched { "OK" } else { "MISMATCH" };
            writeln!(f, ", expected {:#018x}: {verdict}", round.expected)?;
        }
        let lost = self.lost().count();
        let verdict = match self.exit_code() {
            EXIT_OK => "OK",
            EXIT_MISMATCH => "MISMATCH",
            _ => "NO NODES LEFT",
        };
        let nodes = if lost == 1 { "node" } else { "nodes" };
        write!(f, "ring: {verdict} ({lost} {nodes} lost)")
    }
}

/// Runs `plan` over `nodes` (a task on one of the frontend's cores;
/// `messenger` is the frontend's, with the nodes in its directory) and
/// prints a progress line per round on standard error.
pub async fn run_frontend(
    messenger: MessengerRef,
    nodes: Vec<WorkerNode>,
    plan: WorkPlan,
) -> Report {
    let mut report = Report {
        plan,
        nodes: nodes
            .iter()
            .map(|&node| NodeOutcome {
                node,
                digests: Vec::new(),
                lost: None,
            })
            .collect(),
        rounds: Vec::new(),
    };
    for round in 1..=plan.rounds {
        if report.nodes.iter().all(|node| node.lost.is_some()) {
            break;
        }
        let outcome = run_round(messenger, &mut report, round).await;
        ebb_app::eprintln!(
            "ring: round {round}: {} nodes, total {}",
            outcome.nodes,
            outcome
                .total
                .map_or_else(|| String::from("none"), |total| format!("{total:#018x}"))
        );
        report.rounds.push(outcome);
    }
    report
}

/// One round: the work, the token, the check.
async fn run_round(messenger: MessengerRef, report: &mut Report, round: u32) -> RoundOutcome {
    let plan = report.plan;
    // Every call is sent before any reply is awaited: the nodes work at
    // once. The frontend digests each slice before it goes.
    let mut calls = Vec::new();
    for (index, outcome) in report.nodes.iter().enumerate() {
        if outcome.lost.is_some() {
            continue;
        }
        let slice = u32::try_from(index).unwrap_or(u32::MAX);
        let data = slice_data(plan.seed, round, slice, plan.bytes);
        let expected = digest_bytes(&data);
        let order = WorkOrder { round, slice }.message(IoChain::from(IoBuf::from_vec(data)));
        let call = call(messenger, outcome.node, WORK, order);
        calls.push((index, expected, call));
    }
    // Node index → (its reply's digest, the frontend's).
    let mut worked = BTreeMap::new();
    for (index, expected, call) in calls {
        let result = reply(call)
            .await
            .map_err(|error| format!("{error}"))
            .and_then(|reply| {
                WorkDone::decode(&reply.control)
                    .map_err(|error| format!("{error}"))
                    .and_then(|done| {
                        if done.round == round {
                            Ok(done.digest)
                        } else {
                            Err(format!("replied for round {} to round {round}", done.round))
                        }
                    })
            });
        match result {
            Ok(digest) => {
                report.nodes[index].digests.push((round, digest));
                worked.insert(index, (digest, expected));
            }
            Err(why) => lose(report, index, round, format!("work failed: {why}")),
        }
    }
    let total = pass_token(messenger, report, round, &mut worked).await;
    let replied = worked
        .values()
        .fold(0u64, |sum, (d, _)| sum.wrapping_add(*d));
    let expected = worked
        .values()
        .fold(0u64, |sum, (_, e)| sum.wrapping_add(*e));
    RoundOutcome {
        round,
        nodes: worked.len(),
        total,
        expected,
        matched: total == Some(expected) && replied == expected,
    }
}

/// Sends the token around the nodes in `worked` (in ring order) until a
/// ring completes, leaving out each node it broke at; the ring's total.
async fn pass_token(
    messenger: MessengerRef,
    report: &mut Report,
    round: u32,
    worked: &mut BTreeMap<usize, (u64, u64)>,
) -> Option<u64> {
    // Each failed try leaves a node out, so this ends.
    while let Some(&first) = worked.keys().next() {
        let hops = worked
            .keys()
            .skip(1)
            .map(|&index| report.nodes[index].node)
            .collect();
        let token = Token {
            round,
            total: 0,
            hops,
        };
        let first_node = report.nodes[first].node;
        let (at, why) = match reply(call(messenger, first_node, TOKEN, token.message())).await {
            Err(error) => (first_node.node, format!("token failed: {error}")),
            Ok(reply) => match TokenReply::decode(&reply) {
                Ok(TokenReply::Done { total }) => return Some(total),
                Ok(TokenReply::Broken { at, why }) => (at, format!("token failed: {why}")),
                Ok(TokenReply::NoWork { at }) => (at, format!("had no work for round {round}")),
                Err(error) => (first_node.node, format!("token failed: {error}")),
            },
        };
        let Some(index) = index_of(report, at).filter(|index| worked.contains_key(index)) else {
            // A node that is not in the ring: the first one misbehaved.
            lose(
                report,
                first,
                round,
                format!("named node {at}, not in the ring: {why}"),
            );
            worked.remove(&first);
            continue;
        };
        lose(report, index, round, why);
        worked.remove(&index);
    }
    None
}

/// Sends a call now (its reply is awaited later, with [`reply`]).
fn call(
    messenger: MessengerRef,
    to: WorkerNode,
    number: MessageNumber,
    body: Message,
) -> Result<Call, MessengerError> {
    let rep = messenger
        .get()
        // Not on one of the frontend's cores (a programming error).
        .map_err(|_| MessengerError::ConnectionLost)?;
    Ok(rep.call_with(to.node, None, to.worker, number, body))
}

async fn reply(call: Result<Call, MessengerError>) -> Result<Message, MessengerError> {
    call?.await
}

fn index_of(report: &Report, node: NodeId) -> Option<usize> {
    report
        .nodes
        .iter()
        .position(|outcome| outcome.node.node == node)
}

fn lose(report: &mut Report, index: usize, round: u32, why: String) {
    let outcome = &mut report.nodes[index];
    ebb_app::eprintln!(
        "ring: round {round}: node {} lost: {why}",
        outcome.node.node
    );
    outcome.digests.retain(|&(r, _)| r != round);
    outcome.lost = Some((round, why));
}
