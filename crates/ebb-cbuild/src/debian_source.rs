//! Debian source packages: `fetch("musl", cache)` downloads the source
//! package with `apt-get source --download-only` and unpacks it with
//! `dpkg-source -x` into `cache/NAME-VERSION`, once.
//!
//! Trust: apt checks each downloaded file against the checksums in the
//! archive's `Sources` index, whose `InRelease` file is signed with the
//! archive key apt already trusts (the `Signed-By` of the deb-src entry
//! `./ebb` writes). `dpkg-source -x` then checks the files against the
//! `.dsc` (never disabled here: no `--no-check`). It would also verify the
//! `.dsc`'s own signature, by the uploading developer, but only with the
//! `debian-keyring` package's keys; without them it warns and goes on,
//! which is sound since the archive signature already covers the `.dsc`.
//!
//! The unpacked tree is upstream's source with Debian's patches applied
//! (source format "3.0 (quilt)"); nobody edits it: builds copy it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::cache_dir::place_stamped;
use crate::command::{run, RunFailure};
use crate::print_uris::{self, PrintUrisError};

/// The file whose presence marks a completely unpacked tree.
pub const STAMP: &str = ".ebb-fetched";

/// An unpacked Debian source package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTree {
    /// The source package's name.
    pub package: String,
    /// Its Debian version (no epoch), e.g. `1.2.3-1`.
    pub version: String,
    /// The unpacked tree.
    pub dir: PathBuf,
}

impl SourceTree {
    /// The upstream version: the Debian version without its revision.
    pub fn upstream_version(&self) -> &str {
        self.version
            .rsplit_once('-')
            .map_or(&self.version, |(upstream, _)| upstream)
    }
}

/// Why a source package could not be fetched.
#[derive(Debug)]
pub enum SourceError {
    /// Not a Debian package name (Debian Policy §5.6.1: lower-case
    /// letters, digits, `+ - .`, at least two characters, starting with a
    /// letter or digit).
    BadName(String),
    /// apt knows no source packages at all: no `deb-src` entry.
    NoDebSrc(String),
    /// apt has no source package of that name.
    UnknownPackage {
        /// The name asked for.
        package: String,
        /// apt-get's message.
        apt: String,
    },
    /// apt-get could not download it (network, mirror): apt's message.
    Download {
        /// The source package.
        package: String,
        /// apt-get's message.
        apt: String,
    },
    /// apt-get's listing could not be understood.
    Listing {
        /// The name asked for.
        package: String,
        /// What was wrong with the listing.
        error: PrintUrisError,
    },
    /// dpkg-source could not unpack it.
    Unpack {
        /// The source package.
        package: String,
        /// dpkg-source's message.
        dpkg_source: String,
    },
    /// A file operation in the cache failed.
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        error: std::io::Error,
    },
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::BadName(name) => write!(f, "{name:?} is not a Debian package name"),
            SourceError::NoDebSrc(apt) => write!(
                f,
                "apt has no deb-src entries, so no source packages: run ./ebb test once \
                 (it adds /etc/apt/sources.list.d/ebbflow-deb-src.sources); apt said: {apt}"
            ),
            SourceError::UnknownPackage { package, apt } => {
                write!(f, "no Debian source package {package}: {apt}")
            }
            SourceError::Download { package, apt } => {
                write!(
                    f,
                    "apt-get could not download the source of {package}: {apt}"
                )
            }
            SourceError::Listing { package, error } => {
                write!(f, "apt-get source --print-uris {package}: {error}")
            }
            SourceError::Unpack {
                package,
                dpkg_source,
            } => {
                write!(f, "dpkg-source could not unpack {package}: {dpkg_source}")
            }
            SourceError::Io { what, error } => write!(f, "{what}: {error}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// Whether `name` is a Debian package name (Debian Policy §5.6.1); also
/// keeps names that look like options away from apt-get.
pub fn is_package_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() >= 2
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
}

/// Fetches and unpacks the Debian source package `package` into
/// `cache_dir/NAME-VERSION`, or returns the tree already there.
pub fn fetch(package: &str, cache_dir: &Path) -> Result<SourceTree, SourceError> {
    if !is_package_name(package) {
        return Err(SourceError::BadName(package.to_owned()));
    }
    fs::create_dir_all(cache_dir).map_err(io(format!("creating {}", cache_dir.display())))?;
    // Absolute: the tools run in other directories.
    let cache_dir = &std::path::absolute(cache_dir)
        .map_err(io(format!("resolving {}", cache_dir.display())))?;
    let listing = run("apt-get", &["source", "--print-uris", package], cache_dir)
        .map_err(|failure| apt_error(package, failure))?;
    let printed = print_uris::parse(&listing).map_err(|error| SourceError::Listing {
        package: package.to_owned(),
        error,
    })?;
    let tree = SourceTree {
        dir: cache_dir.join(format!("{}-{}", printed.package, printed.version)),
        package: printed.package,
        version: printed.version,
    };
    if tree.dir.join(STAMP).exists() {
        return Ok(tree);
    }
    let work = cache_dir.join(format!(".tmp-{}-{}", tree.package, std::process::id()));
    let unpacked = download_and_unpack(&tree, &printed.dsc, &work);
    let placed = unpacked.and_then(|dir| {
        place_stamped(&dir, &tree.dir, STAMP)
            .map_err(|(what, error)| SourceError::Io { what, error })
    });
    let _ = fs::remove_dir_all(&work);
    placed.map(|()| tree)
}

/// Downloads the exact version listed into `work` and unpacks it there;
/// the unpacked tree, stamped.
fn download_and_unpack(tree: &SourceTree, dsc: &str, work: &Path) -> Result<PathBuf, SourceError> {
    let _ = fs::remove_dir_all(work);
    fs::create_dir_all(work).map_err(io(format!("creating {}", work.display())))?;
    // By name, not NAME=VERSION: the version in a .dsc's name has no epoch
    // (zlib's is 1:1.2.13.dfsg-1), and apt matches the whole version. The
    // .dsc listed must be what came (apt's lists may have changed since).
    run(
        "apt-get",
        &["source", "--download-only", &tree.package],
        work,
    )
    .map_err(|failure| SourceError::Download {
        package: tree.package.clone(),
        apt: failure.to_string(),
    })?;
    if !work.join(dsc).exists() {
        return Err(SourceError::Download {
            package: tree.package.clone(),
            apt: format!("apt-get source fetched another version than the {dsc} it listed (its package lists changed meanwhile): run again"),
        });
    }
    let unpacked = work.join("tree");
    let unpacked_arg = unpacked.to_string_lossy();
    run("dpkg-source", &["-x", dsc, &unpacked_arg], work).map_err(|failure| {
        SourceError::Unpack {
            package: tree.package.clone(),
            dpkg_source: failure.to_string(),
        }
    })?;
    fs::write(unpacked.join(STAMP), format!("{}\n", tree.version))
        .map_err(io(format!("stamping {}", unpacked.display())))?;
    Ok(unpacked)
}

/// Classifies apt-get's failure to list a package by its message
/// (apt-get's own English messages; `LC_ALL` is not changed by tests).
fn apt_error(package: &str, failure: RunFailure) -> SourceError {
    let apt = failure.to_string();
    if apt.contains("'deb-src' URIs") {
        SourceError::NoDebSrc(apt)
    } else if apt.contains("Unable to find a source package") {
        SourceError::UnknownPackage {
            package: package.to_owned(),
            apt,
        }
    } else {
        SourceError::Download {
            package: package.to_owned(),
            apt,
        }
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> SourceError {
    move |error| SourceError::Io { what, error }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_follow_debian_policy() {
        for good in ["musl", "sqlite3", "libc6-dev", "g++", "0ad", "a.b"] {
            assert!(is_package_name(good), "{good}");
        }
        for bad in [
            "",
            "m",
            "-musl",
            "--print-uris",
            "Musl",
            "musl src",
            "a/b",
            "a_b",
            "a=1",
        ] {
            assert!(!is_package_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_bad_name_is_refused_before_apt_runs() {
        let error = fetch("--help", Path::new("/nonexistent-ebb-cache")).unwrap_err();
        assert!(
            matches!(error, SourceError::BadName(ref name) if name == "--help"),
            "{error}"
        );
    }

    #[test]
    fn apt_messages_are_classified() {
        let failed = |output: &str| RunFailure::Failed {
            status: "exit status: 100".to_owned(),
            output: output.to_owned(),
        };
        // apt-get's messages on Debian bookworm (apt 2.6).
        let no_src = failed("E: You must put some 'deb-src' URIs in your sources.list");
        assert!(matches!(
            apt_error("musl", no_src),
            SourceError::NoDebSrc(_)
        ));
        let unknown = failed("E: Unable to find a source package for nosuchpkg");
        assert!(matches!(
            apt_error("nosuchpkg", unknown),
            SourceError::UnknownPackage { ref package, .. } if package == "nosuchpkg"
        ));
        let offline =
            failed("E: Failed to fetch http://deb.debian.org/... Temporary failure resolving");
        let error = apt_error("musl", offline);
        assert!(matches!(error, SourceError::Download { .. }), "{error}");
        assert!(
            error.to_string().contains("Temporary failure resolving"),
            "{error}"
        );
    }

    #[test]
    fn the_upstream_version_drops_the_debian_revision() {
        let tree = |version: &str| SourceTree {
            package: "p".to_owned(),
            version: version.to_owned(),
            dir: PathBuf::new(),
        };
        assert_eq!(tree("1.2.3-1").upstream_version(), "1.2.3");
        assert_eq!(tree("3.40.1-2+deb12u2").upstream_version(), "3.40.1");
        assert_eq!(tree("1.0").upstream_version(), "1.0");
    }
}
