//! A child's output (a serial console on QEMU's stdout, a server's
//! stderr) read line by line on a thread of its own, with timeouts: the
//! reader never blocks the test or benchmark, and a guest that stays
//! silent ends in an error naming what was awaited instead of a hang.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Lines from a reader, those already read kept in [`Lines::seen`].
#[derive(Debug)]
pub struct Lines {
    receiver: Receiver<String>,
    /// Every line read so far, carriage returns removed.
    pub seen: Vec<String>,
    closed: bool,
}

impl Lines {
    /// Starts reading `reader` on a new thread; with `echo`, each line is
    /// also written to stderr after that prefix (e.g. `"  | "`).
    pub fn spawn(reader: impl Read + Send + 'static, echo: Option<&str>) -> Lines {
        let echo = echo.map(str::to_owned);
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines().map_while(Result::ok) {
                let line = line.replace('\r', "");
                if let Some(prefix) = &echo {
                    eprintln!("{prefix}{line}");
                }
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            receiver,
            seen: Vec::new(),
            closed: false,
        }
    }

    /// The next line within `limit`: `Ok(None)` when the reader ended,
    /// `Err` when nothing came in time.
    pub fn next_within(&mut self, limit: Duration) -> Result<Option<&str>, Duration> {
        if self.closed {
            return Ok(None);
        }
        match self.receiver.recv_timeout(limit) {
            Ok(line) => {
                self.seen.push(line);
                Ok(self.seen.last().map(String::as_str))
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.closed = true;
                Ok(None)
            }
            Err(RecvTimeoutError::Timeout) => Err(limit),
        }
    }

    /// Reads until a line (new or already seen) contains `needle`; returns
    /// it. Fails when the reader ends or `limit` passes first, with the
    /// lines seen.
    pub fn wait_for(&mut self, needle: &str, limit: Duration) -> Result<String, String> {
        if let Some(line) = self.seen.iter().find(|line| line.contains(needle)) {
            return Ok(line.clone());
        }
        self.wait_until(needle, limit, |line| line.contains(needle))
    }

    /// Reads new lines until one satisfies `done`; returns it. Fails (saying
    /// `what` was awaited) when the reader ends or `limit` passes first.
    pub fn wait_until(
        &mut self,
        what: &str,
        limit: Duration,
        mut done: impl FnMut(&str) -> bool,
    ) -> Result<String, String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_within(left) {
                Ok(Some(line)) if done(line) => return Ok(line.to_owned()),
                Ok(Some(_)) => {}
                Ok(None) => return Err(self.failure(what, "the output ended")),
                Err(_) => return Err(self.failure(what, &format!("nothing within {limit:?}"))),
            }
        }
    }

    /// Reads until the reader ends or `limit` passes; whether it ended.
    pub fn drain(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_within(left) {
                Ok(Some(_)) => {}
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    }

    /// Everything seen, one line each.
    pub fn text(&self) -> String {
        self.seen.join("\n")
    }

    fn failure(&self, what: &str, how: &str) -> String {
        format!("{what}: not seen ({how}); the output was:\n{}", self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_found_in_order_and_an_absent_one_times_out_with_the_output() {
        let mut lines = Lines::spawn(&b"boot\r\nready at 10.0.0.2\nbye\n"[..], None);
        assert_eq!(
            lines
                .wait_for("ready", Duration::from_secs(5))
                .expect("ready"),
            "ready at 10.0.0.2"
        );
        // Found again among the lines seen.
        assert!(lines.wait_for("boot", Duration::from_secs(5)).is_ok());
        let err = lines
            .wait_for("never", Duration::from_secs(5))
            .expect_err("absent");
        assert!(
            err.contains("the output ended") && err.contains("bye"),
            "{err}"
        );
        assert!(lines.drain(Duration::from_secs(1)));
    }

    #[test]
    fn a_silent_reader_times_out() {
        let (reader, _writer) = std::os::unix::net::UnixStream::pair().expect("pair");
        let mut lines = Lines::spawn(reader, None);
        let err = lines
            .wait_for("x", Duration::from_millis(50))
            .expect_err("silent");
        assert!(err.contains("nothing within"), "{err}");
    }
}
