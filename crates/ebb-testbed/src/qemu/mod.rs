//! What every QEMU launch needs, for our native images and the Linux
//! comparison guest alike: the accelerator ([`host::kvm_usable`]), the
//! host's TSC rate for the guest ([`host::measure_tsc_khz`]), command
//! lines a user can paste ([`shell_words`]), QMP control ([`qmp`]), and
//! the command line booting our native images ([`command`]).
//! The serial console is read with [`crate::lines`].

pub mod command;
pub mod host;
pub mod process;
pub mod qmp;

pub use host::{accel, host_seed, host_unix_seconds, host_wall_word, kvm_usable, measure_tsc_khz};
pub use process::{find_qemu, process_cpu_seconds, qemu_cpu_seconds};

use std::process::Command;

/// The QEMU binary for x86_64 guests.
pub const QEMU: &str = "qemu-system-x86_64";

/// `program 'arg' ...`, quoted so that it can be pasted into a shell
/// (for `-v` and benchmark reports).
pub fn shell_words(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|word| {
            let word = word.to_string_lossy();
            if !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=./,:+@%".contains(c))
            {
                word.into_owned()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_and_others_are_quoted() {
        let mut command = Command::new("qemu-system-x86_64");
        command.args(["-m", "512M", "a b", "it's", "", "-append", "x=1,y=2"]);
        assert_eq!(
            shell_words(&command),
            r"qemu-system-x86_64 -m 512M 'a b' 'it'\''s' '' -append x=1,y=2"
        );
    }
}
