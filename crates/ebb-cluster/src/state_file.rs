//! The state file of `./ebb cluster`: what `up` (or the frontend program
//! it runs: [`crate::frontend`] writes it when given a state directory)
//! runs, for `ps`, `logs` and `down` in another shell.
//!
//! It lives in `target/cluster/` of the checkout, beside the nodes'
//! console logs (`node-ID.log`), not in `/run/ebbflow`: a cluster belongs
//! to the checkout whose images it boots (two checkouts do not see each
//! other's), its logs stay readable without root after the cluster is
//! gone, and `cargo clean` removes them. Such a file outlives a reboot, and
//! process ids are reused, so a process is named by its id *and* its start
//! time (field 22 of `/proc/PID/stat`, proc(5)), under the boot id
//! (`/proc/sys/kernel/random/boot_id`) they were recorded in: when either
//! differs, the process is gone and the file is stale, and nothing is ever
//! signalled on its word. A QEMU is killed only if its command line also
//! names its node's QMP socket, which is private to its frontend.
//!
//! The format is lines of tab-separated fields, rewritten whole (to a
//! temporary file, then renamed) on every change:
//!
//! ```text
//! frontend  PID  START  BOOT-ID  APP  NAMESPACE
//! node      ID   ADDRESS  CORES  MEMORY  STATE  QEMU-PID  QEMU-START  QMP-SOCKET
//! ```

use std::path::{Path, PathBuf};

use crate::allocator::NodeHandle;

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
    /// Its QEMU's process.
    pub qemu: Process,
    /// Its QEMU's QMP socket (`-` for none).
    pub control_socket: String,
}

impl NodeRow {
    /// Whether the node's QEMU still runs: the recorded process (same id,
    /// same start time), whose command line names the node's QMP socket.
    /// Only then may it be killed.
    pub fn qemu_runs(&self) -> bool {
        self.qemu.runs()
            && self.control_socket != "-"
            && std::fs::read(format!("/proc/{}/cmdline", self.qemu.pid)).is_ok_and(|cmdline| {
                cmdline
                    .split(|&byte| byte == 0)
                    .any(|arg| contains(arg, self.control_socket.as_bytes()))
            })
    }
}

/// Whether `haystack` holds `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len().max(1))
        .any(|window| window == needle)
}

/// A state file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub why: String,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot read the cluster state file {} ({}); if no `./ebb cluster up` runs from \
             this checkout, it is stale: `./ebb cluster down` (or the next `up`) deletes it; \
             a cluster that runs has a namespace `ebb-PID-cluster-N` in `ip netns list`, \
             PID being its `up`'s process",
            self.path.display(),
            self.why
        )
    }
}

/// One process, named so that a reused id is not taken for it: its id and
/// its start time in clock ticks after boot (field 22 of `/proc/PID/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    /// Its id.
    pub pid: u32,
    /// Its start time (meaningful within one boot only).
    pub start: u64,
}

impl Process {
    /// Process `pid` as it is now, if it runs (not a zombie).
    pub fn of(pid: u32) -> Option<Process> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `PID (COMM) STATE ...`: COMM may hold spaces and parentheses,
        // the last `) ` ends it. After it come fields 3 (state) onwards.
        let (_, rest) = stat.rsplit_once(") ")?;
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields.first() == Some(&"Z") {
            return None;
        }
        let start = fields.get(22 - 3)?.parse().ok()?;
        Some(Process { pid, start })
    }

    /// This process.
    pub fn current() -> Process {
        let pid = std::process::id();
        Process::of(pid).unwrap_or(Process { pid, start: 0 })
    }

    /// Whether it still runs: the process with its id started when it did.
    pub fn runs(&self) -> bool {
        Process::of(self.pid) == Some(*self)
    }
}

/// This boot's id (a fresh one at every boot), or `-` if the kernel has
/// none to give.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|id| id.trim().to_owned())
        .unwrap_or_else(|_| "-".to_owned())
}

/// What `up` runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterState {
    /// The `./ebb cluster up` process (the frontend).
    pub frontend: Process,
    /// The boot in which the processes were recorded ([`boot_id`]).
    pub boot_id: String,
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
            "frontend\t{}\t{}\t{}\t{}\t{}\n",
            self.frontend.pid, self.frontend.start, self.boot_id, self.app, self.namespace
        );
        for node in &self.nodes {
            text.push_str(&format!(
                "node\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                node.id,
                node.address,
                node.cores,
                node.memory,
                node.state,
                node.qemu.pid,
                node.qemu.start,
                node.control_socket
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
                ["frontend", pid, start, boot, app, namespace] => {
                    state = Some((
                        Process {
                            pid: pid.parse().map_err(|_| bad(line))?,
                            start: start.parse().map_err(|_| bad(line))?,
                        },
                        (*boot).to_owned(),
                        (*app).to_owned(),
                        (*namespace).to_owned(),
                    ));
                }
                ["node", id, address, cores, memory, node_state, pid, start, socket] => {
                    nodes.push(NodeRow {
                        id: id.parse().map_err(|_| bad(line))?,
                        address: (*address).to_owned(),
                        cores: cores.parse().map_err(|_| bad(line))?,
                        memory: (*memory).to_owned(),
                        state: (*node_state).to_owned(),
                        qemu: Process {
                            pid: pid.parse().map_err(|_| bad(line))?,
                            start: start.parse().map_err(|_| bad(line))?,
                        },
                        control_socket: (*socket).to_owned(),
                    });
                }
                _ => return Err(bad(line)),
            }
        }
        let (frontend, boot_id, app, namespace) =
            state.ok_or_else(|| "the cluster state has no frontend line".to_owned())?;
        Ok(ClusterState {
            frontend,
            boot_id,
            app,
            namespace,
            nodes,
        })
    }

    /// Writes the state to `dir`'s state file (replacing it whole); a
    /// field holding a tab or a line break (it would break the file for
    /// `ps` and `down`) is refused.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let path = file(dir);
        let fields = [&self.app, &self.namespace, &self.boot_id]
            .into_iter()
            .chain(self.nodes.iter().flat_map(|node| {
                [
                    &node.address,
                    &node.memory,
                    &node.state,
                    &node.control_socket,
                ]
            }));
        for field in fields {
            if field.is_empty() || field.contains(['\t', '\n', '\r']) {
                return Err(format!(
                    "cannot write {}: the value {field:?} is empty or holds a tab or line break",
                    path.display()
                ));
            }
        }
        let temporary = path.with_extension("new");
        std::fs::write(&temporary, self.to_text())
            .and_then(|()| std::fs::rename(&temporary, &path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The state in `dir`, if there is a file. A file that cannot be
    /// parsed (from another version of `./ebb`, or damaged) is an error
    /// naming it and saying what to do ([`Unreadable`]).
    pub fn read(dir: &Path) -> Result<Option<ClusterState>, Unreadable> {
        let path = file(dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => ClusterState::parse(&text)
                .map(Some)
                .map_err(|why| Unreadable { path, why }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Unreadable {
                path,
                why: e.to_string(),
            }),
        }
    }

    /// Whether the state was recorded in this boot (else every process
    /// in it is gone, whatever now has their ids).
    pub fn this_boot(&self) -> bool {
        self.boot_id != "-" && self.boot_id == boot_id()
    }

    /// Whether the frontend still runs (else the file is stale).
    pub fn frontend_alive(&self) -> bool {
        self.this_boot() && self.frontend.runs()
    }

    /// The nodes whose QEMU still runs ([`NodeRow::qemu_runs`]), in this
    /// boot.
    pub fn running_qemus(&self) -> Vec<&NodeRow> {
        if !self.this_boot() {
            return Vec::new();
        }
        self.nodes.iter().filter(|node| node.qemu_runs()).collect()
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

/// What the state file records of one cluster, at any moment.
pub struct Recorder {
    frontend: Process,
    boot_id: String,
    app: String,
    namespace: String,
}

impl Recorder {
    /// The cluster of `app` in `namespace`, this process its frontend.
    pub fn new(app: &str, namespace: &str) -> Recorder {
        Recorder {
            frontend: Process::current(),
            boot_id: boot_id(),
            app: app.to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    /// The cluster with `nodes`.
    pub fn state(&self, nodes: &[NodeHandle]) -> ClusterState {
        ClusterState {
            frontend: self.frontend,
            boot_id: self.boot_id.clone(),
            app: self.app.clone(),
            namespace: self.namespace.clone(),
            nodes: nodes.iter().map(row).collect(),
        }
    }
}

/// A node's line.
fn row(node: &NodeHandle) -> NodeRow {
    NodeRow {
        id: node.id().0,
        address: node.address().to_string(),
        cores: node.cores(),
        memory: node.memory().to_owned(),
        state: node.state().to_string(),
        // Read while the watcher has not reaped it, or it is gone (then
        // its start time is 0, and nothing will take it for running).
        qemu: Process::of(node.pid()).unwrap_or(Process {
            pid: node.pid(),
            start: 0,
        }),
        control_socket: node
            .control_socket()
            .map_or_else(|| "-".to_owned(), |path| path.display().to_string()),
    }
}

/// Says which nodes changed state since `shown` (`ebb: node 2 is lost
/// (signal 9)`) and records `now` in `dir`.
pub fn follow(shown: &mut ClusterState, now: ClusterState, dir: &Path) {
    if now == *shown {
        return;
    }
    for (before, after) in shown.nodes.iter().zip(&now.nodes) {
        if before.state != after.state {
            eprintln!("ebb: node {} is {}", after.id, after.state);
        }
    }
    // A failed write leaves the last state for `ps`; the frontend goes on
    // (and stops in order later).
    if let Err(e) = now.write(dir) {
        eprintln!("warning: {e}");
    }
    *shown = now;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ClusterState {
        ClusterState {
            frontend: Process { pid: 42, start: 7 },
            boot_id: "b00t".to_owned(),
            app: "echo".to_owned(),
            namespace: "ebb-42-cluster-0".to_owned(),
            nodes: vec![
                NodeRow {
                    id: 1,
                    address: "10.96.0.2".to_owned(),
                    cores: 1,
                    memory: "256M".to_owned(),
                    state: "ready".to_owned(),
                    qemu: Process {
                        pid: 4242,
                        start: 8,
                    },
                    control_socket: "/tmp/ebb-x/qmp-1.sock".to_owned(),
                },
                NodeRow {
                    id: 2,
                    address: "10.96.0.3".to_owned(),
                    cores: 2,
                    memory: "1G".to_owned(),
                    state: "lost (signal 9)".to_owned(),
                    qemu: Process {
                        pid: 4243,
                        start: 9,
                    },
                    control_socket: "-".to_owned(),
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
        assert!(Process::current().runs());
        assert_ne!(Process::current().start, 0);
        let dir = std::env::temp_dir().join(format!("ebb-cluster-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(ClusterState::read(&dir), Ok(None));
        sample().write(&dir).expect("write");
        assert_eq!(ClusterState::read(&dir), Ok(Some(sample())));
        // A value that would break the file is refused, and the file kept.
        let mut tabbed = sample();
        tabbed.nodes[0].memory = "256M\t1".to_owned();
        let err = tabbed.write(&dir).expect_err("a tab");
        assert!(err.contains("holds a tab or line break"), "{err}");
        assert_eq!(ClusterState::read(&dir), Ok(Some(sample())));
        // A damaged file: the error names it and says what to do.
        std::fs::write(file(&dir), "frontend\t1\n").expect("damage");
        let err = ClusterState::read(&dir).expect_err("damaged").to_string();
        assert!(err.contains(&file(&dir).display().to_string()), "{err}");
        assert!(
            err.contains("./ebb cluster down` (or the next `up`) deletes it"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A state whose frontend is this test process, as recorded now.
    fn recorded_now() -> ClusterState {
        ClusterState {
            frontend: Process::current(),
            boot_id: boot_id(),
            ..sample()
        }
    }

    #[test]
    fn a_reused_process_id_or_another_boot_is_not_the_frontend() {
        assert!(recorded_now().frontend_alive());
        // The same id, started at another time: the id was reused.
        let mut reused = recorded_now();
        reused.frontend.start += 1;
        assert!(!reused.frontend_alive());
        // The same id and start time, recorded before a reboot.
        let rebooted = ClusterState {
            boot_id: "an-earlier-boot".to_owned(),
            ..recorded_now()
        };
        assert!(!rebooted.frontend_alive());
    }

    #[test]
    fn only_a_qemu_naming_its_qmp_socket_counts_as_running() {
        // A stand-in whose command line names a socket, as QEMU's does.
        let mut sleeper = std::process::Command::new("sh")
            .args(["-c", "sleep 30; : \"$0\"", "/tmp/ebb-test/qmp-1.sock"])
            .spawn()
            .expect("start sleep");
        // spawn returns while the kernel may still be setting up the new
        // program's arguments (the parent is released mid-execve).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::read(format!("/proc/{}/cmdline", sleeper.id()))
            .map_or(true, |c| c.is_empty())
        {
            assert!(std::time::Instant::now() < deadline, "sh did not start");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let process = Process::of(sleeper.id()).expect("sh runs");
        let node = |socket: &str, qemu: Process| NodeRow {
            qemu,
            control_socket: socket.to_owned(),
            ..sample().nodes[0].clone()
        };
        let state = |nodes| ClusterState {
            nodes,
            ..recorded_now()
        };
        let ours = state(vec![node("/tmp/ebb-test/qmp-1.sock", process)]);
        assert_eq!(ours.running_qemus().len(), 1, "{ours:?}");
        // Another cluster's VM (another socket), a reused id, no socket,
        // another boot: none may be killed.
        let reused = Process {
            start: process.start + 1,
            ..process
        };
        for other in [
            state(vec![node("/tmp/ebb-other/qmp-1.sock", process)]),
            state(vec![node("/tmp/ebb-test/qmp-1.sock", reused)]),
            state(vec![node("-", process)]),
            ClusterState {
                boot_id: "an-earlier-boot".to_owned(),
                ..ours.clone()
            },
        ] {
            assert!(other.running_qemus().is_empty(), "{other:?}");
        }
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }
}
