//! Fuzzes the text protocol handler (text and meta commands): the input
//! is a byte stream from a client, delivered in reads whose size the
//! first byte chooses. The handler must never panic, never consume more
//! than it was given, never reply to a request it has not fully
//! received, and reply the same however the stream was cut.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/text_support/mod.rs"]
mod text_support;

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let read = usize::from(first % 32) + 1;
    let whole = text_support::Harness::new().deliver([stream]);
    let split = text_support::Harness::new().deliver(stream.chunks(read));
    assert_eq!(
        whole.out, split.out,
        "replies depend on how the stream was cut"
    );
    assert_eq!(whole.closed, split.closed);
    if !whole.closed {
        assert_eq!(whole.left, split.left);
    }
});
