//! Fuzzes frame input: the input is a sequence of Ethernet frames (each
//! with a 2-byte length in front) received by a stack with a static
//! address and a UDP echo socket and by a DHCP client, on a simulated
//! clock. The stacks must never panic, keep their ARP state within its
//! limits, and send only well-formed frames (see `frame_support`).
#![no_main]

use libfuzzer_sys::fuzz_target;

// The corpus test uses the rest of the support module.
#[allow(dead_code)]
#[path = "../../tests/frame_support/mod.rs"]
mod frame_support;

fuzz_target!(|data: &[u8]| {
    frame_support::run(data);
});
