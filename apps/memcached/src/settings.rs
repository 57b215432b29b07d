//! Server settings, named as memcached names its options.

/// What `-m`, `-I`, `-c` and friends set.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `-m`: memory for items, in bytes (memcached's default: 64 MiB;
    /// where the platform has a fixed amount of RAM, what it allows: see
    /// `memory::fit_memory_limit`).
    pub memory_limit: usize,
    /// Whether `-m` was given (else `memory_limit` is the default).
    pub memory_limit_given: bool,
    /// `-I`: the largest item value, in bytes (default 1 MiB).
    pub item_size_max: usize,
    /// `-c`: most simultaneous connections (default 1024).
    pub max_connections: usize,
    /// `-t`: the cores serving clients (the node's core count once it runs).
    pub threads: usize,
    /// `-C`: disable CAS (cas values are 0).
    pub cas_disabled: bool,
    /// `-v`: verbosity level.
    pub verbosity: u32,
    /// `-A`: the text `shutdown` command stops the server (memcached's
    /// `--enable-shutdown`; tests use it to end a native guest).
    pub shutdown_enabled: bool,
    /// What `version` answers (memcached 1.6 clients parse it).
    pub version: &'static str,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            memory_limit: 64 << 20,
            memory_limit_given: false,
            item_size_max: 1 << 20,
            max_connections: 1024,
            threads: 1,
            cas_disabled: false,
            verbosity: 0,
            shutdown_enabled: false,
            version: "1.6.18",
        }
    }
}
