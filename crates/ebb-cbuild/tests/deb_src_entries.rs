//! The `./ebb` script's derivation of `deb-src` entries from the system's
//! Debian `deb` entries (its `deb_src_from_deb822` and
//! `deb_src_from_one_line` functions, run by bash on sample files).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs the script's function `function` with `input` on stdin; stdout.
fn run_function(function: &str, input: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ebb");
    let text = std::fs::read_to_string(&script).expect("reading ./ebb");
    let start = text
        .find(&format!("\n{function}() {{"))
        .unwrap_or_else(|| panic!("no {function} in ./ebb"));
    let length = text[start..].find("\n}\n").expect("the function's end") + 3;
    let program = format!("{}\n{function}\n", &text[start..start + length]);
    let mut child = Command::new("bash")
        .args(["-c", &program])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("bash");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().expect("bash");
    assert!(output.status.success(), "{function}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn deb822_deb_stanzas_become_deb_src_stanzas() {
    let debian_sources = "Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://elsewhere/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://ftp.de.debian.org/debian
Suites: bookworm
Components: main
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mDMEZ
 -----END PGP PUBLIC KEY BLOCK-----

Types: deb
Enabled: no
URIs: http://disabled/debian
Suites: bookworm
Components: main

types: deb
uris: http://deb.debian.org/debian-security
suites: bookworm-security
components: main contrib
";
    assert_eq!(
        run_function("deb_src_from_deb822", debian_sources),
        "Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://ftp.de.debian.org/debian
Suites: bookworm
Components: main
Signed-By: 
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mDMEZ
 -----END PGP PUBLIC KEY BLOCK-----

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main contrib
"
    );
}

#[test]
fn one_line_deb_entries_become_deb_src_stanzas() {
    let sources_list = "# a comment
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://deb.debian.org/debian bookworm main contrib
deb http://deb.debian.org/debian-security bookworm-security main
deb-src http://deb.debian.org/debian bookworm main
";
    assert_eq!(
        run_function("deb_src_from_one_line", sources_list),
        "Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main contrib
Signed-By: /usr/share/keyrings/k.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"
    );
}

/// Only the Debian archive is mirrored: a third-party repository, a CD, a
/// local directory or a flat repository may have no sources, and one entry
/// apt cannot fetch fails every `apt-get update` on the machine.
#[test]
fn other_repositories_are_not_mirrored() {
    let debian_sources = "Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main

Types: deb
URIs: file:/srv/debian
Suites: bookworm
Components: main
";
    assert_eq!(run_function("deb_src_from_deb822", debian_sources), "");
    let sources_list = "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main
deb cdrom:[Debian GNU/Linux 12 _Bookworm_]/ bookworm main
deb [trusted=yes] http://deb.debian.org/debian ./
deb http://deb.debian.org/debian bookworm main
";
    assert_eq!(
        run_function("deb_src_from_one_line", sources_list),
        "Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
"
    );
}

#[test]
fn no_deb_entries_give_nothing() {
    assert_eq!(
        run_function("deb_src_from_deb822", "Types: deb-src\nURIs: http://x\n"),
        ""
    );
    assert_eq!(
        run_function("deb_src_from_one_line", "# only a comment\n"),
        ""
    );
}
