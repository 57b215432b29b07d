//! What the cluster benchmarks (`./ebb bench cluster`, `messenger`)
//! share: ending between steps on a signal, and echo's native image with
//! the QEMU command line `./ebb cluster up` boots nodes with.

use std::path::Path;

use ebb_cli::native::{self, Settings};
use ebb_cli::stop;
use ebb_cluster::NativeCommandLine;

/// Catches SIGTERM, SIGINT, SIGHUP and SIGQUIT and returns the check to
/// make between steps: an error once one came. A Ctrl-C then ends the
/// benchmark by returning, and the allocator's drop stops the nodes and
/// deletes the namespace (by default the signal would end the process and
/// leave both).
pub fn stop_on_signals() -> impl Fn() -> Result<(), String> {
    stop::watch(&[stop::SIGTERM, stop::SIGINT, stop::SIGHUP, stop::SIGQUIT]);
    || match stop::received() {
        Some(signal) => Err(format!("stopped on {}", stop::signal_name(signal))),
        None => Ok(()),
    }
}

/// Builds echo's native image and returns the nodes' QEMU command line
/// and whether it uses KVM.
pub fn echo_image(root: &Path) -> Result<(NativeCommandLine, bool), String> {
    let built = ebb_cli::child::run(&mut native::build_command(root, "echo"))?;
    if built != 0 {
        return Err(format!("building echo's native image failed ({built})"));
    }
    let kvm = native::kvm_usable();
    let command_line = NativeCommandLine {
        settings: Settings::default(),
        kvm,
        tsc_khz: native::measure_tsc_khz(),
    };
    Ok((command_line, kvm))
}
