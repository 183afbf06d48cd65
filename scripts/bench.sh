#!/usr/bin/env bash
# Runs the benchmarks and rewrites their sections of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# The benchmarks need what the tests need (cmake, Slurm, the CUDA toolkit).
scripts/install-deps.sh test
cargo bench -p gevod --bench ir_pipeline
cargo bench -p gevod --bench guard_builds
cargo bench -p gevod --bench prescreen --profile dev
cargo bench -p gevod --bench screen_first --profile dev
cargo bench -p gevod --bench ptxas_batches --profile dev
cargo bench -p gevod --bench sim_speed
cargo bench -p gevod --bench inputs
cargo bench -p gevod --bench evolve
# Search quality before and after the search's additions (section bench:search).
GEVOD=${CARGO_TARGET_DIR:-target}/release/gevod scripts/search-bench.sh
cargo bench -p gevod --bench slurm
