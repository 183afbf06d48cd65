#!/usr/bin/env bash
# The GPU suite's harness section (scripts/gpu-suite.sh): the heat example
# (examples/harness-app) in harness mode on the GPU, with gevo_harness.h
# loading each variant's PTX through the driver and timing its launches.
#
#   scripts/gpu-harness.sh GEVOD WORKDIR IR [REPLACE_BINARY]
#
# IR is the stencil kernel's device IR emitted where clang is (package-gevod.sh
# writes .dist/e2e/stencil.ll). Prints "ok"/"FAIL" lines; with REPORT=FILE,
# appends a Markdown section for BENCHMARKS.md.
set -uo pipefail
cd "$(dirname "$0")/.."
gevod=$1 work=$2 ir=$3 replace=${4:-}
report=${REPORT:-/dev/null}
harness_time=${HARNESS_TIME:-90s}
mkdir -p "$work"
log=$work/log
check() { # name, command...
    local name=$1; shift
    if "$@" > "$log" 2>&1; then
        echo "ok   $name"
    else
        echo "FAIL $name"; tail -12 "$log"
    fi
}

app=$work/heat
mkdir -p "$app"
cp examples/harness-app/heat.c examples/harness-app/heat.gevo.toml "$app/"
cp "$ir" "$app/stencil.ll"
check "heat builds with cc and gevo_harness.h" cc -O2 -Wall -Wextra -Iinclude -o "$app/heat" "$app/heat.c" -ldl
check "the original PTX" "$gevod" ptx "$app/stencil.ll" --arch sm_90 -o "$app/stencil.ptx"
run_heat() { (cd "$app" && ./heat --nx 300 --ny 200 --steps 10 --seed 1 --out "$app" --ptx stencil.ptx); }
check "heat runs the kernel on the GPU and prints its time" bash -c "$(declare -f run_heat); app=$app; run_heat | grep -q '^GEVO_KERNEL_MS='"
run_heat > "$work/heat.out" 2>&1
check "gevod run: the original passes every test through the harness" \
    "$gevod" run "$app/heat.gevo.toml" --backend cuda --tests all
cp "$log" "$work/run.out"
check "gevod evolve --backend cuda on the harness spec ($harness_time)" \
    "$gevod" evolve "$app/heat.gevo.toml" --backend cuda --state "$work/state" --time "$harness_time"
cp "$log" "$work/evolve.out"
grep -E "^generation|validated|speedup|harness-cuda" "$work/evolve.out" | tail -6
best=$(awk '/minimized patch:/ {print $3}' "$work/evolve.out")
if [ -n "$best" ]; then
    check "the validated variant passes the held-out tests again" \
        "$gevod" run "$app/heat.gevo.toml" --backend cuda --tests heldout --patch "$best"
    cp "$log" "$work/heldout.out"
fi
if [ -n "$replace" ]; then
    check "MODE REPLACE: the program's <<<>>> launch runs gevo's PTX" bash -c "'$replace' | tee /dev/stderr | grep -q 'against the CPU: ok'"
    cp "$log" "$work/replace.out"
fi

{
    echo "## Harness mode and MODE REPLACE on the GPU"
    echo
    echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(date -u +%Y-%m-%d). scripts/gpu-harness.sh."
    echo
    echo "heat (examples/harness-app: 300x200 grid, 10 sweeps) on the original PTX: \`$(grep GEVO_KERNEL_MS "$work/heat.out")\`"
    echo
    echo "\`gevod run heat.gevo.toml --backend cuda --tests all\` (original against itself, 5 alternating rounds per test):"
    echo '```'
    cat "$work/run.out"
    echo '```'
    echo "\`gevod evolve heat.gevo.toml --backend cuda --time $harness_time\`:"
    echo '```'
    grep -vE "DEBUG|^\s*$" "$work/evolve.out" | tail -22
    echo '```'
    if [ -f "$work/heldout.out" ]; then
        echo "The validated variant on the held-out test again:"
        echo '```'
        cat "$work/heldout.out"
        echo '```'
    fi
    if [ -f "$work/replace.out" ]; then
        echo "examples/stencil-replace (MODE REPLACE, built where clang is, run here):"
        echo '```'
        cat "$work/replace.out"
        echo '```'
    fi
} >> "$report"
