//! The node table a frontend prints after each allocation.

use std::fmt::Write;

use crate::allocator::NodeHandle;

/// `NODE  ADDRESS  CORES  MEMORY  STATE  QEMU PID`, one line per node.
pub fn node_table(nodes: &[NodeHandle]) -> String {
    let mut table = format!(
        "{:>4}  {:<14}  {:>5}  {:<6}  {:<18}  {:>8}\n",
        "NODE", "ADDRESS", "CORES", "MEMORY", "STATE", "QEMU PID"
    );
    for node in nodes {
        let _ = writeln!(
            table,
            "{:>4}  {:<14}  {:>5}  {:<6}  {:<18}  {:>8}",
            node.id().0,
            node.address().to_string(),
            node.cores(),
            node.memory(),
            node.state().to_string(),
            node.pid()
        );
    }
    table
}
