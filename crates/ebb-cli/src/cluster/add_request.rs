//! How `./ebb cluster add` asks the running `./ebb cluster up` for more
//! nodes: through files in the cluster's state directory, which `up`
//! already owns (the state file, the console logs) and which only root's
//! `./ebb` writes.
//!
//! - `add` writes `add-PID.request` (PID: its own process) holding the
//!   number of nodes, under a temporary name first and then renamed, so
//!   `up` never reads half a request;
//! - `up`'s frontend task looks for requests every 200 ms
//!   ([`take_requests`] deletes each as it reads it), boots the nodes and
//!   writes `add-PID.answer`: `ok` or `error` on the first line, then
//!   what to show the user;
//! - `add` waits for the answer ([`wait_for_answer`]), deletes it and
//!   prints it. An `add` that ended first leaves an answer nobody reads,
//!   and one whose `up` ended leaves its request: the next `up` deletes
//!   both before it starts ([`clear`]).
//!
//! A request file rather than a socket: the state directory is where
//! `ps`, `logs` and `down` already find the cluster, and a file needs no
//! listener thread in `up` or clean-up when `up` dies.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const REQUEST: &str = ".request";
const ANSWER: &str = ".answer";
const PREFIX: &str = "add-";

/// One request `up` took: how many nodes, and where to answer.
#[derive(Debug, PartialEq, Eq)]
pub struct AddRequest {
    /// The nodes asked for, or why the request is unreadable.
    pub nodes: Result<u16, String>,
    /// The answer's file.
    pub answer: PathBuf,
}

fn request_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{PREFIX}{pid}{REQUEST}"))
}

fn answer_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{PREFIX}{pid}{ANSWER}"))
}

/// Writes `text` to `path` whole: to a temporary name, then renamed.
fn write_whole(path: &Path, text: &str) -> Result<(), String> {
    let temporary = path.with_extension("partial");
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Asks for `nodes` more nodes (as process `pid`); the answer's file.
///
/// # Errors
///
/// The request cannot be written.
pub fn send(dir: &Path, pid: u32, nodes: u16) -> Result<PathBuf, String> {
    let answer = answer_path(dir, pid);
    let _ = std::fs::remove_file(&answer);
    write_whole(&request_path(dir, pid), &format!("{nodes}\n"))?;
    Ok(answer)
}

/// The requests waiting in `dir`, each deleted as it is read.
pub fn take_requests(dir: &Path) -> Vec<AddRequest> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut taken = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.strip_suffix(REQUEST))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if std::fs::remove_file(entry.path()).is_err() {
            continue;
        }
        let nodes = text
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|n| (1..=253).contains(n))
            .ok_or_else(|| format!("a request for {:?} nodes (1 to 253)", text.trim()));
        taken.push(AddRequest {
            nodes,
            answer: answer_path(dir, pid),
        });
    }
    taken
}

/// Deletes every request and answer in `dir` (left by an `add` or an
/// `up` that ended; called by an `up` holding the cluster lock, so no
/// other `up` reads them).
pub fn clear(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(PREFIX) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Answers a request: whether it was done, and what to show.
pub fn answer(request: &AddRequest, done: bool, text: &str) {
    let head = if done { "ok" } else { "error" };
    if let Err(e) = write_whole(&request.answer, &format!("{head}\n{text}")) {
        eprintln!("ebb: cannot answer ./ebb cluster add: {e}");
    }
}

/// Waits for the answer at `path` (deleted once read) until `deadline`,
/// while `alive()` says the answering `up` runs: whether the nodes were
/// added, and the text to show.
///
/// # Errors
///
/// No answer came: `up` ended, or the deadline passed.
pub fn wait_for_answer(
    path: &Path,
    deadline: Instant,
    alive: impl Fn() -> bool,
) -> Result<(bool, String), String> {
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let _ = std::fs::remove_file(path);
            let (head, rest) = text.split_once('\n').unwrap_or((text.as_str(), ""));
            return Ok((head == "ok", rest.to_owned()));
        }
        if !alive() {
            return Err(withdrawn(path, "./ebb cluster up ended before it answered"));
        }
        if Instant::now() >= deadline {
            let why = format!(
                "./ebb cluster up did not answer within {} s",
                ANSWER_WITHIN.as_secs()
            );
            return Err(withdrawn(path, &why));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `why`, after taking back the request whose answer is `answer`: a
/// request left behind would add nodes later, after `add` said it failed.
/// If `up` had already taken it, the nodes may still come: said so.
fn withdrawn(answer: &Path, why: &str) -> String {
    let request = answer
        .to_str()
        .and_then(|path| path.strip_suffix(ANSWER))
        .map(|stem| PathBuf::from(format!("{stem}{REQUEST}")));
    match request.map(std::fs::remove_file) {
        Some(Ok(())) => format!("{why}; the request is withdrawn, no node was added"),
        _ => format!(
            "{why}; it had taken the request, so nodes may still be added (./ebb cluster ps shows them)"
        ),
    }
}

/// How long `add` waits for `up`'s answer: boots under TCG, readiness.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ebb-add-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    #[test]
    fn a_request_is_taken_once_and_answered() {
        let dir = scratch("once");
        let answer_file = send(&dir, 41, 2).expect("sent");
        let taken = take_requests(&dir);
        assert_eq!(
            taken,
            [AddRequest {
                nodes: Ok(2),
                answer: answer_file.clone()
            }]
        );
        assert!(take_requests(&dir).is_empty(), "taken once");
        answer(&taken[0], true, "node 4 at 10.96.0.5\n");
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            wait_for_answer(&answer_file, deadline, || true),
            Ok((true, "node 4 at 10.96.0.5\n".to_owned()))
        );
        assert!(!answer_file.exists(), "the answer is deleted once read");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_wrong_request_is_refused_and_other_files_are_left() {
        let dir = scratch("wrong");
        std::fs::write(dir.join("add-7.request"), "many\n").expect("write");
        std::fs::write(dir.join("add-8.request"), "0\n").expect("write");
        std::fs::write(dir.join("state"), "x").expect("write");
        std::fs::write(dir.join("add-x.request"), "1\n").expect("write");
        let mut taken = take_requests(&dir);
        taken.sort_by(|a, b| a.answer.cmp(&b.answer));
        assert_eq!(taken.len(), 2);
        assert_eq!(
            taken[0].nodes,
            Err("a request for \"many\" nodes (1 to 253)".to_owned())
        );
        assert_eq!(
            taken[1].nodes,
            Err("a request for \"0\" nodes (1 to 253)".to_owned())
        );
        assert!(dir.join("state").exists() && dir.join("add-x.request").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_answer_from_an_up_that_ended() {
        let dir = scratch("ended");
        let answer_file = send(&dir, 42, 1).expect("sent");
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            wait_for_answer(&answer_file, deadline, || false),
            Err(
                "./ebb cluster up ended before it answered; the request is withdrawn, no node \
                 was added"
                    .to_owned()
            )
        );
        // Withdrawn: an `up` looking later finds nothing to do.
        assert_eq!(take_requests(&dir), Vec::new());
        // A request `up` took but did not answer: the nodes may still come.
        let answer_file = send(&dir, 42, 1).expect("sent");
        assert_eq!(take_requests(&dir).len(), 1);
        let past = Instant::now();
        assert_eq!(
            wait_for_answer(&answer_file, past, || true),
            Err(
                "./ebb cluster up did not answer within 600 s; it had taken the request, so \
                 nodes may still be added (./ebb cluster ps shows them)"
                    .to_owned()
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
