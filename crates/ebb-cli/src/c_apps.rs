//! C programs `./ebb run` knows by name (issue 18): built from Debian's
//! source packages with Ebbflow's musl (`ebb-cbuild`), then run hosted as
//! a Linux process with the hosted POSIX personality, or natively as
//! `apps/c-program` with the program linked in (`EBB_C_PROGRAM`).
//!
//! - `speedtest1`: SQLite's own benchmark (`test/speedtest1.c` of
//!   Debian's `sqlite3`), e.g. `./ebb run speedtest1 --native -- --size
//!   10 /tmp/t.db`;
//! - `sqlite-kv`: a key-value load on SQLite (`apps/sqlite-kv`), e.g.
//!   `./ebb run sqlite-kv --native -- --operations 10000 /tmp/kv.db`;
//! - `redis`: Redis's server (Debian's `redis`, built by its own
//!   Makefile), e.g. `./ebb run redis -- --port 6400 --save ""` hosted,
//!   `./ebb run redis --native --forward 6379` natively on Ebbflow's own
//!   TCP/IP stack, `./ebb run redis --userstack` in a Linux process on
//!   Ebbflow's stack over a TAP device in a namespace.

use std::path::Path;
use std::process::Command;

use ebb_cbuild::posix_programs::Dirs;
use ebb_cbuild::{redis, sqlite};

use crate::{child, stop};

/// The C programs `./ebb run` builds and runs.
pub const C_APPS: &[&str] = &["speedtest1", "sqlite-kv", "redis"];

/// The C programs that do not run natively yet, and why (none today;
/// the check stays for the next one).
const HOSTED_ONLY: &[(&str, &str)] = &[];

/// Why `name` cannot run natively, if it cannot.
#[must_use]
pub fn not_native(name: &str) -> Option<&'static str> {
    HOSTED_ONLY
        .iter()
        .find(|(app, _)| *app == name)
        .map(|(_, why)| *why)
}

/// Whether `name` is one of them.
#[must_use]
pub fn is_c_app(name: &str) -> bool {
    C_APPS.contains(&name)
}

/// The native image that takes a linked C program.
pub const IMAGE: &str = "c-program";

/// The environment variable `apps/c-program`'s build reads.
pub const LINK_ENV: &str = "EBB_C_PROGRAM";

/// What running `app` needs: the hosted executable and the native image's
/// link inputs, built (each step cached).
pub struct Built {
    /// The program linked with musl and the hosted personality.
    pub hosted: std::path::PathBuf,
    /// `EBB_C_PROGRAM` for the native image.
    pub native_inputs: String,
}

/// Builds `app` in `root`'s workspace, saying so first.
pub fn build(root: &Path, app: &str) -> Result<Built, String> {
    eprintln!(
        "ebb: building {app} from Debian's sources with Ebbflow's musl (minutes the first time)..."
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), std::path::PathBuf::from);
    let dirs = Dirs::under(root, &target);
    if app == "redis" {
        let built =
            redis::prepare(&dirs, false).map_err(|error| format!("building {app}: {error}"))?;
        return Ok(Built {
            hosted: built.server,
            native_inputs: joined(&built.native_inputs),
        });
    }
    let programs =
        sqlite::prepare(&dirs, false).map_err(|error| format!("building {app}: {error}"))?;
    let program = programs
        .into_iter()
        .find(|program| program.name == app)
        .ok_or_else(|| format!("no C program '{app}'"))?;
    Ok(Built {
        hosted: program.ebbflow,
        native_inputs: joined(&program.native_inputs),
    })
}

/// The C programs that run on the user-space stack (`--userstack`):
/// those that serve the network.
const ON_USERSTACK: &[&str] = &["redis"];

/// Why `name` cannot run with `--userstack`, if it cannot.
#[must_use]
pub fn not_on_userstack(name: &str) -> Option<String> {
    (!ON_USERSTACK.contains(&name)).then(|| {
        format!(
            "--userstack puts a program's sockets on Ebbflow's stack; '{name}' serves no \
             network (programs that do: {})",
            ON_USERSTACK.join(", ")
        )
    })
}

/// Builds `app` linked with the user-space stack's personality
/// (`ebb-posix-userstack`), saying so first; the executable.
pub fn build_userstack(root: &Path, app: &str) -> Result<std::path::PathBuf, String> {
    if let Some(why) = not_on_userstack(app) {
        return Err(why);
    }
    eprintln!(
        "ebb: building {app} from Debian's sources with Ebbflow's musl, on the user-space stack \
         (minutes the first time)..."
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), std::path::PathBuf::from);
    let dirs = Dirs::under(root, &target);
    let built = redis::prepare(&dirs, false).map_err(|error| format!("building {app}: {error}"))?;
    redis::link_userstack(&dirs, &built).map_err(|error| format!("building {app}: {error}"))
}

/// How to reach `app` on the user-space stack from its namespace, with
/// `args` (Redis's `--port`).
#[must_use]
pub fn userstack_reach(args: &[String]) -> String {
    let port = args
        .windows(2)
        .rev()
        .find(|pair| pair[0] == "--port")
        .map_or("6379", |pair| pair[1].as_str());
    format!("ip netns exec {{ns}} redis-cli -h {{ip}} -p {port} ping")
}

/// Link inputs as `EBB_C_PROGRAM` takes them.
fn joined(inputs: &[std::path::PathBuf]) -> String {
    let inputs: Vec<String> = inputs
        .iter()
        .map(|input| input.display().to_string())
        .collect();
    inputs.join(":")
}

/// The arguments `app` gets natively: the user's, and for Redis
/// `--protected-mode no` first (after a configuration file, which Redis
/// wants first), which the user's own may override. Protected mode
/// refuses clients from other addresses when no password is set, and
/// natively every client comes from another address: QEMU's NAT gives
/// the host's connections 10.0.2.2, and only the host's 127.0.0.1 can
/// reach the forwarded port.
#[must_use]
pub fn native_args(app: &str, args: &[String]) -> Vec<String> {
    if app != "redis" {
        return args.to_vec();
    }
    let config_first = args.first().filter(|arg| !arg.starts_with('-'));
    let mut native: Vec<String> = config_first.into_iter().cloned().collect();
    native.extend(["--protected-mode".to_owned(), "no".to_owned()]);
    native.extend(args.iter().skip(native.len() - 2).cloned());
    native
}

/// Runs the hosted build of `built` with `args`; its exit code.
pub fn run_hosted(app: &str, built: &Built, args: &[String]) -> Result<u8, String> {
    let code = child::run(Command::new(&built.hosted).args(args))?;
    Ok(stop::report(app).unwrap_or(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_programs_are_known_by_name_and_never_shadow_an_application() {
        assert!(is_c_app("speedtest1"));
        assert!(!is_c_app("memcached"));
        let apps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../apps");
        // A C program may keep its source under apps/ (sqlite-kv), but
        // is never a Cargo package there, which `./ebb run` would build.
        for name in C_APPS {
            let manifest = apps.join(name).join("Cargo.toml");
            assert!(
                !manifest.exists(),
                "{name} is both an application and a C program"
            );
        }
        assert!(apps.join(IMAGE).join("Cargo.toml").is_file());
        assert_eq!(not_native("redis"), None);
        assert_eq!(not_native("sqlite-kv"), None);
    }

    #[test]
    fn native_redis_turns_protected_mode_off_before_the_users_own_words() {
        let words = |list: &[&str]| list.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            native_args("redis", &words(&["--port", "7000"])),
            words(&["--protected-mode", "no", "--port", "7000"])
        );
        assert_eq!(
            native_args("redis", &words(&["/etc/redis.conf", "--port", "7000"])),
            words(&[
                "/etc/redis.conf",
                "--protected-mode",
                "no",
                "--port",
                "7000"
            ])
        );
        assert_eq!(native_args("sqlite-kv", &words(&["a"])), words(&["a"]));
    }

    #[test]
    fn only_redis_runs_on_the_user_space_stack_and_its_port_is_in_the_hint() {
        assert_eq!(not_on_userstack("redis"), None);
        let why = not_on_userstack("speedtest1").unwrap();
        assert!(why.contains("serves no network"), "{why}");
        assert!(userstack_reach(&[]).ends_with("-p 6379 ping"));
        let args = ["--port".to_owned(), "7000".to_owned()];
        assert!(userstack_reach(&args).ends_with("-p 7000 ping"));
    }
}
