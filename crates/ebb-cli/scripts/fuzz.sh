#!/usr/bin/env bash
# `./ebb test`'s `fuzz` step: runs every cargo-fuzz target for a bounded
# time (nightly and cargo-fuzz, installed by ./ebb for this step only; the
# product never builds with nightly).
#
# - Under CI=true each target runs EBB_FUZZ_SECONDS (default 30) seconds,
#   and a missing cargo-fuzz fails the step. 30 s: a smoke run on every
#   landing, two targets at a time on CI's 2 cores, inside its 45-minute
#   budget; long runs are EBB_FUZZ_SECONDS=600 bash crates/ebb-cli/scripts/fuzz.sh.
# - Elsewhere each target runs EBB_FUZZ_SECONDS (default 10) seconds when
#   cargo-fuzz is installed, and the step prints SKIPPED otherwise: a
#   developer's `./ebb test` does not compile cargo-fuzz (minutes) unasked.
#
# The seed corpora (fuzz/corpus/TARGET, replayed as ordinary tests by
# apps/memcached/tests/fuzz_corpus.rs and forward_fuzz_corpus.rs,
# crates/ebb-netstack/tests/*_fuzz_corpus.rs,
# crates/ebb-messenger/tests/{wire,map}_fuzz_corpus.rs and
# crates/ebb-offload/tests/wire_fuzz_corpus.rs) are read, never written:
# what libFuzzer finds goes to a scratch corpus under target/fuzz. A
# crash fails the step and leaves its
# input under target/fuzz/artifacts; once fixed, copy it into the seed
# corpus so that the stable tests replay it from then on.
set -euo pipefail
# shellcheck source=crates/ebb-cli/scripts/skip.sh
source "$(dirname "$0")/skip.sh"
cd "${EBB_ROOT:-$(dirname "$0")/../../..}"

# Directory holding a cargo-fuzz package, and its targets.
TARGETS=(
    "apps/memcached text_request"
    "apps/memcached binary_request"
    "apps/memcached forward"
    "crates/ebb-netstack frame"
    "crates/ebb-netstack segment"
    "crates/ebb-messenger wire"
    "crates/ebb-messenger map"
    "crates/ebb-offload request"
    "crates/ebb-posix-files archive"
)

if [ "${CI:-}" = true ]; then
    seconds=${EBB_FUZZ_SECONDS:-30}
else
    seconds=${EBB_FUZZ_SECONDS:-10}
fi

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    missing_tool fuzz "'cargo +nightly fuzz' is not available" \
        "rustup toolchain install nightly --profile minimal; cargo install cargo-fuzz --locked"
fi

scratch=$PWD/target/fuzz

# Builds every target first (one cargo build per fuzz package), so that
# the runs below start at once.
for dir in apps/memcached crates/ebb-netstack crates/ebb-messenger crates/ebb-offload crates/ebb-posix-files; do
    echo "fuzz: building the targets of $dir"
    (cd "$dir" && cargo +nightly fuzz build --sanitizer none --target-dir "$scratch/build")
done

# Runs one target for $seconds.
run_target() {
    local dir=$1 target=$2
    local corpus=$scratch/corpus/$target artifacts=$scratch/artifacts/$target/
    mkdir -p "$corpus" "$artifacts"
    echo "fuzz: $target ($dir) for ${seconds}s"
    # The first corpus directory receives new inputs: the scratch one.
    # No sanitizer: the fuzzed code is safe Rust (the unsafe code under it
    # is Miri's, in the unsafe step), and without AddressSanitizer the
    # build is minutes shorter and each second runs more inputs. No leak
    # check: the store's RCU map frees replaced nodes after a grace period,
    # which the harness (no event loop) never reaches, by design.
    local status=0
    (cd "$dir" && cargo +nightly fuzz run --sanitizer none --target-dir "$scratch/build" "$target" \
        "$corpus" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -artifact_prefix="$artifacts" -detect_leaks=0 -print_final_stats=1) \
        >"$scratch/$target.log" 2>&1 || status=$?
    tail -n 15 "$scratch/$target.log"
    if [ "$status" -eq 0 ]; then
        echo "fuzz: $target: no crash in ${seconds}s"
    else
        echo "fuzz: $target: FAILED (exit $status; input under $artifacts, log $scratch/$target.log)"
    fi
    return "$status"
}

# As many targets at once as there are CPUs: each is one process, and the
# step's time is what CI's budget feels.
jobs=$(nproc)
failed=0
pids=()
for entry in "${TARGETS[@]}"; do
    read -r dir target <<<"$entry"
    run_target "$dir" "$target" &
    pids+=("$!")
    if [ "${#pids[@]}" -ge "$jobs" ]; then
        wait "${pids[0]}" || failed=1
        pids=("${pids[@]:1}")
    fi
done
for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
done
exit "$failed"
