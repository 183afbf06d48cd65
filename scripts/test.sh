#!/usr/bin/env bash
# Installs what is missing and runs every check CI runs: formatting, clippy,
# the whole test suite, fixture regeneration and the packaging invariants.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall time on stderr, where CI's time goes (issue 56's budget).
step_start=$SECONDS
took() {
    echo "test.sh: $1 took $((SECONDS - step_start)) s" >&2
    step_start=$SECONDS
}
scripts/install-deps.sh test
took "installing what is missing"

# CI builds once from a clean clone: incremental caches would only double the
# gevod crate's artifacts on a disk that has run full before.
if [ -n "${CI:-}" ]; then
    export CARGO_INCREMENTAL=0
fi

# The committed fixture IR is exactly what the script makes from the sources.
# Before the build: gevod embeds a fixture, and a file written after the
# build (the same bytes, a new time) would have `cargo test` compile it again.
scripts/gen-fixtures.sh >/dev/null
scripts/tune-fixture-ir.sh >/dev/null
git diff --exit-code --stat -- tests/fixtures || { echo "test: fixtures differ from scripts/gen-fixtures.sh and scripts/tune-fixture-ir.sh output" >&2; exit 1; }
took "the fixtures"

cargo fmt --all -- --check
took "fmt"
# Clippy lints while the build compiles: clippy-driver wraps rustc for the
# workspace's own crates, so the dependencies are compiled once. A separate
# `cargo clippy` checks them all again, about 2 of CI's minutes. The same
# wrapper stays set for `cargo test`, whose artifacts are the build's.
# By hand, `cargo clippy --workspace --all-targets -- -D warnings` is the
# same check.
clippy_driver=$(command -v clippy-driver) || { echo "test: clippy-driver not found (rustup component add clippy)" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
cargo build --workspace --all-targets
took "the build, with clippy's lints"
scripts/verify-systemd.sh target/debug/gevod

# gevod links LLVM statically; gevo-client has no LLVM at all.
if ldd target/debug/gevod | grep -qi libLLVM; then
    echo "test: gevod links libLLVM dynamically" >&2; exit 1
fi
# Nor does gevo-model: its tests build and run without it.
for package in gevo-client gevo-model; do
    if cargo tree -p "$package" --prefix none | grep -qiE '^(llvm-sys|inkwell)'; then
        echo "test: $package depends on LLVM" >&2; exit 1
    fi
done

took "the packaging checks"

# Two test threads per core: many tests wait on a daemon, a child process
# or a deadline, and with one per core the cores idled 17% of the time
# (on CI's 2 cores the tests took 598 s with 2 threads, 505 s with 4).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-$(($(nproc) * 2))}"
cargo test --workspace
took "the tests"

if [ -n "${CI:-}" ]; then
    du -sh "${CARGO_TARGET_DIR:-target}" >&2
    df -h . >&2
fi
