#!/usr/bin/env bash
# The generality benchmark (docs/evolve.md, "Generality in selection"):
# `gevod evolve` per spec and seed, with the generated held-out tests in
# selection (`on`, the default) and without (`off`, promotion only: the
# search before issue 57). Writes its section of BENCHMARKS.md: validated
# speedups, when they were found, promotion attempts a generated test
# refused after the first quarter of each run, and what the checks cost
# the compile workers.
#
#   scripts/generality-bench.sh                 simulator, 3000 evaluations
#   scripts/generality-bench.sh --gpu [GEVOD_OR_GZ]
#                                               GPU, TIME (default 120s) each
#
# Environment: SPECS (default: the whole-tile stencil and the pyramid
# pipeline), SEEDS (default "1 2"), ARMS ("on off"; also "stall": `on` with
# restarts after STALL generations without a new validated best, default
# 8, gevod's default; `on` and `off` have no such restarts), SECTION (the BENCHMARKS.md section, default bench:generality or
# bench:generality-gpu), TIME, EVALUATIONS,
# KEEP=DIR (each run's JSON and log; several commands can share one),
# REPORT=0 (no report), BENCH_FILE (default BENCHMARKS.md; not OUT, which
# the GPU machine sets to its output folder).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=sim
if [ "${1:-}" = "--gpu" ]; then
    mode=gpu
    shift
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$mode" = gpu ]; then
    package=${1:-.dist/gevod.gz}
    case $package in
    *.gz) gunzip -c "$package" > "$work/gevod" && chmod +x "$work/gevod" && gevod=$work/gevod ;;
    *) gevod=$package ;;
    esac
    export GEVO_LIBDEVICE=${GEVO_LIBDEVICE:-/usr/local/cuda/nvvm/libdevice/libdevice.10.bc}
    budget=(--time "${TIME:-120s}" --backend cuda --devices 0)
    command="scripts/generality-bench.sh --gpu $package (TIME=${TIME:-120s})"
else
    gevod=${GEVOD:-}
    if [ -z "$gevod" ]; then
        cargo build --release -p gevod
        gevod=${CARGO_TARGET_DIR:-target}/release/gevod
    fi
    export GEVO_LIBDEVICE=${GEVO_LIBDEVICE:-tests/fixtures/libdevice-stub.ll}
    budget=(--evaluations "${EVALUATIONS:-3000}" --backend sim)
    command="scripts/generality-bench.sh (EVALUATIONS=${EVALUATIONS:-3000})"
fi
specs=${SPECS:-tests/fixtures/general/wholetile.gevo.toml tests/fixtures/pipelines/pyramid.gevo.toml}
seeds=${SEEDS:-1 2}
arms=${ARMS:-on off}
keep=${KEEP:-$work/runs}
mkdir -p "$keep"
# `on` and `off` without restarts on a stalled validated best (the
# searches they were measured as); `stall` is gevod's default.
printf '[evolve]\ngenerality_in_selection = true\nvalidated_stall_generations = 0\n' > "$work/on.toml"
printf '[evolve]\ngenerality_in_selection = false\nvalidated_stall_generations = 0\n' > "$work/off.toml"
printf '[evolve]\ngenerality_in_selection = true\nvalidated_stall_generations = %s\n' "${STALL:-8}" \
    > "$work/stall.toml"

for spec in $specs; do
    name=$(basename "$spec" .gevo.toml)
    for seed in $seeds; do
        for arm in $arms; do
            tag=$name-$arm-$seed
            "$gevod" evolve "$spec" "${budget[@]}" --state "$work/state-$tag" \
                --config "$work/$arm.toml" --seed "$seed" --json \
                > "$keep/$tag.json" 2> "$keep/$tag.log" || {
                echo "generality-bench: $tag failed:" >&2
                tail -5 "$keep/$tag.log" >&2
                exit 1
            }
            rm -rf "$work/state-$tag"
            echo "generality-bench: $tag done" >&2
        done
    done
done
[ "${REPORT:-1}" = 0 ] && exit 0
python3 scripts/generality-bench-report.py --mode "$mode" --runs "$keep" \
    --specs "$specs" --seeds "$seeds" --arms "$arms" --out "${BENCH_FILE:-BENCHMARKS.md}" \
    --section "${SECTION:-}" --stall "${STALL:-8}" \
    --command "$command"
