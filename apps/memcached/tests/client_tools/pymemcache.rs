//! pymemcache's own integration tests (`pymemcache/test/test_integration.py`
//! from its sdist) against a server, run with pytest in a virtual
//! environment under `target/pyenv` that this module creates and caches
//! (from PyPI, with the versions in `tests/requirements.txt`). Against
//! Debian's memcached 1.6.18 they give "100 passed, 3 skipped": the three
//! skipped are pymemcache's TLS test, which it marks skipped itself.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

/// How long one run of the suite may take (it takes seconds).
const SUITE_WITHIN: Duration = Duration::from_secs(300);

const PASSED: usize = 100;
const SKIPPED: usize = 3;

pub fn workspace_target() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    }
}

fn run(command: &mut Command, what: &str) {
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{what}: cannot run {command:?}: {error}"));
    assert!(
        output.status.success(),
        "{what} failed ({}); is PyPI reachable? {command:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The unpacked sdist (with its tests) and the venv's python, installed
/// once per version of requirements.txt.
fn environment() -> (PathBuf, PathBuf) {
    // The two tests run at once; one of them sets the environment up.
    static SETUP: Mutex<()> = Mutex::new(());
    let _one = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/requirements.txt");
    let wanted = fs::read_to_string(&requirements).unwrap();
    let version = wanted
        .lines()
        .find_map(|line| line.trim().strip_prefix("pymemcache=="))
        .expect("requirements.txt pins pymemcache")
        .to_string();
    let venv = workspace_target().join("pyenv");
    let python = venv.join("bin/python");
    let sdist = venv.join(format!("pymemcache-{version}"));
    let stamp = venv.join("installed-requirements.txt");
    if fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str())
        && python.exists()
        && sdist.is_dir()
    {
        return (sdist, python);
    }
    let _ = fs::remove_dir_all(&venv);
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "creating a Python virtual environment (Debian: python3-venv)",
    );
    run(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "-r"])
            .arg(&requirements),
        "pip install -r tests/requirements.txt",
    );
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-binary",
                ":all:",
                "--no-deps",
                "-d",
            ])
            .arg(venv.join("download"))
            .arg(format!("pymemcache=={version}")),
        "downloading pymemcache's sdist",
    );
    run(
        Command::new("tar")
            .arg("xzf")
            .arg(venv.join(format!("download/pymemcache-{version}.tar.gz")))
            .arg("-C")
            .arg(&venv),
        "unpacking pymemcache's sdist",
    );
    assert!(
        sdist.join("pymemcache/test/test_integration.py").is_file(),
        "no integration tests in the sdist"
    );
    fs::write(&stamp, &wanted).unwrap();
    (sdist, python)
}

/// The count before `word` in pytest's summary line ("100 passed, 3
/// skipped in 2.43s").
fn count(summary: &str, word: &str) -> usize {
    let words: Vec<&str> = summary
        .split([' ', ','])
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .find(|pair| pair[1] == word)
        .and_then(|pair| pair[0].parse().ok())
        .unwrap_or(0)
}

/// Runs pymemcache's integration tests against `server` (inside
/// `namespace` if given) and checks pytest's summary.
pub fn passes(namespace: Option<&str>, server: SocketAddr) {
    let (sdist, python) = environment();
    let mut command = match namespace {
        Some(namespace) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", namespace]).arg(&python);
            command
        }
        None => Command::new(&python),
    };
    let mut child = command
        .current_dir(&sdist)
        .args([
            "-m",
            "pytest",
            "-o",
            "addopts=",
            "-p",
            "no:cacheprovider",
            "-q",
            "-m",
            "integration",
        ])
        .arg("pymemcache/test/test_integration.py")
        .args(["--server", &server.ip().to_string()])
        .args(["--port", &server.port().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pytest");
    // Bounded: a server that stops answering must not hang the test.
    let deadline = Instant::now() + SUITE_WITHIN;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("pytest's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout
        .lines()
        .rev()
        .find(|line| line.contains(" passed") || line.contains(" failed"))
        .unwrap_or("");
    assert!(
        output.status.success()
            && count(summary, "passed") == PASSED
            && count(summary, "skipped") == SKIPPED
            && count(summary, "failed") == 0,
        "pytest against {server} ({}): want \"{PASSED} passed, {SKIPPED} skipped\", got \"{summary}\"\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    println!("pymemcache's integration tests against {server}: {summary}");
}
