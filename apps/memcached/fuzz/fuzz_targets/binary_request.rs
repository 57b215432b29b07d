//! Fuzzes the binary protocol handler: the input is a byte stream from a
//! client, delivered in reads whose size the first byte chooses. The
//! handler must never panic, never consume more than it was given, and
//! never reply to a request it has not fully received.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/binary_support/mod.rs"]
mod binary_support;

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let read = usize::from(first % 32) + 1;
    let harness = binary_support::Harness::new();
    let whole = harness.deliver([stream]);
    let split = binary_support::Harness::new().deliver(stream.chunks(read));
    assert_eq!(
        whole.out, split.out,
        "replies depend on how the stream was cut"
    );
    assert_eq!(whole.closed, split.closed);
    if !whole.closed {
        assert_eq!(whole.left, split.left);
    }
});
