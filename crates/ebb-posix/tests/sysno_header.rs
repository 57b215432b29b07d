//! The system-call table (`src/sysno.rs`) against the kernel header this
//! machine has (`asm/unistd_64.h` from Debian's `linux-libc-dev`, which
//! `./ebb test` installs): every call of ours is the header's with the
//! same number, and every call of the header up to our highest number is
//! ours. A newer header's new calls (higher numbers) are not a failure.

use ebb_posix::sysno;

const HEADER: &str = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";

#[test]
fn the_table_matches_the_installed_kernel_header() {
    let Ok(text) = std::fs::read_to_string(HEADER) else {
        let reason = format!("{HEADER} is not installed (Debian's linux-libc-dev)");
        ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
        return;
    };
    let mut from_header: Vec<(usize, String)> = text
        .lines()
        .filter_map(|line| line.strip_prefix("#define __NR_"))
        .filter_map(|rest| {
            let (name, number) = rest.split_once(' ')?;
            Some((number.trim().parse().ok()?, name.to_owned()))
        })
        .collect();
    from_header.sort();
    let ours: Vec<(usize, String)> = sysno::all().map(|(n, name)| (n, name.to_owned())).collect();
    let highest = ours.last().map_or(0, |(number, _)| *number);
    let known: Vec<(usize, String)> = from_header
        .into_iter()
        .filter(|(number, _)| *number <= highest)
        .collect();
    assert_eq!(ours, known);
}
