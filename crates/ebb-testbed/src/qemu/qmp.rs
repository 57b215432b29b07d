//! A small QMP client (QEMU Machine Protocol, `docs/interop/qmp-spec.rst`
//! in QEMU's tree) over the unix socket QEMU opens with
//! `-qmp unix:PATH,server=on,wait=off` ([`qmp_args`]).
//!
//! The protocol is one JSON object per line. On connect the server sends
//! a greeting (`{"QMP": {...}}`) and accepts only `qmp_capabilities`;
//! after that every command gets exactly one `{"return": ...}` or
//! `{"error": {"class", "desc"}}`, and asynchronous `{"event": ...}`
//! messages may arrive in between (the last [`MAX_EVENTS`] are kept in
//! [`Qmp::events`]).
//!
//! Every command carries an `"id"`, which QEMU copies into its reply
//! (qmp-spec.rst, "Issuing Commands"), and a reply is taken only with its
//! command's id: after a read timed out, the late reply to that command
//! arrives before the next one's, and without ids it would be taken as
//! the next command's answer.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How many events a session keeps (the oldest go first): QEMU sends
/// them unasked for as long as the VM runs, and nobody need read them.
pub const MAX_EVENTS: usize = 256;

/// The error when QEMU closes the connection.
const CLOSED: &str = "QMP: QEMU closed the connection";

/// The QEMU arguments that open a QMP socket at `path` without waiting
/// for a client.
pub fn qmp_args(path: &Path) -> [String; 2] {
    [
        "-qmp".to_owned(),
        format!("unix:{},server=on,wait=off", path.display()),
    ]
}

/// A private directory (mode 0700, made anew) for QMP sockets, deleted
/// with what is in it on drop: whoever controls a socket's directory
/// controls the QEMU behind it, so a path someone else created meanwhile
/// (or a symbolic link placed there) is an error, not a directory to use.
#[derive(Debug)]
pub struct SocketDir(std::path::PathBuf);

impl SocketDir {
    /// Creates `name` in the temporary directory, after deleting one
    /// left there by a killed run (names carry the process id).
    pub fn create(name: &str) -> Result<SocketDir, String> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {} for QMP: {e}", dir.display()))?;
        Ok(SocketDir(dir))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A QMP session in command mode.
#[derive(Debug)]
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// The QEMU version from the greeting (`major.minor.micro`).
    pub version: String,
    /// The last [`MAX_EVENTS`] events received, oldest first.
    pub events: Vec<Value>,
    /// The id of the next command.
    next_id: u64,
}

impl Qmp {
    /// Connects to `path` (retrying until `timeout`, since QEMU creates
    /// the socket shortly after it starts), reads the greeting and leaves
    /// capabilities negotiation. Every read waits at most `timeout`.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Qmp, String> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(stream) => break stream,
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!("cannot connect to QMP at {}: {e}", path.display()))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| format!("QMP socket: {e}"))?;
        let writer = stream.try_clone().map_err(|e| format!("QMP socket: {e}"))?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream),
            writer,
            version: String::new(),
            events: Vec::new(),
            next_id: 0,
        };
        let greeting = qmp.read_message()?;
        let version = greeting
            .pointer("/QMP/version/qemu")
            .ok_or_else(|| format!("not a QMP greeting: {greeting}"))?;
        qmp.version = format!(
            "{}.{}.{}",
            version["major"], version["minor"], version["micro"]
        );
        qmp.execute("qmp_capabilities", None)?;
        Ok(qmp)
    }

    /// Sets how long each read may wait from now on (`connect`'s `timeout`
    /// until then).
    pub fn set_read_timeout(&mut self, timeout: Duration) -> Result<(), String> {
        self.reader
            .get_ref()
            .set_read_timeout(Some(timeout))
            .map_err(|e| format!("QMP socket: {e}"))
    }

    /// Runs `command` with `arguments`; its `return` value, or the error's
    /// class and description.
    pub fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut request = json!({ "execute": command, "id": id });
        if let Some(arguments) = arguments {
            request["arguments"] = arguments;
        }
        let mut line = request.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| format!("QMP {command}: {e}"))?;
        loop {
            let message = self.read_message()?;
            if message.get("event").is_some() {
                if self.events.len() == MAX_EVENTS {
                    self.events.remove(0);
                }
                self.events.push(message);
                continue;
            }
            if message.get("id") != Some(&json!(id)) {
                // The late reply to an earlier command that timed out.
                continue;
            }
            if let Some(value) = message.get("return") {
                return Ok(value.clone());
            }
            if let Some(error) = message.get("error") {
                return Err(format!(
                    "QMP {command}: {}: {}",
                    error["class"].as_str().unwrap_or("?"),
                    error["desc"].as_str().unwrap_or("?")
                ));
            }
        }
    }

    /// The VM's run state (`running`, `paused`, `prelaunch`, `shutdown`,
    /// ...), from `query-status`.
    pub fn query_status(&mut self) -> Result<String, String> {
        let status = self.execute("query-status", None)?;
        status["status"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("query-status without a status: {status}"))
    }

    /// The host thread ids of the vCPUs, in vCPU order, from
    /// `query-cpus-fast` (each vCPU is one host thread: pin it with
    /// [`crate::pin::pin_thread`]).
    pub fn vcpu_threads(&mut self) -> Result<Vec<u32>, String> {
        let cpus = self.execute("query-cpus-fast", None)?;
        let cpus = cpus
            .as_array()
            .ok_or_else(|| format!("query-cpus-fast did not return a list: {cpus}"))?;
        cpus.iter()
            .map(|cpu| {
                cpu["thread-id"]
                    .as_u64()
                    .and_then(|id| u32::try_from(id).ok())
                    .ok_or_else(|| format!("query-cpus-fast: a vCPU without a thread-id: {cpu}"))
            })
            .collect()
    }

    /// Starts (or resumes) the VM's CPUs (`cont`).
    pub fn cont(&mut self) -> Result<(), String> {
        self.execute("cont", None).map(drop)
    }

    /// Asks the guest to power down (an ACPI power button press).
    pub fn system_powerdown(&mut self) -> Result<(), String> {
        self.execute("system_powerdown", None).map(drop)
    }

    /// Stops QEMU at once. QEMU may exit, closing the connection, before
    /// its reply is read: that is a success too.
    pub fn quit(&mut self) -> Result<(), String> {
        match self.execute("quit", None) {
            Err(e) if e == CLOSED => Ok(()),
            result => result.map(drop),
        }
    }

    fn read_message(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err(CLOSED.to_owned()),
            Ok(_) => serde_json::from_str(line.trim())
                .map_err(|e| format!("QMP: bad message '{}': {e}", line.trim())),
            Err(e) => Err(format!("QMP: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A fake QEMU: greets, then answers each request line with the next of
    /// `replies` (which may hold an event line first; an empty one closes
    /// the connection instead), with the request's id where the reply has
    /// none; returns what it received.
    fn fake_server(
        path: &Path,
        replies: Vec<&'static str>,
    ) -> std::thread::JoinHandle<Vec<String>> {
        let listener = UnixListener::bind(path).expect("bind");
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().expect("accept");
            let mut writer = stream.try_clone().expect("clone");
            writer
                .write_all(b"{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 5, \"minor\": 2, \"major\": 7}, \"package\": \"\"}, \"capabilities\": [\"oob\"]}}\r\n")
                .expect("greet");
            let mut received = Vec::new();
            let mut lines = BufReader::new(stream).lines();
            for reply in replies {
                let request = lines.next().expect("a request").expect("read");
                let id = serde_json::from_str::<Value>(&request).expect("json")["id"].clone();
                received.push(request);
                if reply.is_empty() {
                    break;
                }
                for line in reply.split("\r\n") {
                    // QEMU copies the request's id into its reply.
                    let mut message: Value = serde_json::from_str(line).expect("json");
                    let answer = message.get("return").is_some() || message.get("error").is_some();
                    if answer && message.get("id").is_none() {
                        message["id"] = id.clone();
                    }
                    writer
                        .write_all(message.to_string().as_bytes())
                        .expect("reply");
                    writer.write_all(b"\r\n").expect("reply");
                }
            }
            received
        })
    }

    /// A fresh directory `ebb-qmp-TAG-PID` for a test's socket, and the
    /// socket's path in it.
    fn socket_dir(tag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("ebb-qmp-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("qmp.sock");
        (dir, path)
    }

    #[test]
    fn a_session_negotiates_then_skips_events_and_reports_errors() {
        let (dir, path) = socket_dir("test");
        let server = fake_server(
            &path,
            vec![
                r#"{"return": {}}"#,
                "{\"event\": \"RESUME\", \"timestamp\": {\"seconds\": 1, \"microseconds\": 2}}\r\n\
                 {\"return\": {\"status\": \"running\", \"running\": true}}",
                r#"{"error": {"class": "CommandNotFound", "desc": "The command nope has not been found"}}"#,
            ],
        );
        let mut qmp = Qmp::connect(&path, Duration::from_secs(10)).expect("connect");
        assert_eq!(qmp.version, "7.2.5");
        // The event comes before query-status's reply and is kept aside.
        assert_eq!(qmp.query_status().expect("status"), "running");
        assert_eq!(qmp.events.len(), 1);
        assert_eq!(qmp.events[0]["event"], "RESUME");
        let err = qmp.execute("nope", None).expect_err("unknown command");
        assert!(err.contains("CommandNotFound"), "{err}");
        let received = server.join().expect("server");
        assert_eq!(received[0], r#"{"execute":"qmp_capabilities","id":0}"#);
        assert_eq!(received[1], r#"{"execute":"query-status","id":1}"#);
        assert_eq!(received[2], r#"{"execute":"nope","id":2}"#);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn quit_succeeds_when_qemu_closes_before_replying() {
        let (dir, path) = socket_dir("quit");
        // Answers qmp_capabilities, then reads `quit` and closes.
        let server = fake_server(&path, vec![r#"{"return": {}}"#, ""]);
        let mut qmp = Qmp::connect(&path, Duration::from_secs(10)).expect("connect");
        assert_eq!(qmp.quit(), Ok(()));
        let received = server.join().expect("server");
        assert_eq!(received[1], r#"{"execute":"quit","id":1}"#);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_late_reply_is_not_taken_for_the_next_commands_and_events_are_capped() {
        let (dir, path) = socket_dir("late");
        let listener = UnixListener::bind(&path).expect("bind");
        // A QEMU that answers query-status 1 only after the client gave up
        // on it, just before its answer to query-status 2, with more
        // events in between than a session keeps.
        let script = std::thread::spawn(move || {
            let (stream, _) = listener.accept().expect("accept");
            let mut writer = stream.try_clone().expect("clone");
            let mut send = |line: &str| {
                writer.write_all(line.as_bytes()).expect("send");
                writer.write_all(b"\r\n").expect("send");
            };
            send(r#"{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 8}}}}"#);
            let mut lines = BufReader::new(stream).lines();
            let mut next = || lines.next().expect("a request").expect("read");
            assert_eq!(next(), r#"{"execute":"qmp_capabilities","id":0}"#);
            send(r#"{"return": {}, "id": 0}"#);
            assert_eq!(next(), r#"{"execute":"query-status","id":1}"#);
            assert_eq!(next(), r#"{"execute":"query-status","id":2}"#);
            send(r#"{"return": {"status": "running", "running": true}, "id": 1}"#);
            for _ in 0..MAX_EVENTS + 10 {
                send(r#"{"event": "STOP"}"#);
            }
            send(r#"{"return": {"status": "paused", "running": false}, "id": 2}"#);
        });
        let mut qmp = Qmp::connect(&path, Duration::from_secs(10)).expect("connect");
        qmp.set_read_timeout(Duration::from_millis(200))
            .expect("timeout");
        let err = qmp.query_status().expect_err("no answer in time");
        assert!(err.starts_with("QMP: "), "{err}");
        qmp.set_read_timeout(Duration::from_secs(10))
            .expect("timeout");
        assert_eq!(qmp.query_status().expect("status"), "paused");
        assert_eq!(qmp.events.len(), MAX_EVENTS);
        script.join().expect("script");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_socket_dir_is_private_and_goes_on_drop() {
        use std::os::unix::fs::PermissionsExt;
        let name = format!("ebb-qmp-dir-{}", std::process::id());
        let dir = SocketDir::create(&name).expect("create");
        let path = dir.path().to_owned();
        let mode = std::fs::metadata(&path).expect("made").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::write(path.join("qmp.sock"), b"").expect("write");
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn the_socket_arguments_do_not_wait_for_a_client() {
        assert_eq!(
            qmp_args(Path::new("/tmp/q.sock")),
            ["-qmp", "unix:/tmp/q.sock,server=on,wait=off"]
        );
    }
}
