//! Booting the guest under QEMU: the command line (q35, virtio-net-pci
//! without legacy, the same memory as Ebbflow's guest), and a running QEMU
//! whose serial console is watched for the ready marker and which is always
//! stopped (under `timeout`, and on drop).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::image::GuestImage;
use super::init::{FAILURE_MARKER, READY_MARKER};
use crate::qemu::shell_words;

/// The MAC address of the guest's NIC (a locally administered QEMU one).
pub const GUEST_MAC: &str = "52:54:00:eb:b0:01";
/// How many serial lines are kept for error messages.
const SERIAL_LINES_KEPT: usize = 400;

/// How the guest's NIC reaches the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestNetwork {
    /// QEMU user networking, forwarding TCP 127.0.0.1:HOST to the guest's
    /// port GUEST for each `(HOST, GUEST)`. No root needed; single queue.
    User {
        /// `(host port, guest port)` pairs.
        forwards: Vec<(u16, u16)>,
    },
    /// A TAP device that already exists (in the network namespace QEMU is
    /// started in); `queues` > 1 asks for multi-queue.
    Tap {
        /// The TAP interface's name.
        ifname: String,
        /// Queue pairs (1 for a single queue).
        queues: u16,
    },
}

/// What a boot needs besides the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootSettings {
    /// Guest memory in QEMU's `-m` syntax (Ebbflow's default: 512M).
    pub memory: String,
    /// vCPUs.
    pub cpus: u16,
    /// The kernel command line (see `init::kernel_cmdline`).
    pub cmdline: String,
    /// The NIC's back end.
    pub network: GuestNetwork,
    /// Seconds after which `timeout` stops QEMU whatever happens.
    pub timeout_secs: u64,
    /// `-accel` value: `tcg` (see QEMU-NOTES: no usable KVM here) or `kvm`.
    pub accel: String,
    /// Run QEMU inside this network namespace (`ip netns exec NAME`).
    pub namespace: Option<String>,
    /// Pin QEMU (all its threads) to these host CPUs (`taskset -c LIST`).
    pub pin_cpus: Option<String>,
    /// Words run before `timeout`, e.g. `nice -n -10` or `chrt -f 1`
    /// (QEMU's scheduling priority).
    pub priority: Vec<String>,
    /// The NIC's MAC address: [`GUEST_MAC`] unless guests share a network.
    pub mac: String,
    /// More QEMU arguments, last on the line (e.g. `-plugin FILE,...`).
    pub qemu_args: Vec<String>,
}

impl BootSettings {
    /// One vCPU, 512 MiB, TCG, a 120 s limit: the headline setup.
    pub fn new(cmdline: String, network: GuestNetwork) -> Self {
        BootSettings {
            memory: "512M".to_owned(),
            cpus: 1,
            cmdline,
            network,
            timeout_secs: 120,
            accel: "tcg".to_owned(),
            namespace: None,
            pin_cpus: None,
            priority: Vec::new(),
            mac: GUEST_MAC.to_owned(),
            qemu_args: Vec::new(),
        }
    }
}

/// The command that boots `image` with `settings`: `[ip netns exec NS]
/// [taskset -c CPUS] [PRIORITY...] timeout SECS qemu-system-x86_64 ...`.
pub fn qemu_command(image: &GuestImage, settings: &BootSettings) -> Command {
    let mut words: Vec<String> = Vec::new();
    if let Some(namespace) = &settings.namespace {
        words.extend(["ip", "netns", "exec", namespace].map(str::to_owned));
    }
    if let Some(cpus) = &settings.pin_cpus {
        words.extend(["taskset", "-c", cpus].map(str::to_owned));
    }
    words.extend(settings.priority.iter().cloned());
    words.extend(
        [
            "timeout",
            "--kill-after=5",
            &settings.timeout_secs.to_string(),
            "qemu-system-x86_64",
            "-machine",
            "q35",
            "-accel",
            &settings.accel,
            "-cpu",
            "max",
            "-smp",
            &settings.cpus.to_string(),
            "-m",
            &settings.memory,
            "-nographic",
            "-nodefaults",
            "-no-user-config",
            "-no-reboot",
            "-serial",
            "stdio",
            "-monitor",
            "none",
        ]
        .map(str::to_owned),
    );
    words.push("-kernel".to_owned());
    words.push(image.kernel.display().to_string());
    words.push("-initrd".to_owned());
    words.push(image.initrd.display().to_string());
    words.push("-append".to_owned());
    words.push(settings.cmdline.clone());
    let (netdev, device_extra) = match &settings.network {
        GuestNetwork::User { forwards } => {
            let mut netdev = "user,id=n0".to_owned();
            for (host, guest) in forwards {
                netdev.push_str(&format!(",hostfwd=tcp:127.0.0.1:{host}-:{guest}"));
            }
            (netdev, String::new())
        }
        GuestNetwork::Tap { ifname, queues } if *queues > 1 => (
            format!("tap,id=n0,ifname={ifname},script=no,downscript=no,queues={queues}"),
            // One vector per queue of each direction, plus config and control.
            format!(",mq=on,vectors={}", 2 * queues + 2),
        ),
        GuestNetwork::Tap { ifname, .. } => (
            format!("tap,id=n0,ifname={ifname},script=no,downscript=no"),
            String::new(),
        ),
    };
    words.extend([
        "-netdev".to_owned(),
        netdev,
        "-device".to_owned(),
        // `romfile=`: no iPXE option ROM, the kernel is loaded directly.
        format!(
            "virtio-net-pci,disable-legacy=on,netdev=n0,mac={},romfile={device_extra}",
            settings.mac
        ),
    ]);
    words.extend(settings.qemu_args.iter().cloned());
    let mut command = Command::new(&words[0]);
    command.args(&words[1..]);
    command
}

/// A QEMU process booting the guest. Dropping it stops QEMU.
pub struct RunningGuest {
    child: Child,
    started: Instant,
    lines: Receiver<String>,
    serial: Arc<Mutex<Vec<String>>>,
}

impl RunningGuest {
    /// Starts `command` (from [`qemu_command`]) with its serial console
    /// (stdout and stderr) captured.
    pub fn spawn(mut command: Command) -> Result<RunningGuest, String> {
        let shown = shell_words(&command);
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {shown}: {e}"))?;
        let started = Instant::now();
        let serial = Arc::new(Mutex::new(Vec::new()));
        let (sender, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        for stream in [
            Box::new(stdout) as Box<dyn std::io::Read + Send>,
            Box::new(stderr),
        ] {
            let sender = sender.clone();
            let serial = Arc::clone(&serial);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    let line = line.trim_end_matches('\r').to_owned();
                    if let Ok(mut kept) = serial.lock() {
                        if kept.len() == SERIAL_LINES_KEPT {
                            kept.remove(0);
                        }
                        kept.push(line.clone());
                    }
                    let _ = sender.send(line);
                }
            });
        }
        Ok(RunningGuest {
            child,
            started,
            lines,
            serial,
        })
    }

    /// Waits until the guest prints [`READY_MARKER`] and returns the time
    /// since QEMU started; fails on the failure marker, QEMU's exit, or
    /// after `limit`.
    pub fn wait_ready(&mut self, limit: Duration) -> Result<Duration, String> {
        self.wait_for(READY_MARKER, limit)
    }

    /// Waits until a serial line contains `marker` (a native image's
    /// application prints its own) and returns the time since QEMU
    /// started; fails like [`wait_ready`](Self::wait_ready).
    pub fn wait_for(&mut self, marker: &str, limit: Duration) -> Result<Duration, String> {
        self.lines_until(marker, limit)?;
        Ok(self.started.elapsed())
    }

    /// The serial lines from now until one containing `marker` (which is
    /// returned last); fails like [`wait_ready`](Self::wait_ready).
    pub fn lines_until(&mut self, marker: &str, limit: Duration) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + limit;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(marker) => {
                    seen.push(line);
                    return Ok(seen);
                }
                Ok(line) if line.contains(FAILURE_MARKER) => {
                    return Err(self.failure(&format!("the guest failed: {line}")))
                }
                Ok(line) => seen.push(line),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.failure(&format!(
                        "the guest did not print {marker} within {} s",
                        limit.as_secs()
                    )))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    return Err(self.failure(&format!(
                        "QEMU exited ({status}) before the guest printed {marker}"
                    )));
                }
            }
        }
    }

    /// Time since QEMU was started.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// QEMU's process id (the `timeout` wrapper's, which forwards signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last `n` lines of the serial console and QEMU's messages.
    pub fn serial_tail(&self, n: usize) -> String {
        let kept = self.serial.lock().map(|k| k.clone()).unwrap_or_default();
        kept[kept.len().saturating_sub(n)..].join("\n")
    }

    fn failure(&self, what: &str) -> String {
        format!(
            "{what}\n--- last serial lines ---\n{}",
            self.serial_tail(40)
        )
    }

    /// Stops QEMU: SIGTERM (which `timeout` forwards to QEMU), then SIGKILL
    /// if it has not exited within two seconds.
    pub fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // QEMU itself, under the wrappers (`ip netns exec`, `taskset`,
        // `nice` exec; `timeout` forks): killing only `timeout` would
        // leave QEMU running.
        let qemu = crate::qemu::process::find_qemu(self.child.id(), 4)
            .and_then(|pid| libc::pid_t::try_from(pid).ok());
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) with a pid of our own child that has not been
            // reaped yet (checked above), so it cannot name another process.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(qemu) = qemu {
            // Its parent (`timeout`, our child) has not been reaped, and it
            // would have exited had QEMU exited (checked in the loop above).
            // SAFETY: kill(2) on the QEMU found under our own child a moment
            // ago, whose pid cannot have been reused while that parent is
            // unreaped.
            unsafe { libc::kill(qemu, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RunningGuest {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn image() -> GuestImage {
        GuestImage::in_dir(&PathBuf::from("/c"))
    }

    #[test]
    fn user_networking_forwards_loopback_to_memcached() {
        let settings = BootSettings::new(
            "console=ttyS0".into(),
            GuestNetwork::User {
                forwards: vec![(4242, 11211), (4243, 5003)],
            },
        );
        let line = shell_words(&qemu_command(&image(), &settings));
        assert_eq!(
            line,
            "timeout --kill-after=5 120 qemu-system-x86_64 -machine q35 -accel tcg -cpu max \
             -smp 1 -m 512M -nographic -nodefaults -no-user-config -no-reboot -serial stdio \
             -monitor none -kernel /c/vmlinuz -initrd /c/initrd.gz -append console=ttyS0 \
             -netdev user,id=n0,hostfwd=tcp:127.0.0.1:4242-:11211,hostfwd=tcp:127.0.0.1:4243-:5003 \
             -device virtio-net-pci,disable-legacy=on,netdev=n0,mac=52:54:00:eb:b0:01,romfile="
        );
    }

    #[test]
    fn tap_runs_in_the_namespace_with_multiqueue_when_asked() {
        let mut settings = BootSettings::new(
            "a b".into(),
            GuestNetwork::Tap {
                ifname: "ebbtap0".into(),
                queues: 4,
            },
        );
        settings.namespace = Some("ebb-1-x".into());
        settings.cpus = 4;
        let line = shell_words(&qemu_command(&image(), &settings));
        assert!(line.starts_with("ip netns exec ebb-1-x timeout "), "{line}");
        settings.pin_cpus = Some("1".into());
        settings.priority = ["nice", "-n", "-10"].map(String::from).to_vec();
        let pinned = shell_words(&qemu_command(&image(), &settings));
        assert!(
            pinned.starts_with("ip netns exec ebb-1-x taskset -c 1 nice -n -10 timeout "),
            "{pinned}"
        );
        assert!(line.contains(" -smp 4 "), "{line}");
        assert!(line.contains(" -append 'a b' "), "{line}");
        assert!(
            line.ends_with(
                "-netdev tap,id=n0,ifname=ebbtap0,script=no,downscript=no,queues=4 \
                 -device virtio-net-pci,disable-legacy=on,netdev=n0,mac=52:54:00:eb:b0:01,romfile=,mq=on,vectors=10"
            ),
            "{line}"
        );
    }
}
