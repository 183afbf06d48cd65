#!/usr/bin/env bash
# Fixed against adaptive measurement on the GPU (docs/evolve.md, "Adaptive
# measurement"): the same timed search (seed SEED, default 1) on each of
# MEASURE_FIXTURES (default "loops reduce", on their GPU-sized [tests.gpu]
# sets), once with `--measurement fixed` and once with
# `--measurement adaptive`, MEASURE_TIME (default 300s) each. First each
# fixture's original is timed on its tests (`gevod run`), so the sizes are
# on record. Prints "ok"/"FAIL" lines for scripts/gpu-suite.sh and a
# Markdown table with both modes side by side per fixture: new variants/s
# (variants measured on the GPU), evaluations/s, GPU and compile workers'
# busy shares, timing rounds per variant, and the best validated speedup
# reached at 60 s and at the end, then the workers' seconds by phase;
# REPORT=FILE appends the tables there, and
# KEEP=DIR keeps each search's JSON and the end of its log there.
#
#   scripts/gpu-measure.sh GEVOD WORKDIR
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
gevod=$1 work=$2
mkdir -p "$work"
fixtures=${MEASURE_FIXTURES:-loops reduce}
time=${MEASURE_TIME:-300s}
seed=${SEED:-1}
report=${REPORT:-/dev/null}
k=tests/fixtures/kernels

for f in $fixtures; do
    if "$gevod" run $k/$f.gevo.toml --backend cuda --tests all > "$work/$f.run" 2>&1; then
        echo "ok   $f: the original on the GPU-sized tests"
    else
        echo "FAIL $f: the original on the GPU-sized tests"
    fi
    sed 's/^/    /' "$work/$f.run"
    for mode in adaptive fixed; do
        name=$f-$mode
        # A generation past the budget still finishes: allow for it.
        timeout -s INT "${MEASURE_LIMIT:-600}" "$gevod" evolve $k/$f.gevo.toml --backend cuda \
            --measurement "$mode" --time "$time" --seed "$seed" --state "$work/state-$name" \
            --json > "$work/$name.json" 2> "$work/$name.err"
        search_result "$f: $time search with $mode measurement" $? "$work/$name.json" "$work/$name.err"
        grep -a 'GPU busy' "$work/$name.err" | tail -1 | sed 's/^/    /'
    done
done

if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    for f in "$work"/*.json; do cp "$f" "$KEEP/"; done
    for f in "$work"/*.err; do grep -av DEBUG "$f" | tail -40 > "$KEEP/$(basename "$f" .err).log"; done
fi

python3 - "$work" "$fixtures" <<'PY' | tee -a "$report"
import json, os, subprocess, sys
sys.path.insert(0, "scripts/lib")
import tables
work, fixtures = sys.argv[1], sys.argv[2].split()
gpu = tables.gpus()
print(f"GPU: {gpu[0] if gpu else 'unknown'}. Date: {subprocess.run(['date', '-u', '+%Y-%m-%d'], capture_output=True, text=True).stdout.strip()}.")
print()
tables.header([
    "fixture", "measurement", "seconds", "generations", "new variants/s", "evaluations/s",
    "GPU busy", "compile workers busy", "GPU worker starts (seconds)", "rounds per variant",
    "stopped early", "best validated at 60 s", "best validated at the end [95% interval]"
])
def fmt(x):
    return f"{x:.3f}x" if x else "none"
ratios = []
for f in fixtures:
    rates = {}
    for mode in ["fixed", "adaptive"]:
        path = os.path.join(work, f"{f}-{mode}.json")
        try:
            r = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"| {f} | {mode} | no result: {e} |")
            continue
        u = r.get("utilization") or {}
        timeline = r.get("timeline") or []
        seconds = timeline[-1]["seconds"] if timeline else 0.0
        at60 = [m["best_speedup"] for m in timeline if m["seconds"] <= 60.0]
        best = r.get("best")
        end = (f'{best["speedup"]:.3f}x [{best["interval"][0]:.3f}, {best["interval"][1]:.3f}]'
               if best else "none")
        rates[mode] = u.get("measured_per_s", 0.0)
        timed = max(u.get("timed", 0), 1)
        print(f'| {f} | {mode} | {seconds:.0f} | {r["generations"]} | {u.get("measured_per_s", 0):.1f} | '
              f'{r["evaluations_per_second"]:.1f} | {100 * u.get("gpu_busy_share", 0):.0f}% | '
              f'{100 * u.get("compile_busy_share", 0):.0f}% | {u.get("gpu_starts", 0)} ({u.get("gpu_start_s", 0):.0f} s) | '
              f'{u.get("rounds_per_variant", 0):.1f} | '
              f'{100 * u.get("stopped_early", 0) / timed:.0f}% | {fmt(at60[-1] if at60 else None)} | {end} |')
    if rates.get("fixed"):
        ratios.append(f'{f} {rates.get("adaptive", 0) / rates["fixed"]:.2f}x')
print()
print("New variants/s, adaptive over fixed: " + ", ".join(ratios) + ".")
print()
# Where the workers' seconds went, per search (busy::Spent; start-ups are
# the GPU workers' replacements after crashes and hangs).
phases = [("compile", "compile_s"), ("pre-screen", "prescreen_s"), ("ptxas, guarded", "assemble_guarded_s"),
          ("ptxas, timed", "assemble_s"), ("module load", "jit_load_s"), ("output check", "check_s"),
          ("timing", "timing_s"),
          ("per-kernel times", "profile_s"), ("compute-sanitizer", "sanitizer_s")]
tables.header(["fixture", "measurement", *(p for p, _ in phases), "GPU worker start-up"])
for f in fixtures:
    for mode in ["fixed", "adaptive"]:
        try:
            u = json.load(open(os.path.join(work, f"{f}-{mode}.json"))).get("utilization") or {}
        except (OSError, ValueError):
            continue
        spent = u.get("spent") or {}
        print(f"| {f} | {mode} | " + " | ".join(f"{spent.get(k, 0):.1f} s" for _, k in phases)
              + f' | {u.get("gpu_start_s", 0):.1f} s |')
PY
