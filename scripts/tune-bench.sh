#!/usr/bin/env bash
# Launch configuration: gevo against Kernel Tuner, on the GPU (issue 63).
#
# The tunable fixture tests/fixtures/tune/tile2d (a shared-memory 5-point
# stencil whose block shape BLOCK_X x BLOCK_Y is a compile-time constant,
# source 8 x 8, 20 shapes in its [tune] table; SPEC picks another spec, such
# as the tunable pipeline tests/fixtures/tune/pyramid.gevo.toml, whose
# section is bench:tune-gpu-pyramid) is tuned two ways on the same GPU, then
# gevo evolves on top of its choice:
#
#  1. kt:      Kernel Tuner (the `kernel_tuner` wheel, lang="cupy": NVRTC
#              builds of the .cu, its own CUDA-event timing, brute force over
#              exactly the spec's [tune] values) on every GPU-sized train and
#              held-out test (KT_SETS, default both), each configuration's
#              outputs checked against the source configuration's
#              (scripts/tune-bench/kernel_tuner_run.py; of a pipeline, the
#              kernel launched with a [tune] constant as its block, alone);
#  2. tune:    `gevod tune --backend cuda --tests heldout --json --write` (each
#              configuration's clang-built original checked on the simulator
#              against the source's, then timed); the best one's configured
#              spec is written beside the spec;
#  3. evolve:  `gevod evolve <that spec> --backend cuda --devices 0 --time TIME`;
#  4. measure: on the held-out tests with `gevod run --backend cuda --tests
#              heldout --json` (lower quartiles of rounds, L2 flushed, variant
#              and original alternated): the original of Kernel Tuner's best
#              configuration of each held-out size (clang build, with its NVRTC
#              build as the variant when the PTX loads), and gevo's configured
#              original with its served variant (the search's exported best
#              PTX; the original where nothing validated);
#  5. report:  scripts/tune-bench-report.py writes BENCHMARKS.md's section
#              "Launch configuration: gevo against Kernel Tuner (GPU)", with
#              the two targets: gevo's configuration's original within 2% of
#              Kernel Tuner's best (time ratio <= 1.02), and the served variant
#              at least 5% faster than it (speedup >= 1.05).
#
#   scripts/tune-bench.sh [--gpu] [GEVOD_OR_GZ]   (default .dist/gevod.gz)
#
# On the GPU machine (no network, no Rust, no clang: carry .dist and .whl).
# Kernel Tuner and the dependencies the machine's python3 lacks travel as
# wheels in .whl/ (ignored by git); where they are missing and pip reaches
# its registry, this script downloads them (KT_WHEELS lists them, pinned).
# They are installed into /tmp/site (PYTHONPATH), nothing else is touched.
#
# Environment: TIME (the search, default 240s), KT_ITERATIONS (Kernel Tuner's
# launches per configuration, default 32), STEPS (default "kt tune evolve
# measure report": a later step reads what the earlier ones left in KEEP, so
# a run can be split across calls that share KEEP; STEPS=wheels only fetches
# the wheels, on a machine with pip's registry), KEEP=DIR (every step's
# JSON, log, spec and PTX; default a temp dir, removed), REPORT=0 (no
# report), BENCH_FILE (default BENCHMARKS.md; not OUT, which the device machine sets), SPEC,
# KT_SETS (the sets Kernel Tuner tunes on, default "train,heldout").
set -euo pipefail
cd "$(dirname "$0")/.."

[ "${1:-}" = "--gpu" ] && shift
package=${1:-.dist/gevod.gz}
spec=${SPEC:-tests/fixtures/tune/tile2d.gevo.toml}
steps=" ${STEPS:-kt tune evolve measure report} "
want() { [[ $steps == *" $1 "* ]]; }
work=$(mktemp -d)
dir=$(dirname "$spec")
name=$(basename "$spec" .gevo.toml)
# Configured specs must sit beside the spec (its paths are relative to it);
# they are copied into KEEP and removed here on exit.
gevo_spec=$dir/$name.bench-gevo.gevo.toml
cleanup() { rm -rf "$work"; rm -f "$dir/$name".bench-*.gevo.toml; }
trap cleanup EXIT
keep=${KEEP:-$work/runs}
mkdir -p "$keep"
keep=$(cd "$keep" && pwd)
export GEVO_LIBDEVICE=${GEVO_LIBDEVICE:-/usr/local/cuda/nvvm/libdevice/libdevice.10.bc}
time_budget=${TIME:-240s}

KT_WHEELS=${KT_WHEELS:-"kernel_tuner==1.5.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1
    referencing==0.37.0 rpds-py==2026.9.1 xmltodict==1.0.4 python-constraint2==2.9.0"}

gevod() {
    if [ ! -x "$work/gevod" ]; then
        case $package in
        *.gz) gunzip -c "$package" > "$work/gevod" && chmod +x "$work/gevod" ;;
        *) ln -s "$(realpath "$package")" "$work/gevod" ;;
        esac
    fi
    "$work/gevod" "$@"
}

# step NAME COMMAND...: runs it, its seconds appended to KEEP/steps.tsv.
step() {
    local what=$1; shift
    local t0 ms
    t0=$(date +%s%N)
    echo "tune-bench: $what ..." >&2
    "$@"
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    printf '%s\t%d.%d\n' "$what" $((ms / 1000)) $((ms % 1000 / 100)) >> "$keep/steps.tsv"
    echo "tune-bench: $what done ($(tail -1 "$keep/steps.tsv" | cut -f2) s)" >&2
}

# failed NAME LOG: says so with the log's tail, and stops.
failed() {
    echo "tune-bench: $1 failed:" >&2
    tail -15 "$2" >&2
    exit 1
}

# The wheels in .whl/, downloaded when missing (for the GPU machine's
# python3 3.12 on x86-64, whatever this machine runs).
fetch_wheels() {
    if ! ls .whl/kernel_tuner-*.whl > /dev/null 2>&1; then
        echo "tune-bench: no .whl/kernel_tuner-*.whl: downloading the wheels" >&2
        # shellcheck disable=SC2086 # KT_WHEELS is a list
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
            --platform manylinux1_x86_64 -d .whl $KT_WHEELS
    fi
}

wheels() {
    fetch_wheels
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
}

kernel_tuner() {
    wheels
    PYTHONUNBUFFERED=1 python3 scripts/tune-bench/kernel_tuner_run.py --spec "$spec" \
        --out "$keep/kt.json" --ptx-dir "$keep" --iterations "${KT_ITERATIONS:-32}" \
        --sets "${KT_SETS:-train,heldout}" \
        > "$keep/kt.log" 2>&1 || failed "Kernel Tuner" "$keep/kt.log"
    grep '^kernel_tuner_run:' "$keep/kt.log" | sed 's/^/    /' >&2
}

# `gevod tune`: its JSON in KEEP/tune.json, the best configuration's spec in
# KEEP/gevo-best.gevo.toml.
tune() {
    gevod tune --backend cuda --tests heldout --json --write "$gevo_spec" "$spec" \
        > "$keep/tune.json" 2> "$keep/tune.log" || failed "gevod tune" "$keep/tune.log"
    local written
    written=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("written") or "")' \
        "$keep/tune.json")
    cp "${written:-$gevo_spec}" "$keep/gevo-best.gevo.toml"
}

# The spec of a configured run, beside the spec: KEEP's copy put back.
placed() { # KEEP_FILE -> path beside the spec
    local to
    to=$dir/$name.bench-$(basename "$1" .gevo.toml).gevo.toml
    cp "$1" "$to"
    echo "$to"
}

evolve() {
    local s
    s=$(placed "$keep/gevo-best.gevo.toml")
    echo "$time_budget" > "$keep/evolve.time"
    gevod evolve "$s" --backend cuda --devices 0 --time "$time_budget" --json \
        --state "$work/state" > "$keep/evolve.json" 2> "$keep/evolve.log" ||
        failed "gevod evolve" "$keep/evolve.log"
    python3 - "$keep/evolve.json" "$keep" <<'PY'
import json, shutil, sys
best = json.load(open(sys.argv[1])).get("best")
if best:
    shutil.copy(best["ptx"], f"{sys.argv[2]}/served.ptx")
    shutil.copy(best["minimized_patch"], f"{sys.argv[2]}/served.patch.json")
print(f"tune-bench: served variant: {best['speedup']:.3f}x over the configured original, "
      f"{best['edits_after']} edits" if best else "tune-bench: nothing validated", file=sys.stderr)
PY
    # The served variant's edits in CUDA terms, on its configuration's IR.
    if [ -f "$keep/served.patch.json" ]; then
        local ir
        ir=$(python3 - "$s" <<'PY'
import os, sys, tomllib
spec = tomllib.load(open(sys.argv[1], "rb"))
tune, ir = spec["tune"], spec["ir"]
chosen = tune.get("chosen", tune["source"])
if chosen != tune["source"]:
    ir = tune["ir"]
    for k, v in chosen.items():
        ir = ir.replace("{" + k + "}", str(v))
print(os.path.join(os.path.dirname(sys.argv[1]), ir))
PY
)
        gevod edits "$ir" --patch "$keep/served.patch.json" > "$keep/served.edits.txt" 2>&1 || true
    fi
}

# Kernel Tuner's best configuration of each held-out size: its configured
# spec (the spec's text with [tune.chosen]), the clang-built original
# measured by gevod, with the NVRTC build as the variant when its PTX loads.
measure_kernel_tuner() {
    python3 - "$spec" "$keep" <<'PY'
import json, sys
spec, keep = sys.argv[1:]
text = open(spec).read().rstrip("\n") + "\n"
kt = json.load(open(f"{keep}/kt.json"))
seen = set()
for size in kt["sizes"]:
    if size["set"] != "heldout" or not size["best"]:
        continue
    config = size["best"]["configuration"]
    tag = "x".join(str(v) for v in config.values())
    if tag in seen:
        continue
    seen.add(tag)
    chosen = "".join(f"{k} = {v}\n" for k, v in sorted(config.items()))
    open(f"{keep}/kt-{tag}.gevo.toml", "w").write(text + "\n[tune.chosen]\n" + chosen)
    print(tag, size["best"].get("ptx") or "")
PY
}

measure() {
    local s tag ptx
    measure_kernel_tuner > "$work/kt-configs"
    while read -r tag ptx; do
        s=$(placed "$keep/kt-$tag.gevo.toml")
        if [ -n "$ptx" ] && gevod run "$s" --backend cuda --tests heldout --json --ptx "$ptx" \
            > "$keep/run-kt-$tag.json" 2> "$keep/run-kt-$tag.log"; then
            continue
        fi
        [ -n "$ptx" ] && { echo "tune-bench: Kernel Tuner's NVRTC PTX of $tag does not run here:" >&2
                           tail -3 "$keep/run-kt-$tag.log" >&2; }
        gevod run "$s" --backend cuda --tests heldout --json \
            > "$keep/run-kt-$tag.json" 2> "$keep/run-kt-$tag.log" ||
            failed "gevod run (Kernel Tuner's $tag)" "$keep/run-kt-$tag.log"
    done < "$work/kt-configs"
    s=$(placed "$keep/gevo-best.gevo.toml")
    local variant=()
    [ -f "$keep/served.ptx" ] && variant=(--ptx "$keep/served.ptx")
    gevod run "$s" --backend cuda --tests heldout --json "${variant[@]}" \
        > "$keep/run-gevo.json" 2> "$keep/run-gevo.log" || failed "gevod run (gevo's)" "$keep/run-gevo.log"
}

want wheels && fetch_wheels
want kt && step kt kernel_tuner
want tune && step tune tune
want evolve && step evolve evolve
want measure && step measure measure
if want report && [ "${REPORT:-1}" != 0 ]; then
    # The search's length as it ran (a split run's evolve call may differ).
    [ -f "$keep/evolve.time" ] && time_budget=$(cat "$keep/evolve.time")
    section=tune-gpu
    [ "$name" = tile2d ] || section=tune-gpu-$name
    python3 scripts/tune-bench-report.py --runs "$keep" --spec "$spec" --time "$time_budget" --section "$section" \
        --out "${BENCH_FILE:-BENCHMARKS.md}" --command "scripts/tune-bench.sh --gpu $package (TIME=$time_budget)"
fi
echo "tune-bench: everything it made is in $keep" >&2
