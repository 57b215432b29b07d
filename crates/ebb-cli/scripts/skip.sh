# Sourced by the step scripts: `skip_group NAME REASON` reports a group of
# checks that cannot run here the way a skipping test does (see
# ebb_testbed::need::skip): a `SKIPPED:` line, a record in the file named by
# EBB_TEST_SKIPS (set by `./ebb test`), and one passed result for
# `./ebb test`'s count, which then moves it from passed to skipped.
skip_group() {
    echo "SKIPPED: $1: $2"
    if [ -n "${EBB_TEST_SKIPS:-}" ]; then
        printf '%s\t%s\n' "$1" "$2" >>"$EBB_TEST_SKIPS"
    fi
    echo "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out (the skipped $1)"
}

# `missing_tool GROUP REASON HINT`: the tool GROUP needs is absent. Under
# CI=true that fails the step (REASON and the install HINT on stderr);
# elsewhere GROUP is reported skipped. Either way the script stops here.
missing_tool() {
    if [ "${CI:-}" = true ]; then
        echo "error: $1 must run under CI=true, but $2" >&2
        echo "(install it: $3)" >&2
        exit 1
    fi
    skip_group "$1" "$2 (install it: $3)"
    exit 0
}
