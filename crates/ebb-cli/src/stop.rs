//! SIGTERM and SIGINT to `./ebb`: stopping what it started, then itself.
//!
//! `kill PID` from another shell reaches `./ebb` alone, not the process it
//! started; Ctrl-C in a terminal reaches the whole foreground process
//! group, child included. Either way `./ebb` must outlive its child, stop
//! it, and then delete what it made (namespaces, TAP devices, the QMP
//! socket): that happens on drop, which runs only when `./ebb` returns
//! from `main`, never when it dies of a signal. So [`watch`] catches both
//! signals, [`wait_passing_signals`] passes them on to the child waited
//! for (native runs stop QEMU through QMP instead, see `crate::native`),
//! and [`report`] turns the stop into the exit code shells give a command
//! killed by a signal, 128 + its number: the code a hosted application
//! stopped by the same signal exits with (`ebb-hosted`'s runtime), so a
//! script sees one code for a stop whichever process the signal reached.

use std::io;
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// SIGHUP's number (Linux, all architectures): the terminal closed.
pub const SIGHUP: i32 = 1;
/// SIGINT's number (Linux, all architectures).
pub const SIGINT: i32 = 2;
/// SIGQUIT's number (Linux, all architectures): Ctrl-\\ in a terminal.
pub const SIGQUIT: i32 = 3;
/// SIGTERM's number (Linux, all architectures).
pub const SIGTERM: i32 = 15;
/// SIGKILL's number (Linux, all architectures).
pub const SIGKILL: i32 = 9;

/// How long a child may take to stop after the signal before it is
/// killed (SIGKILL): a hosted application stops its cores, QEMU quits.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long a SIGINT waits before it is passed on: a Ctrl-C in a terminal
/// reaches the child directly, and a second SIGINT makes a hosted
/// application give up stopping in order ("SIGINT again while stopping").
pub const SIGINT_PASS_DELAY: Duration = Duration::from_secs(1);

/// The number of the last stop signal received (after [`watch`]), 0 for
/// none.
static RECEIVED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// Catches `signals` (of SIGTERM, SIGINT, SIGHUP and SIGQUIT) from now on: they no longer
/// end this process, [`received`] tells which came. A handled signal
/// (unlike an ignored one) goes back to its default action across `exec`,
/// so children still react to them normally.
pub fn watch(signals: &[i32]) {
    let received = RECEIVED.get_or_init(|| Arc::new(AtomicUsize::new(0)));
    for &signal in signals {
        let number = usize::try_from(signal).unwrap_or_default();
        if let Err(e) = signal_hook::flag::register_usize(signal, Arc::clone(received), number) {
            eprintln!(
                "warning: cannot handle {} ({e}): it would end ./ebb before what it started",
                signal_name(signal)
            );
        }
    }
}

/// The stop signal received since [`watch`], if any (the last of several).
pub fn received() -> Option<i32> {
    let number = RECEIVED.get()?.load(Ordering::Relaxed);
    i32::try_from(number).ok().filter(|&signal| signal != 0)
}

/// `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`, `SIGKILL`, or `signal N`.
pub fn signal_name(signal: i32) -> String {
    match signal {
        SIGTERM => "SIGTERM".to_owned(),
        SIGINT => "SIGINT".to_owned(),
        SIGHUP => "SIGHUP".to_owned(),
        SIGQUIT => "SIGQUIT".to_owned(),
        SIGKILL => "SIGKILL".to_owned(),
        _ => format!("signal {signal}"),
    }
}

/// The shell's exit code for a stop by `signal`: 128 + its number.
pub fn exit_code(signal: i32) -> u8 {
    u8::try_from(signal).map_or(255, |s| s.saturating_add(128))
}

/// If a stop signal came: says `ebb: stopped WHAT on SIGNAL` and returns
/// the exit code for it ([`exit_code`]).
pub fn report(what: &str) -> Option<u8> {
    let signal = received()?;
    eprintln!("ebb: stopped {what} on {}", signal_name(signal));
    Some(exit_code(signal))
}

/// Sends `signal` to process `pid`. A process that has exited meanwhile
/// (ESRCH) is what a stop expects; any other failure is said.
pub fn send(signal: i32, pid: u32) {
    let target = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    let Some(target) = target else {
        eprintln!("warning: cannot signal process {pid}: not a process id");
        return;
    };
    // SIGINT, SIGTERM and SIGKILL are the only signals passed on.
    let Some(signal) = rustix::process::Signal::from_named_raw(signal) else {
        eprintln!("warning: cannot send signal {signal} to process {pid}: unknown signal");
        return;
    };
    match rustix::process::kill_process(target, signal) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => eprintln!("warning: cannot send {signal:?} to process {pid}: {e}"),
    }
}

/// Whom [`wait_passing`] passes a stop signal on to.
#[derive(Clone, Copy)]
pub enum PassTo {
    /// The child alone (it stops what it started itself: a hosted
    /// application, the user-space stack's runner).
    Child,
    /// The child's process group, which the child leads (spawned with
    /// `process_group(0)`): `./ebb test`'s steps, whose cargo does not pass
    /// a signal on to the test binaries and servers under it.
    Group,
}

/// After a stop passed to a group whose leader has exited: the rest of
/// the group (a server started as a shell's background job ignores
/// SIGINT, and would keep the step's output pipe open for good) gets
/// SIGTERM, and SIGKILL if any of it is still there [`STOP_GRACE`] later.
fn stop_rest_of_group(leader: u32) {
    let Some(group) = i32::try_from(leader)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let alive = || rustix::process::test_kill_process_group(group).is_ok();
    if !alive() {
        return;
    }
    send_group(SIGTERM, leader);
    let started = Instant::now();
    while alive() && started.elapsed() < STOP_GRACE {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive() {
        eprintln!(
            "ebb: processes of group {leader} did not stop within {} s: killing them",
            STOP_GRACE.as_secs()
        );
        send_group(SIGKILL, leader);
    }
}

/// Sends `signal` to the process group led by `leader`; a group gone
/// meanwhile (ESRCH) is what a stop expects.
pub fn send_group(signal: i32, leader: u32) {
    let group = i32::try_from(leader)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    let (Some(group), Some(named)) = (group, rustix::process::Signal::from_named_raw(signal))
    else {
        eprintln!("warning: cannot send signal {signal} to process group {leader}");
        return;
    };
    match rustix::process::kill_process_group(group, named) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => eprintln!("warning: cannot send {named:?} to process group {leader}: {e}"),
    }
}

/// Waits for `child` to exit. A stop signal is passed on to it (SIGINT
/// after [`SIGINT_PASS_DELAY`], unless the child has exited by then), and
/// a child still running [`STOP_GRACE`] after that is killed.
pub fn wait_passing_signals(child: &mut Child) -> io::Result<ExitStatus> {
    wait_passing(child, PassTo::Child)
}

/// [`wait_passing_signals`], passing the signal to `to`.
pub fn wait_passing(child: &mut Child, to: PassTo) -> io::Result<ExitStatus> {
    let id = child.id();
    let pass = |signal: i32| match to {
        PassTo::Child => send(signal, id),
        PassTo::Group => send_group(signal, id),
    };
    let mut signalled: Option<(i32, Instant)> = None;
    let mut passed = false;
    loop {
        if let Some(status) = child.try_wait()? {
            if passed && matches!(to, PassTo::Group) {
                stop_rest_of_group(id);
            }
            return Ok(status);
        }
        if signalled.is_none() {
            signalled = received().map(|signal| (signal, Instant::now()));
        }
        if let Some((signal, at)) = signalled {
            let delay = if signal == SIGINT {
                SIGINT_PASS_DELAY
            } else {
                Duration::ZERO
            };
            if !passed && at.elapsed() >= delay {
                pass(signal);
                passed = true;
            }
            if at.elapsed() >= delay + STOP_GRACE {
                eprintln!(
                    "ebb: process {} did not stop within {} s of {}: killing it",
                    child.id(),
                    STOP_GRACE.as_secs(),
                    signal_name(signal)
                );
                pass(SIGKILL);
                child.kill()?;
                return child.wait();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn sh(script: &str) -> Child {
        Command::new("sh")
            .args(["-c", script])
            .spawn()
            .expect("start sh")
    }

    /// Sends `signal` to this process and waits until [`received`] says so.
    fn signal_self(signal: i32) {
        send(signal, std::process::id());
        let deadline = Instant::now() + Duration::from_secs(10);
        while received() != Some(signal) {
            assert!(Instant::now() < deadline, "{signal} not received");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn codes_and_names_are_the_shells() {
        assert_eq!(exit_code(SIGTERM), 143);
        assert_eq!(exit_code(SIGINT), 130);
        assert_eq!(signal_name(SIGTERM), "SIGTERM");
        assert_eq!(signal_name(SIGKILL), "SIGKILL");
        assert_eq!(signal_name(SIGHUP), "SIGHUP");
        assert_eq!(exit_code(SIGHUP), 129);
        assert_eq!(signal_name(6), "signal 6");
    }

    // One test for everything that depends on this process's signals, so
    // that no other test of this binary sees them.
    #[test]
    fn signals_are_caught_and_passed_on_to_the_child() {
        watch(&[SIGTERM, SIGINT]);
        let mut plain = sh("exit 3");
        assert_eq!(
            wait_passing_signals(&mut plain).expect("wait").code(),
            Some(3)
        );

        // A child that ignores nothing dies of the SIGTERM passed on.
        let mut child = sh("exec sleep 30");
        signal_self(SIGTERM);
        let status = wait_passing_signals(&mut child).expect("wait");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(SIGTERM), "{status}");
        assert_eq!(report("the test child"), Some(143));

        // SIGINT is passed on too (after its delay), and the child keeps
        // its default action for it.
        let mut child = sh("exec sleep 30");
        signal_self(SIGINT);
        let status = wait_passing_signals(&mut child).expect("wait");
        assert_eq!(status.signal(), Some(SIGINT), "{status}");
        assert_eq!(report("the test child"), Some(130));

        // Passed to a group, it reaches what the child started too. (A
        // shell's background job ignores SIGINT, POSIX's rule for
        // non-interactive shells: SIGTERM shows it.)
        use std::os::unix::process::CommandExt;
        let pid_file = std::env::temp_dir().join(format!("ebb-stop-{}", std::process::id()));
        let script = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
        let mut leader = Command::new("sh")
            .args(["-c", &script])
            .process_group(0)
            .spawn()
            .expect("start sh");
        let started = Instant::now() + Duration::from_secs(10);
        while std::fs::metadata(&pid_file).map_or(true, |m| m.len() == 0) {
            assert!(Instant::now() < started, "the group's shell did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        signal_self(SIGTERM);
        let status = wait_passing(&mut leader, PassTo::Group).expect("wait");
        assert_eq!(status.signal(), Some(SIGTERM), "{status}");
        let grandchild = std::fs::read_to_string(&pid_file).expect("pid file");
        let _ = std::fs::remove_file(&pid_file);
        let gone = Instant::now() + Duration::from_secs(10);
        // Gone, or a zombie waiting for init to reap it.
        let running = || {
            std::fs::read_to_string(format!("/proc/{}/stat", grandchild.trim()))
                .is_ok_and(|stat| !stat.contains(") Z "))
        };
        while running() {
            assert!(
                Instant::now() < gone,
                "the group's other process was not stopped"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
