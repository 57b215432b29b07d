//! Finding the repository root, and the applications and benchmarks in it.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

/// Whether `dir` is the Ebbflow repository root: it holds the `ebb` script and a
/// `Cargo.toml` with a `[workspace]` table.
pub fn is_root(dir: &Path) -> bool {
    dir.join("ebb").is_file() && has_workspace_manifest(dir)
}

fn has_workspace_manifest(dir: &Path) -> bool {
    fs::read_to_string(dir.join("Cargo.toml"))
        .map(|text| text.lines().any(|line| line.trim() == "[workspace]"))
        .unwrap_or(false)
}

/// Finds the repository root.
///
/// `env_root` (the `EBB_ROOT` variable, set by `./ebb`) wins when it is set and
/// not empty; it must then name the root. Otherwise each of `starts` (the
/// current directory, then the executable's directory) is walked up to `/`.
pub fn find_root(env_root: Option<OsString>, starts: &[PathBuf]) -> Result<PathBuf, String> {
    if let Some(root) = env_root.filter(|r| !r.is_empty()) {
        let root = PathBuf::from(root);
        return if is_root(&root) {
            Ok(root)
        } else {
            Err(format!(
                "EBB_ROOT is {}, which is not the Ebbflow repository root \
                 (it needs the `ebb` script and a Cargo.toml with [workspace])",
                root.display()
            ))
        };
    }
    starts
        .iter()
        .flat_map(|start| start.ancestors())
        .find(|dir| is_root(dir))
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            "cannot find the Ebbflow repository (a directory with the `ebb` script and a \
             Cargo.toml with [workspace]): run ./ebb from inside it, or set EBB_ROOT"
                .to_owned()
        })
}

/// Whether `name` can be a package or binary name: ASCII letters, digits, `-`, `_`.
/// Anything else (paths, `..`) is refused before it reaches the file system.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The applications: directories under `apps/` holding a `Cargo.toml`, sorted.
pub fn apps(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = entries(&root.join("apps"))
        .into_iter()
        .filter(|(path, _)| path.join("Cargo.toml").is_file())
        .map(|(_, name)| name)
        .collect();
    names.sort();
    names
}

/// Whether `name` is an application under `apps/`.
pub fn is_app(root: &Path, name: &str) -> bool {
    is_plain_name(name) && root.join("apps").join(name).join("Cargo.toml").is_file()
}

/// The prefix of every benchmark binary's name: `./ebb bench NAME` runs
/// the binary `bench-NAME`, so that no benchmark's binary has the name of
/// an application's (cargo would write both to `target/release/NAME`; the
/// memcached benchmark starts the memcached application from there).
pub const BENCH_BINARY_PREFIX: &str = "bench-";

/// The benchmarks: binaries of `bench/`, as `bench/src/bin/bench-NAME.rs`
/// or `bench/src/bin/bench-NAME/main.rs`, sorted, without the prefix.
pub fn benches(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = entries(&root.join("bench/src/bin"))
        .into_iter()
        .filter_map(|(path, name)| {
            let stem = if path.is_dir() {
                path.join("main.rs").is_file().then_some(name.as_str())?
            } else {
                name.strip_suffix(".rs")?
            };
            stem.strip_prefix(BENCH_BINARY_PREFIX)
                .filter(|stem| !stem.is_empty())
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Whether `name` is a benchmark binary of `bench/`.
pub fn is_bench(root: &Path, name: &str) -> bool {
    let bin = root.join("bench/src/bin");
    let binary = format!("{BENCH_BINARY_PREFIX}{name}");
    is_plain_name(name)
        && (bin.join(format!("{binary}.rs")).is_file()
            || bin.join(binary).join("main.rs").is_file())
}

/// `(path, file name)` of each entry of `dir` whose name is valid UTF-8; empty
/// when `dir` cannot be read.
fn entries(dir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    read.filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            Some((entry.path(), name))
        })
        .collect()
}

/// `a, b, c`, or `(none)` when `names` is empty.
pub fn join_names(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A directory under the system temp dir, removed on drop.
    pub(crate) struct TempDir(pub PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> Self {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("ebb-cli-test-{tag}-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).expect("create temp dir");
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    }

    /// A fake repository: `ebb`, a workspace manifest, two apps (one without a
    /// manifest), benches in both layouts and a stray file.
    fn fake_repo(tag: &str) -> TempDir {
        let dir = TempDir::new(tag);
        let r = &dir.0;
        write(&r.join("ebb"), "#!/bin/sh\n");
        write(&r.join("Cargo.toml"), "[workspace]\nmembers = []\n");
        write(&r.join("apps/hello/Cargo.toml"), "[package]\n");
        write(&r.join("apps/echo/Cargo.toml"), "[package]\n");
        write(&r.join("apps/notyet/src/main.rs"), "");
        write(&r.join("bench/src/bin/bench-ebbref.rs"), "");
        write(&r.join("bench/src/bin/bench-events/main.rs"), "");
        write(&r.join("bench/src/bin/helper.rs"), "");
        write(&r.join("bench/src/bin/README.md"), "");
        write(&r.join("crates/ebb-core/Cargo.toml"), "[package]\n");
        dir
    }

    #[test]
    fn finds_root_by_walking_up() {
        let repo = fake_repo("walk");
        let deep = repo.0.join("crates/ebb-core");
        assert_eq!(find_root(None, &[deep]), Ok(repo.0.clone()));
        assert_eq!(
            find_root(None, std::slice::from_ref(&repo.0)),
            Ok(repo.0.clone())
        );
    }

    #[test]
    fn tries_the_next_start_when_the_first_has_no_root() {
        let repo = fake_repo("second");
        let elsewhere = TempDir::new("elsewhere");
        let starts = [elsewhere.0.clone(), repo.0.join("apps/hello")];
        assert_eq!(find_root(None, &starts), Ok(repo.0.clone()));
    }

    #[test]
    fn env_root_wins_and_must_be_a_root() {
        let repo = fake_repo("env");
        let other = fake_repo("env-other");
        let start = [other.0.clone()];
        assert_eq!(
            find_root(Some(repo.0.clone().into_os_string()), &start),
            Ok(repo.0.clone())
        );
        let err = find_root(Some(repo.0.join("apps").into_os_string()), &start)
            .expect_err("apps/ is not a root");
        assert!(err.starts_with("EBB_ROOT is "), "{err}");
        // An empty EBB_ROOT counts as unset.
        assert_eq!(
            find_root(Some(OsString::new()), &start),
            Ok(other.0.clone())
        );
    }

    #[test]
    fn a_member_manifest_or_missing_script_is_not_a_root() {
        let dir = TempDir::new("noroot");
        write(&dir.0.join("Cargo.toml"), "[package]\nname = \"x\"\n");
        write(&dir.0.join("ebb"), "");
        assert!(!is_root(&dir.0));
        let dir2 = TempDir::new("noscript");
        write(&dir2.0.join("Cargo.toml"), "[workspace]\n");
        assert!(!is_root(&dir2.0));
        // No root anywhere above a temp dir (unless the temp dir is inside a repo).
        if !std::env::temp_dir().ancestors().any(is_root) {
            let err = find_root(None, std::slice::from_ref(&dir.0)).expect_err("no root");
            assert!(err.contains("cannot find the Ebbflow repository"), "{err}");
        }
    }

    #[test]
    fn lists_apps_with_manifests_only() {
        let repo = fake_repo("apps");
        assert_eq!(apps(&repo.0), vec!["echo".to_owned(), "hello".to_owned()]);
        assert!(is_app(&repo.0, "hello"));
        assert!(!is_app(&repo.0, "notyet"));
        assert!(!is_app(&repo.0, "../crates/ebb-core"));
        assert!(!is_app(&repo.0, ""));
    }

    #[test]
    fn lists_benches_in_both_layouts() {
        let repo = fake_repo("benches");
        assert_eq!(
            benches(&repo.0),
            vec!["ebbref".to_owned(), "events".to_owned()]
        );
        assert!(is_bench(&repo.0, "ebbref"));
        assert!(is_bench(&repo.0, "events"));
        assert!(!is_bench(&repo.0, "README"));
        assert!(!is_bench(&repo.0, "helper"));
        assert!(!is_bench(&repo.0, "../bin/ebbref"));
    }

    #[test]
    fn missing_directories_list_nothing() {
        let dir = TempDir::new("empty");
        assert!(apps(&dir.0).is_empty());
        assert!(benches(&dir.0).is_empty());
        assert_eq!(join_names(&[]), "(none)");
        assert_eq!(join_names(&["a".into(), "b".into()]), "a, b");
    }

    #[test]
    fn plain_names() {
        assert!(is_plain_name("hello"));
        assert!(is_plain_name("thread_test-2"));
        assert!(!is_plain_name("a/b"));
        assert!(!is_plain_name(".."));
        assert!(!is_plain_name("a b"));
        assert!(!is_plain_name(""));
    }
}
