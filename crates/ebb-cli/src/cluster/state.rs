//! The state file of `./ebb cluster`: what `up` runs, for `ps`, `logs` and
//! `down` in another shell.
//!
//! It lives in `target/cluster/` of the checkout, beside the nodes'
//! console logs (`node-ID.log`), not in `/run/ebbflow`: a cluster belongs
//! to the checkout whose images it boots (two checkouts do not see each
//! other's), its logs stay readable without root after the cluster is
//! gone, and `cargo clean` removes them. What `/run` would give for free,
//! forgetting a cluster at reboot, the frontend's process id gives: a file
//! whose process is gone is stale, and is said to be.
//!
//! The format is lines of tab-separated fields, rewritten whole (to a
//! temporary file, then renamed) on every change:
//!
//! ```text
//! frontend  PID  APP  NAMESPACE
//! node      ID   ADDRESS  CORES  MEMORY  STATE  QEMU-PID
//! ```

use std::path::{Path, PathBuf};

/// The cluster directory of a checkout.
pub fn dir(root: &Path) -> PathBuf {
    root.join("target/cluster")
}

/// The state file in `dir`.
pub fn file(dir: &Path) -> PathBuf {
    dir.join("state")
}

/// Node `id`'s console log in `dir`.
pub fn console_log(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("node-{id}.log"))
}

/// One node's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// Its id.
    pub id: u32,
    /// Its address.
    pub address: String,
    /// Its vCPUs.
    pub cores: usize,
    /// Its memory.
    pub memory: String,
    /// Its state as the table shows it (`ready`, `lost (signal 9)`...).
    pub state: String,
    /// Its QEMU's process id.
    pub pid: u32,
}

/// What `up` runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterState {
    /// The `./ebb cluster up` process (the frontend).
    pub frontend_pid: u32,
    /// The application.
    pub app: String,
    /// The cluster's network namespace.
    pub namespace: String,
    /// The nodes, in id order.
    pub nodes: Vec<NodeRow>,
}

impl ClusterState {
    /// The file's text.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "frontend\t{}\t{}\t{}\n",
            self.frontend_pid, self.app, self.namespace
        );
        for node in &self.nodes {
            text.push_str(&format!(
                "node\t{}\t{}\t{}\t{}\t{}\t{}\n",
                node.id, node.address, node.cores, node.memory, node.state, node.pid
            ));
        }
        text
    }

    /// Parses [`ClusterState::to_text`]'s output.
    pub fn parse(text: &str) -> Result<ClusterState, String> {
        let bad = |line: &str| format!("a cluster state line I cannot read: '{line}'");
        let mut state = None;
        let mut nodes = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split('\t').collect();
            match fields.as_slice() {
                ["frontend", pid, app, namespace] => {
                    state = Some((
                        pid.parse().map_err(|_| bad(line))?,
                        (*app).to_owned(),
                        (*namespace).to_owned(),
                    ));
                }
                ["node", id, address, cores, memory, node_state, pid] => nodes.push(NodeRow {
                    id: id.parse().map_err(|_| bad(line))?,
                    address: (*address).to_owned(),
                    cores: cores.parse().map_err(|_| bad(line))?,
                    memory: (*memory).to_owned(),
                    state: (*node_state).to_owned(),
                    pid: pid.parse().map_err(|_| bad(line))?,
                }),
                _ => return Err(bad(line)),
            }
        }
        let (frontend_pid, app, namespace) =
            state.ok_or_else(|| "the cluster state has no frontend line".to_owned())?;
        Ok(ClusterState {
            frontend_pid,
            app,
            namespace,
            nodes,
        })
    }

    /// Writes the state to `dir`'s state file (replacing it whole).
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let path = file(dir);
        let temporary = path.with_extension("new");
        std::fs::write(&temporary, self.to_text())
            .and_then(|()| std::fs::rename(&temporary, &path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The state in `dir`, if there is a file.
    pub fn read(dir: &Path) -> Result<Option<ClusterState>, String> {
        match std::fs::read_to_string(file(dir)) {
            Ok(text) => ClusterState::parse(&text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", file(dir).display())),
        }
    }

    /// Whether the frontend still runs (else the file is stale).
    pub fn frontend_alive(&self) -> bool {
        process_alive(self.frontend_pid)
    }

    /// The node table as `up` and `ps` print it.
    pub fn table(&self) -> String {
        let mut text = format!(
            "{:>4}  {:<15} {:>5}  {:<7} {}\n",
            "NODE", "ADDRESS", "CORES", "MEMORY", "STATE"
        );
        for node in &self.nodes {
            text.push_str(&format!(
                "{:>4}  {:<15} {:>5}  {:<7} {}\n",
                node.id, node.address, node.cores, node.memory, node.state
            ));
        }
        text
    }
}

/// Whether process `pid` runs (a zombie does not count).
pub fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ClusterState {
        ClusterState {
            frontend_pid: 42,
            app: "echo".to_owned(),
            namespace: "ebb-42-cluster-0".to_owned(),
            nodes: vec![
                NodeRow {
                    id: 1,
                    address: "10.96.0.2".to_owned(),
                    cores: 1,
                    memory: "256M".to_owned(),
                    state: "ready".to_owned(),
                    pid: 4242,
                },
                NodeRow {
                    id: 2,
                    address: "10.96.0.3".to_owned(),
                    cores: 2,
                    memory: "1G".to_owned(),
                    state: "lost (signal 9)".to_owned(),
                    pid: 4243,
                },
            ],
        }
    }

    #[test]
    fn the_state_reads_back_as_written_and_prints_as_a_table() {
        let state = sample();
        assert_eq!(ClusterState::parse(&state.to_text()), Ok(state.clone()));
        assert_eq!(
            state.table(),
            "NODE  ADDRESS         CORES  MEMORY  STATE\n   \
             1  10.96.0.2           1  256M    ready\n   \
             2  10.96.0.3           2  1G      lost (signal 9)\n"
        );
        let err = ClusterState::parse("node\t1\n").expect_err("bad line");
        assert!(err.contains("cannot read: 'node\t1'"), "{err}");
        let err = ClusterState::parse("").expect_err("empty");
        assert!(err.contains("no frontend line"), "{err}");
    }

    #[test]
    fn this_process_is_alive_and_a_file_round_trips() {
        assert!(process_alive(std::process::id()));
        let dir = std::env::temp_dir().join(format!("ebb-cluster-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(ClusterState::read(&dir), Ok(None));
        sample().write(&dir).expect("write");
        assert_eq!(ClusterState::read(&dir), Ok(Some(sample())));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
