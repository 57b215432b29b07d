//! [`QemuLauncher`]: a node is one QEMU process, driven over QMP.
//!
//! The QEMU command line itself comes from a [`QemuCommandLine`]: usually
//! [`crate::NativeCommandLine`], the one `./ebb run APP --native` uses
//! (`ebb_testbed::qemu::command`), so a node boots exactly as a single
//! native run does; a trait, so tests and benchmarks may change it. The
//! launcher adds what makes the VM a node the allocator can watch:
//!
//! - a QMP socket in the cluster's private runtime directory (status,
//!   orderly `quit`, vCPU thread ids);
//! - the console and QEMU's own messages in the node's console log;
//! - its own process group, so a Ctrl-C in the terminal reaches the
//!   frontend alone, which then stops the nodes in order;
//! - `PR_SET_PDEATHSIG` = SIGKILL, so QEMU dies with the thread that
//!   started it, also when the frontend is killed with SIGKILL and has no
//!   chance to clean up (prctl(2): the signal comes when the *thread*
//!   that forked the child ends);
//! - a pidfd, so a kill never reaches another process that reused the id.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ebb_testbed::qemu::qmp::{qmp_args, Qmp};

use crate::launcher::{LaunchSpec, LaunchedNode, Launcher};
use crate::node::Exit;
use crate::readiness::console_tail;

/// How long QEMU may take to open its QMP socket (it takes 58–133 ms here;
/// a loaded machine, much longer), and how long a QMP reply may take.
const QMP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long QEMU may take to answer `quit` (it answers at once, then
/// exits).
const QUIT_TIMEOUT: Duration = Duration::from_secs(2);

/// The QEMU command booting one node.
pub trait QemuCommandLine: Send + Sync {
    /// The command (QEMU, under `ip netns exec NS` so that it reaches the
    /// node's TAP device) booting `spec.node.image` with the node's cores,
    /// memory, NIC (`spec.link`) and command line; without `-qmp`, stdio
    /// or a timeout wrapper (the launcher adds the first two, and the
    /// allocator watches the process itself).
    fn command(&self, spec: &LaunchSpec) -> Result<Command, String>;
}

/// Starts nodes as QEMU processes (see the module documentation).
pub struct QemuLauncher {
    command_line: Box<dyn QemuCommandLine>,
}

impl QemuLauncher {
    /// A launcher building QEMU's command line with `command_line`.
    pub fn new(command_line: impl QemuCommandLine + 'static) -> QemuLauncher {
        QemuLauncher {
            command_line: Box::new(command_line),
        }
    }
}

impl Launcher for QemuLauncher {
    fn launch(&self, spec: &LaunchSpec) -> Result<Box<dyn LaunchedNode>, String> {
        let mut command = self.command_line.command(spec)?;
        let socket = spec.runtime_dir.join(format!("qmp-{}.sock", spec.id));
        let _ = std::fs::remove_file(&socket);
        command.args(qmp_args(&socket));
        let log = |e: io::Error| format!("console log {}: {e}", spec.console_log.display());
        let console = File::create(&spec.console_log).map_err(log)?;
        let messages = console.try_clone().map_err(log)?;
        command
            .stdin(Stdio::null())
            .stdout(console)
            .stderr(messages)
            .process_group(0);
        die_with_this_thread(&mut command);
        let mut child = command.spawn().map_err(|e| {
            format!(
                "cannot start `{}`: {e} (./ebb installs qemu-system-x86)",
                command.get_program().to_string_lossy()
            )
        })?;
        let pid = child.id();
        let pidfd = rustix::process::pidfd_open(
            rustix::process::Pid::from_child(&child),
            rustix::process::PidfdFlags::empty(),
        )
        .map_err(|e| format!("pidfd_open({pid}): {e}"));
        let connected = pidfd.and_then(|pidfd| {
            connect_qmp(&mut child, &socket, &spec.console_log).map(|qmp| (pidfd, qmp))
        });
        let (pidfd, qmp) = match connected {
            Ok(parts) => parts,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        Ok(Box::new(QemuNode {
            pid,
            pidfd,
            child: Mutex::new(Some(child)),
            qmp: Mutex::new(qmp),
            console_log: spec.console_log.clone(),
            socket,
        }))
    }
}

/// Waits for QEMU's QMP socket and connects, or reports QEMU's end with
/// its own words (a bad image or option ends it at once, sometimes after
/// it opened the socket: it loads the image later).
fn connect_qmp(child: &mut Child, socket: &Path, console_log: &Path) -> Result<Qmp, String> {
    let exited = |status| {
        format!(
            "QEMU exited at once ({}); its output:\n{}",
            qemu_exit(status),
            console_tail(console_log, 20)
        )
    };
    // Short attempts, so that a QEMU that opened its socket and then
    // ended is noticed at once rather than after the whole timeout.
    let attempt = Duration::from_secs(1);
    let deadline = Instant::now() + QMP_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(exited(status));
        }
        let failure = if socket.exists() {
            match Qmp::connect(socket, attempt) {
                Ok(mut qmp) => return qmp.set_read_timeout(QMP_TIMEOUT).map(|()| qmp),
                Err(e) => e,
            }
        } else {
            "QEMU opened no QMP socket".to_owned()
        };
        if Instant::now() >= deadline {
            return Err(format!("{failure} within {} s", QMP_TIMEOUT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Makes the child get SIGKILL when the thread spawning it ends (the
/// frontend dying included), before it execs. A parent that died between
/// fork and prctl is caught by comparing the parent's id.
#[allow(unsafe_code)]
fn die_with_this_thread(command: &mut Command) {
    let parent = rustix::process::getpid();
    let hook = move || {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        if rustix::process::getppid() != Some(parent) {
            // The frontend is gone already: do not start QEMU at all.
            return Err(io::Error::from(rustix::io::Errno::SRCH));
        }
        Ok(())
    };
    // The hook runs in the forked child before exec, where only
    // async-signal-safe work is allowed. It makes two system calls
    // (prctl(2), getppid(2)) through rustix, which allocates nothing and
    // takes no lock, and its errors are raw OS error numbers.
    // SAFETY: so the hook is async-signal-safe, and it touches no memory
    // shared with the parent.
    unsafe {
        command.pre_exec(hook);
    }
}

/// A node's QEMU.
struct QemuNode {
    pid: u32,
    pidfd: OwnedFd,
    /// Taken by [`LaunchedNode::wait`].
    child: Mutex<Option<Child>>,
    qmp: Mutex<Qmp>,
    console_log: PathBuf,
    socket: PathBuf,
}

impl QemuNode {
    fn qmp(&self) -> std::sync::MutexGuard<'_, Qmp> {
        self.qmp
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl LaunchedNode for QemuNode {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn console_log(&self) -> &Path {
        &self.console_log
    }

    fn control_socket(&self) -> Option<&Path> {
        Some(&self.socket)
    }

    fn stop(&self) -> Result<(), String> {
        // A stop is part of a teardown with a deadline: a QEMU that does
        // not answer `quit` soon is killed instead (the caller's part).
        let mut qmp = self.qmp();
        qmp.set_read_timeout(QUIT_TIMEOUT)?;
        qmp.quit()
    }

    fn kill(&self) -> Result<(), String> {
        match rustix::process::pidfd_send_signal(&self.pidfd, rustix::process::Signal::KILL) {
            // Already gone: what a kill wants.
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => Err(format!("cannot kill QEMU (process {}): {e}", self.pid)),
        }
    }

    fn status(&self) -> Result<String, String> {
        self.qmp().query_status()
    }

    fn vcpu_threads(&self) -> Result<Vec<u32>, String> {
        self.qmp().vcpu_threads()
    }

    fn wait(&self) -> Exit {
        let child = self
            .child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match child.map(|mut child| child.wait()) {
            Some(Ok(status)) => qemu_exit(status),
            // Waited for already, or not waitable: nothing more will come.
            Some(Err(_)) | None => Exit::Code(-1),
        }
    }
}

/// How QEMU ended: the guest application's exit code where QEMU's status
/// carries one (`isa-debug-exit`, see `ebb_boot_abi::exit`), else the
/// status or signal itself.
fn qemu_exit(status: std::process::ExitStatus) -> Exit {
    match status.code().map(ebb_boot_abi::decode_qemu_status) {
        Some(ebb_boot_abi::QemuExit::Guest(code)) => Exit::Guest(code),
        _ => Exit::from_status(status),
    }
}

impl Drop for QemuNode {
    fn drop(&mut self) {
        let _ = self.kill();
        if let Some(mut child) = self
            .child
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn qemus_status_gives_the_applications_exit_code() {
        // Wait statuses: exit status N is N << 8, a signal is its number.
        assert_eq!(qemu_exit(ExitStatusExt::from_raw(7 << 8)), Exit::Guest(2));
        assert_eq!(qemu_exit(ExitStatusExt::from_raw(3 << 8)), Exit::Guest(0));
        assert_eq!(qemu_exit(ExitStatusExt::from_raw(0)), Exit::Code(0));
        assert_eq!(qemu_exit(ExitStatusExt::from_raw(1 << 8)), Exit::Code(1));
        assert_eq!(qemu_exit(ExitStatusExt::from_raw(9)), Exit::Signal(9));
    }
}
