//! memcached as an Ebbflow application (`ebb-app`): its options, named as
//! memcached 1.6 names them and the same on every platform, and the
//! server's start: the store, the counters, a listener on every core that
//! has a network stack, the ready line.

use core::net::SocketAddr;

use ebb_app::{exit, App, Args, Launch, NodeContract, Opt, UsageError};
use ebb_event::spawn_task;

use crate::memory::fit_memory_limit;
use crate::{accept_fn, Server, Settings};

/// memcached's port unless told otherwise.
pub const DEFAULT_PORT: u16 = 11211;

const OPTIONS: &[Opt] = &[
    Opt::value('p', "port", "PORT", "TCP port to listen on (default 11211)"),
    Opt::value(
        'l',
        "listen",
        "ADDR",
        "Interface to listen on (default 127.0.0.1 on kernel sockets, 0.0.0.0 on our stack)",
    ),
    Opt::value(
        'm',
        "memory-limit",
        "MB",
        "Item memory in megabytes (default 64)",
    ),
    Opt::value(
        'I',
        "max-item-size",
        "SIZE",
        "Largest item, e.g. 1m, 512k (default 1m)",
    ),
    Opt::value(
        'c',
        "conn-limit",
        "NUM",
        "Most simultaneous connections (default 1024)",
    ),
    Opt::value(
        't',
        "threads",
        "NUM",
        "Cores to serve on (default: every core; natively the launcher's --cores)",
    ),
    Opt::flag('C', "disable-cas", "Do not use CAS"),
    Opt::flag(
        'A',
        "enable-shutdown",
        "The text `shutdown` command stops the server",
    ),
    Opt::value(
        'U',
        "udp-port",
        "PORT",
        "Accepted for compatibility; only 0 (off)",
    ),
    Opt::count('v', "verbose", "Verbose (repeat for more)"),
];

/// The application.
pub static APP: App = App {
    name: "memcached",
    about: "memcached 1.6-compatible server on Ebbflow (text, binary and meta protocols).",
    options: OPTIONS,
    operands: None,
    setup,
};

/// `-I`'s sizes: a number with an optional k, m or g (binary units).
fn size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last()? {
        (i, 'k' | 'K') => (&text[..i], 1 << 10),
        (i, 'm' | 'M') => (&text[..i], 1 << 20),
        (i, 'g' | 'G') => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

/// A number above 0 for option `id`, if given.
fn positive(args: &Args, id: &str) -> Result<Option<usize>, UsageError> {
    args.value(id)
        .map(|text| {
            text.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| args.invalid(id, text, "a number above 0"))
        })
        .transpose()
}

/// The server's settings and address from the command line, and the
/// cores `-t` asks for.
///
/// # Errors
///
/// A value memcached would refuse.
pub fn configure(args: &Args) -> Result<(Settings, SocketAddr, Option<usize>), UsageError> {
    let mut settings = Settings::default();
    let listen = args.parse_or("listen", ebb_app::net::default_listen_ip(), "an IP address")?;
    let port = args.parse_or("port", DEFAULT_PORT, "a port number")?;
    if let Some(megabytes) = positive(args, "memory-limit")? {
        settings.memory_limit_given = true;
        settings.memory_limit = megabytes.checked_mul(1 << 20).ok_or_else(|| {
            args.invalid(
                "memory-limit",
                args.value("memory-limit").unwrap_or_default(),
                "fewer megabytes",
            )
        })?;
    }
    if let Some(text) = args.value("max-item-size") {
        settings.item_size_max = size(text)
            .filter(|bytes| (1024..=(1 << 30)).contains(bytes))
            .ok_or_else(|| {
                args.invalid(
                    "max-item-size",
                    text,
                    "a size between 1k and 1g, like 1m or 512k",
                )
            })?;
    }
    if let Some(connections) = positive(args, "conn-limit")? {
        settings.max_connections = connections;
    }
    let cores = positive(args, "threads")?;
    if let Some(text) = args.value("udp-port") {
        if text != "0" {
            return Err(args.invalid("udp-port", text, "0: UDP is not supported"));
        }
    }
    settings.cas_disabled = args.flag("disable-cas");
    settings.shutdown_enabled = args.flag("enable-shutdown");
    settings.verbosity = args.count("verbose");
    Ok((settings, SocketAddr::new(listen, port), cores))
}

fn setup(args: &Args) -> Result<Launch, UsageError> {
    let (settings, addr, cores) = configure(args)?;
    // With a boot contract the server is also a node of a cache of
    // several (`cluster/node.rs`); without one it is the program it
    // always was.
    let contract = ebb_app::node_contract()
        .map_err(|error| UsageError(alloc::format!("a wrong boot contract: {error}")))?;
    Ok(Launch::new(move || serve(settings, addr, contract)).with_cores(cores))
}

/// Core 0's first event: the server; given a boot contract, the node
/// joins the cache; then its listeners and the ready line.
fn serve(mut settings: Settings, addr: SocketAddr, contract: Option<NodeContract>) {
    settings.threads = ebb_event::core_count();
    if let Some(ram) = ebb_event::memory_bytes() {
        let fitted = fit_memory_limit(&settings, ram);
        if settings.memory_limit_given && fitted < settings.memory_limit {
            ebb_app::warn!(
                "-m {} MiB is more than {} MiB of RAM allows; using -m {} MiB",
                settings.memory_limit >> 20,
                ram >> 20,
                fitted >> 20
            );
        }
        settings.memory_limit = fitted;
    }
    // memcached's `time` and absolute expiry times are Unix time: the
    // platform's wall clock at start, advanced by the monotonic clock. A
    // platform without one counts from the epoch.
    let started = ebb_app::unix_time().map_or(0, |since| {
        u32::try_from(since.as_secs()).unwrap_or(u32::MAX)
    });
    let server = match Server::start(settings, started) {
        Ok(server) => server,
        Err(error) => {
            ebb_app::error!("{error}");
            exit::stop(exit::FAILURE);
            return;
        }
    };
    spawn_task(async move {
        // A node serves clients only once it is one: a connection
        // accepted before would answer every key from this node's store.
        if let Some(contract) = contract {
            if !crate::cluster::node::join(contract, server).await {
                return;
            }
        }
        match ebb_app::net::listen(addr, accept_fn(server)).await {
            Ok(listening) => ebb_app::ready(format_args!("listening on {}", listening.addr)),
            Err(error) => {
                ebb_app::error!("cannot listen on {addr}: {error}");
                exit::stop(exit::OS_ERROR);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn item_sizes_take_binary_units() {
        assert_eq!(size("1m"), Some(1 << 20));
        assert_eq!(size("512k"), Some(512 << 10));
        assert_eq!(size("2G"), Some(2 << 30));
        assert_eq!(size("4096"), Some(4096));
        assert_eq!(size("m"), None);
        assert_eq!(size("x1"), None);
    }
}
