//! `./ebb run APP --userstack`: the application on Ebbflow's own network
//! stack over a TAP device, in a network namespace of its own (QEMU-NOTES:
//! TAP devices and private addresses only inside a namespace we create and
//! delete). The namespace holds the TAP device, with the kernel's side at
//! [`KERNEL_ADDR`]; the application's stack takes [`STACK_ADDR`]. The
//! namespace is deleted when the application exits, also after a SIGTERM
//! or SIGINT to `./ebb` (passed on to the application, see `ebb_cli::stop`).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};

use crate::{child, stop};

/// The TAP device inside the namespace.
pub const TAP: &str = "ebb0";
/// The kernel's side of the link.
pub const KERNEL_ADDR: &str = "10.99.0.1/24";
/// The user-space stack's address.
pub const STACK_ADDR: &str = "10.99.0.2/24";

/// The namespace's name for `app` run by process `pid`.
pub fn namespace_name(app: &str, pid: u32) -> String {
    format!("ebb-{app}-{pid}")
}

/// The namespace's TAP device, with the kernel's side at [`KERNEL_ADDR`]
/// (the stack takes its address itself, so no neighbour entry).
pub fn tap_config() -> TapConfig {
    TapConfig::from_cidr(TAP, KERNEL_ADDR).expect("KERNEL_ADDR is ADDR/LEN")
}

/// The application's command line inside namespace `ns`: `binary`, the
/// user-space stack's options, then `args`.
pub fn app_command(ns: &str, binary: &Path, args: &[String]) -> Command {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", ns])
        .arg(binary)
        .args(["--tap", TAP, "--tap-ip", STACK_ADDR])
        .args(args);
    command
}

/// Builds `app`, sets up the namespace, runs the application in it on the
/// user-space stack with `args`, and deletes the namespace. Returns the
/// application's exit code.
pub fn run(root: &Path, app: &str, args: &[String]) -> Result<u8, String> {
    require_root()?;
    let binary = match child::build_hosted(root, app)? {
        child::Built::Binary(binary) => binary,
        child::Built::Stopped(code) => return Ok(code),
    };
    run_in_namespace(app, None, |ns| app_command(ns, &binary, args))
}

/// Runs the C program `binary` (linked with the user-space stack's
/// personality, `ebb-posix-userstack`) as `app` with `args` in a
/// namespace of its own, as [`run`] does an application. Its stack's
/// settings travel in the environment ([`c_program_command`]);
/// `reach` says how to reach it once it runs.
pub fn run_c_program(app: &str, binary: &Path, args: &[String], reach: &str) -> Result<u8, String> {
    require_root()?;
    run_in_namespace(app, Some(reach), |ns| c_program_command(ns, binary, args))
}

/// The C program's command line inside namespace `ns`: `binary` with
/// `args`, and the user-space stack's settings in its environment (its
/// command line is the program's own).
pub fn c_program_command(ns: &str, binary: &Path, args: &[String]) -> Command {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", ns])
        .arg(binary)
        .args(args)
        .env("EBB_USERSTACK_TAP", TAP)
        .env("EBB_USERSTACK_IP", STACK_ADDR);
    command
}

fn require_root() -> Result<(), String> {
    ebb_testbed::require(&[ebb_testbed::Need::Root, ebb_testbed::Need::Ip]).map_err(|why| {
        format!(
            "--userstack needs root (it creates a network namespace and a TAP device): \
             run ./ebb as root ({why})"
        )
    })
}

/// Sets up the namespace, runs `command(namespace)` in it, and deletes
/// the namespace; the command's exit code. `reach` (a command, with
/// `{ns}` and `{ip}` for the namespace and the stack's address) is said
/// up front when the program prints no ready line of Ebbflow's.
fn run_in_namespace(
    app: &str,
    reach: Option<&str>,
    command: impl FnOnce(&str) -> Command,
) -> Result<u8, String> {
    let ns = namespace_name(app, std::process::id());
    // Dropped on every return: a half-made namespace is deleted too.
    let namespace = NetNamespace::create(&ns)?.announce_deletion("userstack");
    let tap = TapDevice::create(&namespace, &tap_config())?;
    let stack_ip = STACK_ADDR.split('/').next().unwrap_or(STACK_ADDR);
    let how = match reach {
        Some(reach) => format!(
            "Once it is ready, reach it from the namespace:\n  {}\n",
            reach.replace("{ns}", &ns).replace("{ip}", stack_ip)
        ),
        None => {
            "Once it is ready, how to reach what it listens on follows its ready line. ".to_owned()
        }
    };
    println!(
        "userstack: {app} runs on Ebbflow's own stack at {stack_ip} on TAP {TAP} in network \
         namespace {ns} (kernel side {KERNEL_ADDR}). Reach it from the namespace, e.g.:\n  \
         ip netns exec {ns} ping -c 3 {stack_ip}\n\
         {how}Ctrl-C stops it and deletes the namespace."
    );
    let code = run_showing_hints(&mut command(&ns), &ns);
    drop(tap);
    drop(namespace);
    Ok(stop::report(app).unwrap_or(code?))
}

/// How to reach, from namespace `ns`, each address an application's ready
/// line (`NAME: ready: TCP 0.0.0.0:7007, UDP 0.0.0.0:7007 (...)`, see
/// `ebb_app::ready`) names; addresses after `UDP` are UDP, others TCP.
/// Nothing for any other line.
pub fn reach_hints(line: &str, ns: &str, stack_ip: &str) -> Vec<String> {
    let Some((_, what)) = line.split_once(": ready: ") else {
        return Vec::new();
    };
    let mut udp = false;
    let mut hints = Vec::new();
    for word in what.split(|c: char| c.is_whitespace() || c == ',') {
        match word {
            "UDP" => udp = true,
            "TCP" => udp = false,
            _ => {
                if let Ok(addr) = word.parse::<SocketAddr>() {
                    let port = addr.port();
                    hints.push(if udp {
                        format!(
                            "UDP port {port}: ip netns exec {ns} python3 -c \"import socket; \
                             s=socket.socket(2,2); s.settimeout(2); \
                             s.sendto(b'hi',('{stack_ip}',{port})); print(s.recv(99))\""
                        )
                    } else {
                        format!("TCP port {port}: ip netns exec {ns} nc {stack_ip} {port}")
                    });
                }
            }
        }
    }
    hints
}

/// Runs `command` to completion like [`child::run`] (which passes a stop
/// signal on to it, so that it stops and the namespace is deleted), and
/// after its ready line says how to reach what it listens on.
fn run_showing_hints(command: &mut Command, namespace: &str) -> Result<u8, String> {
    command.stdout(Stdio::piped());
    // `ip netns exec` becomes the application (it execs), so the process
    // the signal is passed to is the application.
    let mut app = command
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", child::describe(command)))?;
    if let Some(stdout) = app.stdout.take() {
        let ns = namespace.to_owned();
        std::thread::spawn(move || {
            let stack_ip = STACK_ADDR.split('/').next().unwrap_or(STACK_ADDR);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("{line}");
                for hint in reach_hints(&line, &ns, stack_ip) {
                    println!("userstack: {hint}");
                }
            }
        });
    }
    let status =
        stop::wait_passing_signals(&mut app).map_err(|e| format!("waiting for the app: {e}"))?;
    Ok(child::exit_code(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_is_set_up_with_the_tap_and_kernel_address() {
        let ns = namespace_name("echo", 42);
        assert_eq!(ns, "ebb-echo-42");
        let commands: Vec<String> = tap_config()
            .setup_commands(&ns)
            .iter()
            .map(|line| line.join(" "))
            .collect();
        assert_eq!(
            commands,
            [
                "-n ebb-echo-42 tuntap add dev ebb0 mode tap",
                "-n ebb-echo-42 addr add 10.99.0.1/24 dev ebb0",
                "-n ebb-echo-42 link set ebb0 up",
            ]
        );
    }

    #[test]
    fn the_hints_name_what_the_ready_line_says_the_app_listens_on() {
        let memcached = reach_hints(
            "memcached: ready: listening on 0.0.0.0:11211 (1 core, userstack)",
            "ns",
            "10.99.0.2",
        );
        assert_eq!(
            memcached,
            ["TCP port 11211: ip netns exec ns nc 10.99.0.2 11211"]
        );
        let echo = reach_hints(
            "echo: ready: TCP 0.0.0.0:7007, UDP 0.0.0.0:7008 (1 core, userstack)",
            "ns",
            "10.99.0.2",
        );
        assert_eq!(echo.len(), 2);
        assert!(echo[0].starts_with("TCP port 7007: "), "{echo:?}");
        assert!(
            echo[1].starts_with("UDP port 7008: ") && echo[1].contains("7008))"),
            "{echo:?}"
        );
        assert!(reach_hints("memcached: listening", "ns", "10.99.0.2").is_empty());
    }

    #[test]
    fn the_app_runs_inside_the_namespace_with_the_stack_options() {
        let command = app_command(
            "ebb-echo-42",
            Path::new("/r/target/release/echo"),
            &["--cores".into(), "1".into()],
        );
        assert_eq!(command.get_program(), "ip");
        assert_eq!(
            child::describe(&command),
            "ip netns exec ebb-echo-42 /r/target/release/echo --tap ebb0 --tap-ip 10.99.0.2/24 \
             --cores 1"
        );
    }

    #[test]
    fn a_c_program_gets_its_own_words_and_the_stack_in_its_environment() {
        let command = c_program_command(
            "ebb-redis-42",
            Path::new("/r/redis-server-userstack"),
            &["--port".into(), "7000".into()],
        );
        assert_eq!(
            child::describe(&command),
            "ip netns exec ebb-redis-42 /r/redis-server-userstack --port 7000"
        );
        let env: Vec<(String, String)> = command
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.unwrap_or_default().to_string_lossy().into_owned(),
                )
            })
            .collect();
        assert!(env.contains(&("EBB_USERSTACK_TAP".into(), "ebb0".into())));
        assert!(env.contains(&("EBB_USERSTACK_IP".into(), "10.99.0.2/24".into())));
    }
}
