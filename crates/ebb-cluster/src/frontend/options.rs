//! What a frontend program is told: [`FrontendOptions`] (the nodes'
//! image and resources, the Messenger's port, timeouts), and
//! [`FrontendArgs`], the command line `./ebb cluster up` gives a frontend
//! program: `--image PATH --nodes N [--cores C] [--memory M] [--port P]
//! [--ids-per-node K] [--ready-timeout SECS] [--log-dir DIR] [--state-dir
//! DIR] [--share DIR] [--etcd start|none|HOST:PORT] [-v] [-- ARGS]`.

use std::path::PathBuf;
use std::time::Duration;

use super::global_map::MapChoice;
use crate::allocator::DEFAULT_READY_TIMEOUT;
use crate::node::NodeSpec;

/// The frontend's Messenger port (and each node's) by default.
pub const DEFAULT_MESSENGER_PORT: u16 = 7000;
/// Global Ebb ids each node gets by default: the global space has 32768,
/// so up to 512 nodes, and an application has 64 Ebbs per node.
pub const DEFAULT_IDS_PER_NODE: u32 = 64;

/// How a frontend's nodes are booted and reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontendOptions {
    /// The nodes' native image.
    pub image: PathBuf,
    /// vCPUs per node.
    pub cores: usize,
    /// Memory per node, in QEMU's `-m` syntax.
    pub memory: String,
    /// The application's arguments on every node.
    pub args: Vec<String>,
    /// The Messenger's port on the frontend (10.96.0.1) and on each node.
    pub messenger_port: u16,
    /// Global Ebb ids per node.
    pub ids_per_node: u32,
    /// How long a node may take to announce itself.
    pub ready_timeout: Duration,
    /// Nodes print their boot summary.
    pub verbose: bool,
    /// Where the nodes' console logs go (`node-ID.log`).
    pub log_dir: PathBuf,
    /// The hosted frontend's cores.
    pub frontend_cores: usize,
    /// The tag of the cluster's namespace, `ebb-PID-TAG-N` (`frontend`).
    pub network_tag: String,
    /// Where to keep `./ebb cluster`'s state file (`ps`, `logs`, `down`
    /// read it; `crate::state_file`), if anywhere.
    pub state_dir: Option<PathBuf>,
    /// The application's name in the state file (the image's file name),
    /// and its key prefix in an etcd map (`/ebbflow/APP/`).
    pub app: String,
    /// The directory the FileSystem Ebb shares with the nodes
    /// (`--share DIR`; `ebb_offload_host::FileServer`), if any: without
    /// one, a node's file operations fail with "no directory is shared".
    pub share: Option<PathBuf>,
    /// Where the application's global id map lives: in process by
    /// default; `./ebb cluster up` starts an etcd (`--etcd`).
    pub map: MapChoice,
}

impl FrontendOptions {
    /// Nodes of `image`, one core and 256M each, the defaults otherwise;
    /// console logs in `/tmp/ebb-frontend-PID`.
    pub fn new(image: impl Into<PathBuf>) -> FrontendOptions {
        let image = image.into();
        FrontendOptions {
            app: image.file_name().map_or_else(
                || "app".to_owned(),
                |name| name.to_string_lossy().into_owned(),
            ),
            image,
            cores: 1,
            memory: "256M".to_owned(),
            args: Vec::new(),
            messenger_port: DEFAULT_MESSENGER_PORT,
            ids_per_node: DEFAULT_IDS_PER_NODE,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            verbose: false,
            log_dir: std::env::temp_dir().join(format!("ebb-frontend-{}", std::process::id())),
            frontend_cores: 1,
            network_tag: "frontend".to_owned(),
            state_dir: None,
            share: None,
            map: MapChoice::InProcess,
        }
    }

    /// What each node is allocated with.
    pub fn node_spec(&self) -> NodeSpec {
        NodeSpec {
            image: self.image.clone(),
            cores: self.cores,
            memory: self.memory.clone(),
            args: self.args.clone(),
        }
    }

    /// Refuses what cannot work, before anything starts.
    pub fn check(&self) -> Result<(), String> {
        if !self.image.is_file() {
            return Err(format!(
                "the nodes' image {} does not exist (build it with ./ebb run APP --native, or \
                 ebb_testbed::native_image::build)",
                self.image.display()
            ));
        }
        check_memory(&self.memory)?;
        if self.cores == 0 || self.frontend_cores == 0 {
            return Err("a node and the frontend need at least one core".to_owned());
        }
        if self.messenger_port == 0 || self.ids_per_node == 0 {
            return Err("the Messenger port and the ids per node cannot be 0".to_owned());
        }
        if let Some(share) = &self.share {
            if !share.is_dir() {
                return Err(format!(
                    "--share {}: not a directory (the FileSystem Ebb shares a directory with the \
                     nodes)",
                    share.display()
                ));
            }
        }
        Ok(())
    }
}

/// Refuses a `--memory` that is not a size in QEMU's `-m` syntax (also
/// one that would break `./ebb cluster`'s state file).
pub fn check_memory(memory: &str) -> Result<(), String> {
    if memory.is_empty()
        || !memory.starts_with(|c: char| c.is_ascii_digit())
        || !memory
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.')
    {
        return Err(format!(
            "--memory {memory:?} is not a size in QEMU's -m syntax (a number with an optional \
             unit, e.g. 256M or 1G)"
        ));
    }
    Ok(())
}

/// A frontend program's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontendArgs {
    /// The options.
    pub options: FrontendOptions,
    /// How many nodes to allocate (`--nodes`, 3 by default).
    pub nodes: usize,
    /// What follows `--`: the program's own arguments.
    pub rest: Vec<String>,
}

impl FrontendArgs {
    /// The usage line.
    pub const USAGE: &'static str = "--image PATH [--nodes N] [--cores C] [--memory M] \
         [--port P] [--ids-per-node K] [--ready-timeout SECS] [--log-dir DIR] [--state-dir DIR] \
         [--share DIR] [--etcd start|none|HOST:PORT] [-v] [-- ARGS]";

    /// Parses `args` (without the program's name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<FrontendArgs, String> {
        let mut args = args.into_iter();
        let mut image = None;
        let mut options = FrontendOptions::new("");
        let mut nodes = 3;
        let mut rest = Vec::new();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .ok_or_else(|| format!("{name} needs a value; usage: {}", Self::USAGE))
            };
            match arg.as_str() {
                "--image" => image = Some(PathBuf::from(value("--image")?)),
                "--nodes" => nodes = number(&value("--nodes")?, "--nodes", 1..=253)?,
                "--cores" => options.cores = number(&value("--cores")?, "--cores", 1..=64)?,
                "--memory" => options.memory = value("--memory")?,
                "--port" => {
                    options.messenger_port =
                        u16::try_from(number(&value("--port")?, "--port", 1..=65535)?)
                            .unwrap_or(DEFAULT_MESSENGER_PORT);
                }
                "--ids-per-node" => {
                    options.ids_per_node = u32::try_from(number(
                        &value("--ids-per-node")?,
                        "--ids-per-node",
                        1..=32768,
                    )?)
                    .unwrap_or(DEFAULT_IDS_PER_NODE);
                }
                "--ready-timeout" => {
                    let secs = number(&value("--ready-timeout")?, "--ready-timeout", 1..=3600)?;
                    options.ready_timeout = Duration::from_secs(secs as u64);
                }
                "--log-dir" => options.log_dir = PathBuf::from(value("--log-dir")?),
                "--state-dir" => options.state_dir = Some(PathBuf::from(value("--state-dir")?)),
                "--share" => options.share = Some(PathBuf::from(value("--share")?)),
                "--etcd" => options.map = MapChoice::parse(&value("--etcd")?),
                "-v" | "--verbose" => options.verbose = true,
                "--" => {
                    rest.extend(args.by_ref());
                }
                other => return Err(format!("unknown option {other:?}; usage: {}", Self::USAGE)),
            }
        }
        let image = image.ok_or_else(|| format!("--image is missing; usage: {}", Self::USAGE))?;
        options.app = FrontendOptions::new(&image).app;
        options.image = image;
        check_memory(&options.memory)?;
        Ok(FrontendArgs {
            options,
            nodes,
            rest,
        })
    }
}

fn number(text: &str, name: &str, range: std::ops::RangeInclusive<usize>) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            format!(
                "{name} takes a number from {} to {}, not {text:?}",
                range.start(),
                range.end()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<FrontendArgs, String> {
        FrontendArgs::parse(words.iter().map(|w| (*w).to_owned()))
    }

    #[test]
    fn the_frontend_command_line_parses_and_refuses_bad_values() {
        let args = parse(&[
            "--image", "/img", "--nodes", "2", "--cores", "2", "--memory", "512M", "--port",
            "7100", "--share", "/srv", "-v", "--", "--rounds", "3",
        ])
        .expect("parses");
        assert_eq!(args.nodes, 2);
        assert_eq!(args.options.image, PathBuf::from("/img"));
        assert_eq!(args.options.cores, 2);
        assert_eq!(args.options.memory, "512M");
        assert_eq!(args.options.messenger_port, 7100);
        assert!(args.options.verbose);
        assert_eq!(args.rest, ["--rounds", "3"]);
        assert_eq!(args.options.share, Some(PathBuf::from("/srv")));
        assert_eq!(args.options.ids_per_node, DEFAULT_IDS_PER_NODE);

        let defaults = parse(&["--image", "/img"]).expect("parses");
        assert_eq!(defaults.nodes, 3);
        assert_eq!(defaults.options.share, None);
        assert_eq!(defaults.options.map, MapChoice::InProcess);
        let etcd = parse(&["--image", "/img", "--etcd", "127.0.0.1:2379"]).expect("parses");
        assert_eq!(
            etcd.options.map,
            MapChoice::Etcd("127.0.0.1:2379".to_owned())
        );
        assert_eq!(defaults.options.messenger_port, DEFAULT_MESSENGER_PORT);

        assert_eq!(
            parse(&["--nodes", "2"]),
            Err(format!(
                "--image is missing; usage: {}",
                FrontendArgs::USAGE
            ))
        );
        assert_eq!(
            parse(&["--image", "/img", "--nodes", "0"]),
            Err("--nodes takes a number from 1 to 253, not \"0\"".to_owned())
        );
        assert_eq!(
            parse(&["--image", "/img", "--memory", "lots"]),
            Err(
                "--memory \"lots\" is not a size in QEMU's -m syntax (a number with an \
                 optional unit, e.g. 256M or 1G)"
                    .to_owned()
            )
        );
        assert_eq!(
            parse(&["--image"]),
            Err(format!(
                "--image needs a value; usage: {}",
                FrontendArgs::USAGE
            ))
        );
        assert_eq!(
            parse(&["--image", "/img", "--what"]),
            Err(format!(
                "unknown option \"--what\"; usage: {}",
                FrontendArgs::USAGE
            ))
        );
    }

    #[test]
    fn a_share_that_is_not_a_directory_is_refused_before_anything_starts() {
        let mut options = FrontendOptions::new(std::env::current_exe().unwrap());
        assert_eq!(options.check(), Ok(()));
        options.share = Some(PathBuf::from("/nonexistent/share"));
        assert_eq!(
            options.check(),
            Err(
                "--share /nonexistent/share: not a directory (the FileSystem Ebb shares a \
                 directory with the nodes)"
                    .to_owned()
            )
        );
        options.share = Some(std::env::temp_dir());
        assert_eq!(options.check(), Ok(()));
    }

    #[test]
    fn a_missing_image_is_refused_before_anything_starts() {
        let options = FrontendOptions::new("/nonexistent/echo");
        assert_eq!(
            options.check(),
            Err(
                "the nodes' image /nonexistent/echo does not exist (build it with ./ebb run \
                 APP --native, or ebb_testbed::native_image::build)"
                    .to_owned()
            )
        );
    }
}
