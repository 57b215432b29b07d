//! The frontend's side, written once against the Messenger: each round,
//! a slice of data to every node still in the ring (all calls in flight
//! at once), then the token around the ring, then the check: the ring's
//! total against the sum of the nodes' replies and of the frontend's own
//! digests. A node whose call fails, or does not answer within its bound
//! ([`crate::work_bound`], [`crate::token_bound`]: a frozen node is a
//! failure, not a hang), is reported lost, with the reason, and left out
//! from then on; the frontend's Messenger loses it too (`lose_node`: its
//! loss notice fails what other nodes still wait for from it). A ring
//! broken at a node is tried again over the others.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use ebb_core::NodeId;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Call, Message, MessageNumber, MessengerError, MessengerRef};

use crate::bound::{silence, token_bound, within, work_bound};
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
            || self.rounds.len() < usize::try_from(self.plan.rounds).unwrap_or(usize::MAX)
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
            "ring: {}, {} of {} bytes per node (seed {})",
            count(self.nodes.len(), "node"),
            count(usize::try_from(plan.rounds).unwrap_or(usize::MAX), "round"),
            plan.bytes,
            plan.seed
        )?;
        for node in &self.nodes {
            write!(f, "node {}: ", node.node.node)?;
            match &node.lost {
                Some((round, why)) => write!(f, "LOST in round {round}: {why}")?,
                None => f.write_str(&count(node.digests.len(), "round"))?,
            }
            if let Some((_, last)) = node.digests.last() {
                write!(f, ", last digest {last:#018x}")?;
            }
            writeln!(f)?;
        }
        for round in &self.rounds {
            write!(f, "round {}: {}, ", round.round, count(round.nodes, "node"))?;
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
        write!(f, "ring: {verdict} ({} lost)", count(lost, "node"))
    }
}

/// "1 node", "2 nodes".
fn count(n: usize, thing: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{n} {thing}{s}")
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
    let limit = work_bound(plan.call_timeout, plan.bytes);
    for (index, outcome) in report.nodes.iter().enumerate() {
        if outcome.lost.is_some() {
            continue;
        }
        let slice = u32::try_from(index).unwrap_or(u32::MAX);
        let data = slice_data(plan.seed, round, slice, plan.bytes);
        let expected = digest_bytes(&data);
        let order = WorkOrder { round, slice }.message(IoChain::from(IoBuf::from_vec(data)));
        let call = call(messenger, outcome.node, WORK, order);
        calls.push((index, expected, outcome.node.node, call));
    }
    // Node index → (its reply's digest, the frontend's).
    let mut worked = BTreeMap::new();
    for (index, expected, node, call) in calls {
        let result = reply(call, node, limit).await.and_then(|reply| {
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
            Err(why) => lose(
                messenger,
                report,
                index,
                round,
                format!("work failed: {why}"),
            ),
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
        let hops: Vec<_> = worked
            .keys()
            .skip(1)
            .map(|&index| report.nodes[index].node)
            .collect();
        let unit = report.plan.call_timeout;
        let limit = token_bound(unit, hops.len());
        let token = Token {
            round,
            total: 0,
            hops,
            hop_timeout_ms: u32::try_from(unit.as_millis()).unwrap_or(u32::MAX),
        };
        let first_node = report.nodes[first].node;
        let message = match token.message() {
            Ok(message) => message,
            Err(too_many) => {
                // No ring this round (it does not match); nobody is lost.
                ebb_app::eprintln!("ring: round {round}: {too_many}");
                return None;
            }
        };
        let sent = call(messenger, first_node, TOKEN, message);
        let (at, why) = match reply(sent, first_node.node, limit).await {
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
                messenger,
                report,
                first,
                round,
                format!("named node {at}, not in the ring: {why}"),
            );
            worked.remove(&first);
            continue;
        };
        lose(messenger, report, index, round, why);
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

/// The reply to `call` (to node `to`), or why there is none: its error,
/// or that none came within `limit`.
async fn reply(
    call: Result<Call, MessengerError>,
    to: NodeId,
    limit: Duration,
) -> Result<Message, String> {
    let call = call.map_err(|error| format!("{error}"))?;
    within(limit, call)
        .await
        .ok_or_else(|| silence(to, limit))?
        .map_err(|error| format!("{error}"))
}

fn index_of(report: &Report, node: NodeId) -> Option<usize> {
    report
        .nodes
        .iter()
        .position(|outcome| outcome.node.node == node)
}

/// Leaves node `index` out of the ring from `round` on, and loses it on
/// the frontend's Messenger: calls to it still pending, here and (by the
/// loss notice) on the other nodes, fail at once.
fn lose(messenger: MessengerRef, report: &mut Report, index: usize, round: u32, why: String) {
    let outcome = &mut report.nodes[index];
    if let Ok(rep) = messenger.get() {
        rep.lose_node(outcome.node.node);
    }
    ebb_app::eprintln!(
        "ring: round {round}: node {} lost: {why}",
        outcome.node.node
    );
    outcome.digests.retain(|&(r, _)| r != round);
    outcome.lost = Some((round, why));
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;
    use ebb_core::EbbId;

    fn node(id: u32, lost: Option<(u32, &str)>) -> NodeOutcome {
        NodeOutcome {
            node: WorkerNode {
                node: NodeId(id),
                worker: EbbId::new(0x8000 + 64 * id).unwrap(),
            },
            digests: vec![(1, 0xab)],
            lost: lost.map(|(round, why)| (round, why.into())),
        }
    }

    fn round(matched: bool) -> RoundOutcome {
        RoundOutcome {
            round: 1,
            nodes: 1,
            total: Some(0xab),
            expected: if matched { 0xab } else { 0xac },
            matched,
        }
    }

    fn report(nodes: Vec<NodeOutcome>, rounds: Vec<RoundOutcome>) -> Report {
        Report {
            plan: WorkPlan {
                bytes: 10,
                rounds: 1,
                seed: 1,
                ..WorkPlan::default()
            },
            nodes,
            rounds,
        }
    }

    #[test]
    fn the_report_says_what_happened_and_its_exit_code_follows() {
        let ok = report(
            vec![
                node(1, None),
                node(2, Some((1, "work failed: node 2 is lost"))),
            ],
            vec![round(true)],
        );
        assert_eq!(ok.exit_code(), EXIT_OK);
        assert_eq!(
            ok.to_string(),
            "ring: 2 nodes, 1 round of 10 bytes per node (seed 1)\n\
             node 1: 1 round, last digest 0x00000000000000ab\n\
             node 2: LOST in round 1: work failed: node 2 is lost, last digest 0x00000000000000ab\n\
             round 1: 1 node, ring total 0x00000000000000ab, expected 0x00000000000000ab: OK\n\
             ring: OK (1 node lost)"
        );
        let mismatch = report(vec![node(1, None)], vec![round(false)]);
        assert_eq!(mismatch.exit_code(), EXIT_MISMATCH);
        assert!(mismatch
            .to_string()
            .ends_with("MISMATCH\nring: MISMATCH (0 nodes lost)"));
        let none_left = report(vec![node(1, Some((1, "gone")))], vec![round(true)]);
        assert_eq!(none_left.exit_code(), EXIT_NO_NODES);
        assert!(none_left
            .to_string()
            .ends_with("ring: NO NODES LEFT (1 node lost)"));
        assert_eq!(report(Vec::new(), Vec::new()).exit_code(), EXIT_NO_NODES);
    }
}
