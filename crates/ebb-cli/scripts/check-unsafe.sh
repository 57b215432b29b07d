#!/usr/bin/env bash
# `./ebb test`'s `unsafe` step: the checks on our unsafe and lock-free code.
#
# 1. The loom models (stable Rust): the mailbox sleep/wake handshake, the
#    RCU hash map, the oneshot channel (ebb-event), the flow-steering
#    claim (ebb-netstack) and the remote-free queues (ebb-mem). ebb-event's
#    and ebb-netstack's need `--cfg loom`, which changes every crate's
#    fingerprint, so they build in their own target directory instead of
#    evicting the main build. (ebb-mem's are generic over their atomics and
#    also run in the `test` step.)
# 2. Miri (nightly, installed by ./ebb for this step only; the product
#    never builds with nightly) over the tests that drive the unsafe code
#    of ebb-mem (buddy, slabs, magazines, remote frees), ebb-iobuf
#    (buffer ownership and sharing) and ebb-event (its executor, tasks and
#    wakers, driven by the timer tests on the manual clock, which make no
#    system calls). (ebb-mem's global_alloc tests are not run under Miri
#    yet: too slow for the budget.)
#    Tests that make system calls Miri lacks or are too slow for it are
#    `#[cfg_attr(miri, ignore = "...")]` with the reason.
#    ebb-posix-hosted's unsafe is the `syscall` instruction and the thread
#    entries in assembly, which Miri cannot run: its C programs run end to
#    end instead (crates/ebb-cbuild/tests/posix_hosted.rs, test step).
#
# Without nightly Miri the Miri half prints one `SKIPPED:` line, except
# under CI=true, where it must run.
set -euo pipefail
# shellcheck source=crates/ebb-cli/scripts/skip.sh
source "$(dirname "$0")/skip.sh"
cd "${EBB_ROOT:-$(dirname "$0")/../../..}"

echo "loom models: RUSTFLAGS=\"--cfg loom\" cargo test --release -p ebb-event -p ebb-netstack -p ebb-mem --lib loom"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test --release -p ebb-event -p ebb-netstack -p ebb-mem --lib loom

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    missing_tool miri "'cargo +nightly miri' is not available" \
        "rustup toolchain install nightly --profile minimal --component miri"
fi

# The allocators turn addresses into pointers (page and buddy arithmetic):
# permissive provenance is what they need; Miri still checks every access
# against the allocation it came from. Arenas and test heaps live for the
# whole process by design (leaks are not errors here), and proptest reads
# its regression files (isolation off).
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-permissive-provenance -Zmiri-ignore-leaks -Zmiri-disable-isolation}"
run() {
    echo "miri: cargo +nightly miri test $*"
    cargo +nightly miri test "$@"
}
run -p ebb-mem --lib
run -p ebb-mem --test slab_levels
run -p ebb-iobuf --lib --test owner
run -p ebb-event --lib --test timers
