//! Builds musl from Debian's source package with the Ebbflow patch, as
//! `ebb-cbuild musl` does for `./ebb test`, and checks the result: no
//! `syscall` instruction left in libc.a, `__ebb_syscall` (and the clone
//! and unmapself entries) undefined, and the changed-line count printed
//! equal to the patch's own and to a recount by `diff --minimal`.
//!
//! Needs apt with deb-src entries (`./ebb test` adds them), the network
//! (or apt's cache) and gcc/make/binutils; without them it is SKIPPED
//! with the reason. The build is cached under target/musl, so only the
//! first run builds (about a minute on two cores).

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ebb_cbuild::musl;
use support::{fetch_musl, missing, printed_path, run_bounded, target_dir};

/// The build on a loaded two-core machine, with room to spare.
const BUILD_LIMIT: Duration = Duration::from_secs(600);

/// Runs `ebb-cbuild musl`, bounded by `BUILD_LIMIT`; its stdout.
fn run_build() -> String {
    let target = target_dir();
    let mut command = Command::new(env!("CARGO_BIN_EXE_ebb-cbuild"));
    command
        .args(["musl", "--cache"])
        .arg(target.join("debian-src"))
        .arg("--out")
        .arg(target.join("musl"));
    let finished = run_bounded(&mut command, BUILD_LIMIT);
    assert!(
        finished.status.success(),
        "ebb-cbuild musl: {}\n{}{}",
        finished.status,
        finished.stdout,
        finished.stderr
    );
    finished.stdout
}

/// `changed N (-R +A) FILE` lines and the total line of the build's output.
fn printed_counts(output: &str) -> (BTreeMap<String, usize>, usize) {
    let mut files = BTreeMap::new();
    let mut total = None;
    for line in output.lines() {
        if let Some(count) = line.strip_prefix("changed lines against upstream: ") {
            total = Some(count.parse().expect("a count"));
        } else if let Some(rest) = line.strip_prefix("changed ") {
            let (count, rest) = rest.split_once(' ').expect("changed N (...) FILE");
            let (_, file) = rest.split_once(") ").expect("changed N (-R +A) FILE");
            files.insert(file.to_owned(), count.parse().expect("a count"));
        }
    }
    (files, total.expect("the total is printed"))
}

fn tool_output(program: &str, args: &[&std::ffi::OsStr]) -> String {
    let output = Command::new(program).args(args).output().expect(program);
    assert!(
        output.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Lines removed plus added between two files, by `diff --minimal`.
fn diff_count(upstream: &Path, patched: &Path) -> usize {
    let output = Command::new("diff")
        .arg("--minimal")
        .args([upstream, patched])
        .output()
        .expect("diff");
    // diff(1): status 1 when the files differ, 2 on trouble.
    assert_eq!(
        output.status.code(),
        Some(1),
        "diff {}: {output:?}",
        upstream.display()
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with('<') || line.starts_with('>'))
        .count()
}

/// Instructions that enter the kernel, in `objdump -d` output
/// (`ADDRESS:\tBYTES\tMNEMONIC OPERANDS`).
fn kernel_entries(disassembly: &str) -> Vec<&str> {
    disassembly
        .lines()
        .filter(|line| {
            let instruction = line.split('\t').nth(2).unwrap_or("").trim();
            let mnemonic = instruction.split_whitespace().next().unwrap_or("");
            mnemonic == "syscall"
                || mnemonic == "sysenter"
                || (mnemonic == "int" && instruction.ends_with("$0x80"))
        })
        .collect()
}

#[test]
fn the_kernel_entry_finder_sees_syscall_instructions_only() {
    let sample = "0000000000000000 <syscall>:\n   0:\t0f 05                \tsyscall \n   2:\te8 00 00 00 00       \tcall   7 <syscall+0x7>\n   7:\tcd 80                \tint    $0x80\n";
    assert_eq!(kernel_entries(sample).len(), 2);
}

#[test]
fn musl_builds_with_every_system_call_a_call() {
    let needed = [
        "apt-get",
        "dpkg-source",
        "gcc",
        "make",
        "nm",
        "objdump",
        "diff",
    ];
    if let Some(reason) = missing(&needed) {
        ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
        return;
    }
    let tree = match fetch_musl() {
        Ok(tree) => tree,
        Err(reason) => {
            ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
            return;
        }
    };
    assert_eq!(tree.package, "musl");
    let output = run_build();

    // The archive and its companions exist.
    let libc_a = printed_path(&output, "libc.a");
    assert!(libc_a.is_file(), "{}", libc_a.display());
    assert!(printed_path(&output, "crt1.o").is_file());
    assert!(printed_path(&output, "crti.o").is_file());
    assert!(printed_path(&output, "crtn.o").is_file());
    assert!(printed_path(&output, "include").join("stdio.h").is_file());

    // Every system call is a call: the dispatcher's entries are undefined
    // in libc.a, and no object enters the kernel itself.
    let symbols = tool_output("nm", &[libc_a.as_os_str()]);
    for entry in ["__ebb_syscall", "__ebb_clone", "__ebb_unmapself"] {
        let undefined = format!("U {entry}");
        assert!(
            symbols.lines().any(|line| line.trim() == undefined),
            "{entry} is not undefined in libc.a"
        );
        assert!(
            !symbols
                .lines()
                .any(|line| line.ends_with(&format!(" T {entry}"))),
            "{entry} defined"
        );
    }
    let disassembly = tool_output("objdump", &["-d".as_ref(), libc_a.as_os_str()]);
    assert!(
        disassembly.contains("<__syscall_cp_asm>:"),
        "objdump saw libc.a's code"
    );
    let entries = kernel_entries(&disassembly);
    assert!(
        entries.is_empty(),
        "kernel entries left in libc.a: {entries:?}"
    );

    // The count printed is the patch's, and a minimal diff agrees per file.
    let (files, total) = printed_counts(&output);
    let report = musl::patch_report(&tree).expect("the patch applies");
    assert!(total > 0);
    assert_eq!(total, report.total());
    assert_eq!(total, files.values().sum::<usize>());
    let patched_dir = printed_path(&output, "libc.a")
        .parent()
        .unwrap()
        .join("../patched");
    for (file, count) in &files {
        let recount = diff_count(&tree.dir.join(file), &patched_dir.join(file));
        assert_eq!(
            *count, recount,
            "{file}: printed {count}, diff --minimal {recount}"
        );
    }
    assert_eq!(
        files.keys().map(String::as_str).collect::<Vec<_>>(),
        report.files.keys().copied().collect::<Vec<_>>()
    );
}
