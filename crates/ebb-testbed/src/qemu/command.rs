//! The QEMU command line booting one of our native images: machine,
//! accelerator, memory, the serial console, `isa-debug-exit` (the guest's
//! exit code, see `ebb_boot_abi::exit`), the NIC (QEMU user networking
//! with forwards, or a TAP device) and the kernel command line (platform
//! options, `--`, the application's arguments).
//!
//! `./ebb run APP --native`, `./ebb cluster`'s nodes (`ebb_cluster`'s
//! `NativeCommandLine`), the VM benchmarks and the tests all boot with
//! this one builder. It lives here, beside the QMP client and the other
//! QEMU helpers, rather than in `ebb-cluster`: single native runs and
//! benchmarks are no cluster, and the issue asks for one QEMU layer in the
//! testbed. Without clap: the CLI maps its own option enums onto
//! [`Machine`] and [`Accel`].

use std::path::Path;
use std::process::Command;

use ebb_boot_abi::app_args::encode_arg;
use ebb_boot_abi::CMDLINE_MAX;

/// Default seconds before QEMU is stopped: none. A server runs until it is
/// stopped (Ctrl-C); tests and benchmarks set their own `--timeout`.
pub const DEFAULT_TIMEOUT: u64 = 0;

/// The QEMU machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Machine {
    /// PCIe, ACPI, SeaBIOS: for everything that needs devices.
    #[default]
    Q35,
    /// No PCI, qboot: boots fastest; for boot-only work.
    Microvm,
}

impl Machine {
    /// QEMU's name for it (`-machine NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Machine::Q35 => "q35",
            Machine::Microvm => "microvm",
        }
    }
}

/// The QEMU accelerator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Accel {
    /// KVM where the CPU has hardware virtualization (vmx/svm) and /dev/kvm
    /// exists, TCG otherwise.
    #[default]
    Auto,
    /// QEMU's emulator.
    Tcg,
    /// Hardware virtualization.
    Kvm,
}

/// Settings of one native run (`./ebb run APP --native ...`, a cluster
/// node, a benchmark's guest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// vCPUs (`-smp`); the guest starts one core on each (`cores=N`).
    pub cores: usize,
    /// Guest memory, in QEMU's `-m` syntax.
    pub mem: String,
    /// The machine.
    pub machine: Machine,
    /// The accelerator asked for.
    pub accel: Accel,
    /// Seconds before QEMU is stopped; 0 for no limit.
    pub timeout: u64,
    /// Print the build and QEMU commands and the platform's boot summary.
    pub verbose: bool,
    /// Extra platform options for the kernel command line.
    pub boot_args: Vec<String>,
    /// TCP ports forwarded from 127.0.0.1 to the guest (`[HOST:]GUEST`),
    /// on q35's virtio-net over QEMU user networking.
    pub forwards: Vec<String>,
    /// More QEMU arguments, appended before `-kernel` (extra devices).
    pub qemu_args: Vec<String>,
    /// A TAP device for the virtio-net instead of user networking
    /// (`./ebb run --net tap`, a cluster node's TAP device).
    pub tap: Option<TapNic>,
    /// Run QEMU inside this network namespace (`ip netns exec NS ...`),
    /// where the TAP device is.
    pub namespace: Option<String>,
}

/// The guest NIC's TAP back end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapNic {
    /// The TAP interface, which exists already (created `multi_queue`
    /// when `queues` > 1).
    pub ifname: String,
    /// Queue pairs: one per vCPU for a multi-queue device, 1 for one.
    pub queues: u16,
    /// The NIC's MAC address (the host's permanent neighbour entry names it).
    pub mac: String,
}

impl TapNic {
    /// QEMU's `-netdev` and `-device` for this TAP device: a modern
    /// virtio-net (`disable-legacy=on`); with more than one queue pair,
    /// `queues=N` on the back end and `mq=on` on the device with one MSI-X
    /// vector per queue plus the configuration and control queues
    /// (virtio 1.2 §5.1.6.5.5: 2N + 2). No vhost (there is no
    /// `/dev/vhost-net` here, and the user-space back end is what both
    /// guests of the VM benchmarks get).
    pub fn args(&self) -> Vec<String> {
        let mut netdev = format!(
            "tap,id=net0,ifname={},script=no,downscript=no,vhost=off",
            self.ifname
        );
        let mut device = format!(
            "virtio-net-pci,netdev=net0,disable-legacy=on,mac={}",
            self.mac
        );
        if self.queues > 1 {
            netdev.push_str(&format!(",queues={}", self.queues));
            device.push_str(&format!(
                ",mq=on,vectors={}",
                2 * u32::from(self.queues) + 2
            ));
        }
        vec!["-netdev".to_owned(), netdev, "-device".to_owned(), device]
    }
}

/// A TCP port forwarded from the host's loopback to the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forward {
    /// Port on 127.0.0.1.
    pub host: u16,
    /// The guest's port (it is 10.0.2.15 behind QEMU's user networking).
    pub guest: u16,
}

impl Forward {
    /// Parses `[HOST:]GUEST`.
    pub fn parse(text: &str) -> Result<Forward, String> {
        let port = |p: &str| {
            p.parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("--forward takes [HOST:]GUEST port numbers, not '{text}'"))
        };
        match text.split_once(':') {
            Some((host, guest)) => Ok(Forward {
                host: port(host)?,
                guest: port(guest)?,
            }),
            None => port(text).map(|p| Forward { host: p, guest: p }),
        }
    }
}

/// QEMU's network arguments for `settings`: on q35 a modern virtio-net
/// (`disable-legacy=on`) on user networking with the forwards, or on the
/// TAP device ([`TapNic::args`]); none on microvm (no PCI), nor when the
/// extra QEMU arguments bring their own `-netdev` (a multi-queue TAP
/// device in a test's namespace, say).
pub fn network_args(settings: &Settings) -> Result<Vec<String>, String> {
    if settings.qemu_args.iter().any(|arg| arg == "-netdev") {
        if !settings.forwards.is_empty() {
            return Err(
                "--forward needs the default user networking, not a --qemu-arg -netdev".to_owned(),
            );
        }
        if settings.tap.is_some() {
            return Err("--net tap brings its own -netdev: drop the --qemu-arg -netdev".to_owned());
        }
        return Ok(Vec::new());
    }
    if settings.machine != Machine::Q35 {
        if !settings.forwards.is_empty() {
            return Err("--forward needs --machine q35 (virtio-net on PCI)".to_owned());
        }
        if settings.tap.is_some() {
            return Err("--net tap needs --machine q35 (virtio-net on PCI)".to_owned());
        }
        return Ok(Vec::new());
    }
    if let Some(tap) = &settings.tap {
        if !settings.forwards.is_empty() {
            return Err(
                "--forward is for --net user: on a TAP device, reach the guest's ports \
                 at its address inside the namespace"
                    .to_owned(),
            );
        }
        return Ok(tap.args());
    }
    let mut netdev = "user,id=net0".to_owned();
    for forward in &settings.forwards {
        let forward = Forward::parse(forward)?;
        netdev.push_str(&format!(
            ",hostfwd=tcp:127.0.0.1:{}-:{}",
            forward.host, forward.guest
        ));
    }
    Ok(vec![
        "-netdev".to_owned(),
        netdev,
        "-device".to_owned(),
        "virtio-net-pci,netdev=net0,disable-legacy=on".to_owned(),
    ])
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cores: 1,
            mem: "512M".to_owned(),
            machine: Machine::Q35,
            accel: Accel::Auto,
            timeout: DEFAULT_TIMEOUT,
            verbose: false,
            boot_args: Vec::new(),
            forwards: Vec::new(),
            qemu_args: Vec::new(),
            tap: None,
            namespace: None,
        }
    }
}

/// The kernel command line: platform options, `--`, the application's
/// arguments, each one word (`ebb_boot_abi::app_args`: empty arguments
/// and spaces pass percent-encoded, and the guest decodes them).
pub fn kernel_cmdline(
    settings: &Settings,
    tsc_khz: Option<u64>,
    args: &[String],
) -> Result<String, String> {
    let bad =
        |word: &&String| word.is_empty() || word.contains(char::is_whitespace) || *word == "--";
    if let Some(arg) = args
        .iter()
        .chain(&settings.boot_args)
        .find(|arg| arg.contains('\0'))
    {
        return Err(format!(
            "native arguments and --boot-arg cannot contain a NUL byte: {arg:?}"
        ));
    }
    if let Some(arg) = settings.boot_args.iter().find(bad) {
        return Err(format!(
            "--boot-arg cannot be empty, '--' or contain spaces: '{arg}'"
        ));
    }
    let mut words = Vec::new();
    if let Some(khz) = tsc_khz {
        words.push(format!("tsc_khz={khz}"));
    }
    words.push(format!("machine={}", settings.machine.name()));
    words.push(format!("cores={}", settings.cores));
    if settings.verbose {
        words.push("verbose".to_owned());
    }
    words.extend(settings.boot_args.iter().cloned());
    words.push("--".to_owned());
    words.extend(args.iter().map(|arg| encode_arg(arg)));
    let line = words.join(" ");
    // The launcher adds `wall=` (about 30 bytes) in front.
    let room = CMDLINE_MAX - 64;
    if line.len() > room {
        return Err(format!(
            "the kernel command line would be {} bytes, and the guest keeps {room} \
             (each whitespace character and `%` in an argument takes 3 bytes per byte): \
             pass long input as a file (--files DIR) instead",
            line.len()
        ));
    }
    Ok(line)
}

/// `[ip netns exec NS] timeout --foreground SECS qemu-system-x86_64 ...`
/// booting `image`.
///
/// # Errors
///
/// Network settings that do not go together ([`network_args`]'s
/// sentence): a command without the NIC asked for would boot a guest
/// that cannot be reached.
pub fn qemu_command(
    settings: &Settings,
    image: &Path,
    cmdline: &str,
    kvm: bool,
) -> Result<Command, String> {
    let network = network_args(settings)?;
    let mut prefix: Vec<String> = Vec::new();
    if let Some(namespace) = &settings.namespace {
        // `ip netns exec` execs its command: signals to this process
        // reach `timeout`, which passes them on to QEMU.
        prefix.extend(["ip", "netns", "exec", namespace].map(str::to_owned));
    }
    if settings.timeout > 0 {
        prefix
            .extend(["timeout", "--foreground", &settings.timeout.to_string()].map(str::to_owned));
    }
    let mut c = match prefix.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg("qemu-system-x86_64");
            c
        }
        None => Command::new("qemu-system-x86_64"),
    };
    c.args(["-machine", settings.machine.name()]);
    if kvm {
        c.args(["-accel", "kvm", "-cpu", "host"]);
    } else {
        c.args(["-accel", "tcg", "-cpu", "max"]);
    }
    c.args(["-smp", &settings.cores.to_string(), "-m", &settings.mem])
        // Guest RAM from a memfd rather than anonymous memory: QEMU asks
        // for transparent huge pages on anonymous RAM, and the host's
        // first touch of each 2 MiB (zeroing, sometimes compaction) made
        // boot times swing from 17 to 270 ms under load; shared memory
        // gets 4 KiB pages (crates/ebb-native/README.md, "Measured").
        .args([
            "-object",
            &format!("memory-backend-memfd,id=ram,size={}", settings.mem),
            "-machine",
            "memory-backend=ram",
        ])
        .args([
            "-nodefaults",
            "-nographic",
            "-monitor",
            "none",
            "-no-reboot",
        ])
        .args(["-serial", "stdio"])
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
    if settings.machine == Machine::Q35 {
        // SeaBIOS's serial console would print its banner before the guest.
        c.args(["-fw_cfg", "name=etc/sercon-port,string=0"]);
    }
    c.args(network);
    c.args(&settings.qemu_args);
    c.arg("-kernel").arg(image).args(["-append", cmdline]);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qemu::shell_words;

    #[test]
    fn the_command_line_carries_platform_options_then_app_arguments() {
        let settings = Settings {
            verbose: true,
            boot_args: vec!["crash=ud2".into()],
            ..Settings::default()
        };
        assert_eq!(
            kernel_cmdline(&settings, Some(2_445_426), &["a".into(), "--b".into()]).unwrap(),
            "tsc_khz=2445426 machine=q35 cores=1 verbose crash=ud2 -- a --b"
        );
        let bad = Settings {
            boot_args: vec!["--".into()],
            ..Settings::default()
        };
        assert!(
            matches!(kernel_cmdline(&bad, None, &[]), Err(e) if e.contains("--boot-arg cannot be empty"))
        );
        assert_eq!(
            kernel_cmdline(
                &Settings::default(),
                None,
                &["--save".into(), String::new(), "a b".into()]
            )
            .unwrap(),
            "machine=q35 cores=1 -- --save % a%20b",
            "an empty argument and a space pass encoded (ebb_boot_abi::app_args)"
        );
        let long = kernel_cmdline(&Settings::default(), None, &[" ".repeat(1400)]);
        assert!(matches!(long, Err(e) if e.contains("the guest keeps 4032")));
        let nul = kernel_cmdline(&Settings::default(), None, &["a\0b".into()]);
        assert!(matches!(nul, Err(e) if e.contains("cannot contain a NUL byte")));
        let nul_boot = Settings {
            boot_args: vec!["log=\0".into()],
            ..Settings::default()
        };
        assert!(
            matches!(kernel_cmdline(&nul_boot, None, &[]), Err(e) if e.contains("cannot contain a NUL byte"))
        );
    }

    #[test]
    fn qemu_runs_under_timeout_with_debug_exit() {
        let settings = Settings {
            timeout: 60,
            ..Settings::default()
        };
        let c = qemu_command(&settings, Path::new("/img"), "x -- y", false).expect("command");
        let words = shell_words(&c);
        assert!(
            words.starts_with(
                "timeout --foreground 60 qemu-system-x86_64 -machine q35 -accel tcg -cpu max"
            ),
            "{words}"
        );
        assert!(
            words.contains("-device isa-debug-exit,iobase=0xf4,iosize=0x04"),
            "{words}"
        );
        assert!(
            words.contains(
                "-m 512M -object memory-backend-memfd,id=ram,size=512M -machine memory-backend=ram"
            ),
            "guest RAM from a memfd: {words}"
        );
        assert!(words.ends_with("-kernel /img -append 'x -- y'"), "{words}");
        let microvm = Settings {
            machine: Machine::Microvm,
            timeout: 0,
            ..Settings::default()
        };
        let words =
            shell_words(&qemu_command(&microvm, Path::new("/img"), "", true).expect("command"));
        assert!(
            words.starts_with("qemu-system-x86_64 -machine microvm -accel kvm -cpu host"),
            "{words}"
        );
        assert!(!words.contains("sercon"), "{words}");
    }

    #[test]
    fn q35_gets_a_modern_virtio_net_with_the_forwards_and_microvm_none() {
        assert_eq!(
            Forward::parse("7007"),
            Ok(Forward {
                host: 7007,
                guest: 7007
            })
        );
        assert_eq!(
            Forward::parse("17007:7007"),
            Ok(Forward {
                host: 17007,
                guest: 7007
            })
        );
        for bad in ["", "0", "x", "1:", "70000", "1:2:3"] {
            assert!(
                matches!(Forward::parse(bad), Err(e) if e.contains("--forward takes [HOST:]GUEST port numbers")),
                "{bad}"
            );
        }
        let q35 = Settings {
            forwards: vec!["17007:7007".to_owned(), "11211".to_owned()],
            ..Settings::default()
        };
        let words =
            shell_words(&qemu_command(&q35, Path::new("/img"), "", false).expect("command"));
        assert!(
            words.contains(
                "-netdev user,id=net0,hostfwd=tcp:127.0.0.1:17007-:7007,hostfwd=tcp:127.0.0.1:11211-:11211 \
                 -device virtio-net-pci,netdev=net0,disable-legacy=on"
            ),
            "{words}"
        );
        let microvm = Settings {
            machine: Machine::Microvm,
            ..Settings::default()
        };
        assert_eq!(network_args(&microvm), Ok(vec![]));
        let forwarded = Settings {
            forwards: vec!["7007".to_owned()],
            ..microvm
        };
        assert!(
            matches!(network_args(&forwarded), Err(e) if e.contains("--forward needs --machine q35"))
        );
        // The command is refused too, rather than built without the NIC.
        assert_eq!(
            qemu_command(&forwarded, Path::new("/img"), "", false).err(),
            network_args(&forwarded).err()
        );
        let own = Settings {
            qemu_args: vec!["-netdev".to_owned(), "tap,id=n".to_owned()],
            ..Settings::default()
        };
        assert_eq!(network_args(&own), Ok(vec![]));
        let both = Settings {
            forwards: vec!["7007".to_owned()],
            ..own
        };
        assert!(
            matches!(network_args(&both), Err(e) if e.contains("--forward needs the default user networking"))
        );
    }
}
