#!/usr/bin/env bash
# The search benchmark: `gevod evolve` per fixture and seed, once with every
# search behaviour beyond GEVO's own turned off ("before": no distinct-PTX
# selection, no restarts, one population, promotion from the population
# only) and once with gevod's defaults ("after"). Writes every seed, the
# median and the spread to its section of BENCHMARKS.md.
#
#   scripts/search-bench.sh            simulator: stencil, nw, reduce,
#                                      5 seeds x 3000 evaluations each
#                                      (section bench:search)
#   scripts/search-bench.sh --gpu [GEVOD_OR_GZ]
#                                      GPU (--backend cuda): stencil and nw,
#                                      5 seeds x 60 s and seed 1 x 300 s each
#                                      (section bench:search-gpu); the gevod
#                                      packaged by scripts/package-gevod.sh
#                                      (.dist/gevod.gz) by default
#
# Environment: GEVOD (the binary; default: cargo build --release), FIXTURES,
# SEEDS, EVALUATIONS (simulator), SHORT and LONG (GPU run times), AFTER_KEYS
# (settings added to "after"), OUT (the
# Markdown file, default BENCHMARKS.md), KEEP=DIR keeps every run's JSON
# and progress log. To split a long GPU benchmark into several commands
# (one KEEP for all): RUNS ("short long"), SEARCHES ("before after") pick
# what runs, REPORT=0 skips the report, RUNS=none only writes it from KEEP.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=sim
if [ "${1:-}" = "--gpu" ]; then
    mode=gpu
    shift
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gevod=${GEVOD:-}
if [ "$mode" = gpu ]; then
    package=${1:-${gevod:-.dist/gevod.gz}}
    case $package in
    *.gz) gunzip -c "$package" > "$work/gevod" && chmod +x "$work/gevod" && gevod=$work/gevod ;;
    *) gevod=$package ;;
    esac
    export GEVO_LIBDEVICE=${GEVO_LIBDEVICE:-/usr/local/cuda/nvvm/libdevice/libdevice.10.bc}
    fixtures=${FIXTURES:-stencil}
    specs=tests/fixtures/kernels # their [tests.gpu] sets
    seeds=${SEEDS:-1 2 3 4 5}
    budgets=("--time ${SHORT:-60s}")
    long=${LONG:-300s}
    backend=cuda
    section=search-gpu
    command="scripts/search-bench.sh --gpu $package"
else
    if [ -z "$gevod" ]; then
        cargo build --release -p gevod
        gevod=${CARGO_TARGET_DIR:-target}/release/gevod
    fi
    export GEVO_LIBDEVICE=${GEVO_LIBDEVICE:-tests/fixtures/libdevice-stub.ll}
    fixtures=${FIXTURES:-stencil nw reduce}
    specs=tests/fixtures/kernels
    seeds=${SEEDS:-1 2 3 4 5}
    budgets=("--evaluations ${EVALUATIONS:-3000}")
    long=
    backend=sim
    section=search
    command="scripts/search-bench.sh"
fi
keep=${KEEP:-$work/runs}
mkdir -p "$keep"

# "before": the keys that turn the search's additions off (docs/evolve.md).
printf '[evolve]\ntournament_size = 2\ndistinct_ptx = false\nstagnation_generations = 0\nislands = 1\npromotion_pool = 0\n' \
    > "$work/before.toml"
# "after": gevod's defaults, and AFTER_KEYS (TOML lines of [evolve], say
# "valid_parents_first = true") to measure a setting against them.
printf '[evolve]\n%s\n' "${AFTER_KEYS:-}" > "$work/after.toml"

run() { # search, fixture, seed, budget name, budget arguments...
    local search=$1 fixture=$2 seed=$3 name=$4
    shift 4
    local tag=$fixture-$name-$seed-$search t0
    t0=$(date +%s)
    "$gevod" evolve "$specs/$fixture.gevo.toml" --backend "$backend" \
        --state "$work/state-$tag" --config "$work/$search.toml" --seed "$seed" "$@" --json \
        > "$keep/$tag.json" 2> "$keep/$tag.log" || {
        echo "search-bench: $tag failed:" >&2
        tail -5 "$keep/$tag.log" >&2
        exit 1
    }
    rm -rf "$work/state-$tag"
    echo $(($(date +%s) - t0)) > "$keep/$tag.seconds"
    echo "$tag: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print((r["best"] or {}).get("speedup"))' "$keep/$tag.json")" >&2
}
runs=" ${RUNS:-short long} "
searches=${SEARCHES:-before after}
for fixture in $fixtures; do
    if [[ $runs == *" short "* ]]; then
        for seed in $seeds; do
            for search in $searches; do
                run $search "$fixture" "$seed" short ${budgets[0]}
            done
        done
    fi
    if [ -n "$long" ] && [[ $runs == *" long "* ]]; then
        for search in $searches; do
            run $search "$fixture" 1 long --time "$long"
        done
    fi
done
[ "${REPORT:-1}" = 0 ] && exit 0

python3 scripts/search-bench-report.py --mode "$mode" --runs "$keep" \
    --fixtures "$fixtures" --seeds "$seeds" --budget "${budgets[0]}" --long "$long" \
    --out "${OUT:-BENCHMARKS.md}" --section "$section" \
    --command "$command" \
    --gevod-version "$("$gevod" --version 2>/dev/null || echo gevod)"
