#!/usr/bin/env bash
# Where the GPU worker compares outputs, before and after (issue "No crash
# reaches the GPU worker", part 2): the same timed search (seed SEED,
# default 1) on each of COMPARE_FIXTURES (default "stencil reduce", their
# GPU-sized [tests.gpu] sets), COMPARE_TIME (default 45s) each, with a
# BASE gevod (outputs copied back and compared on the host) and a NEW one
# (outputs compared on the device), one after the other on this GPU. Prints
# "ok"/"FAIL" lines for scripts/gpu-suite.sh and a Markdown table: variants
# measured, output-check seconds in all and per measured variant, the
# timing and safety-gate seconds, variants measured per second, GPU worker
# starts; REPORT=FILE appends it there. Then, with
# GEVOD_LOG=gevod::worker::gpu=info set, what cost the new build's restarts.
#
# NEW_ENV="NAME=VALUE ..." sets those in the new build's environment only
# (the same binary with a setting and without, say).
#
#   scripts/gpu-compare.sh BASE_GEVOD NEW_GEVOD WORKDIR
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
base=$1 new=$2 work=$3
mkdir -p "$work"
fixtures=${COMPARE_FIXTURES:-stencil reduce}
time=${COMPARE_TIME:-45s}
seed=${SEED:-1}
report=${REPORT:-/dev/null}

for f in $fixtures; do
    spec=$(fixture_spec "$f")
    for which in base new; do
        bin=$base; extra=()
        if [ "$which" = new ]; then
            bin=$new
            read -r -a extra <<< "${NEW_ENV:-}"
        fi
        timeout -s INT "${COMPARE_LIMIT:-300}" env "${extra[@]}" "$bin" evolve "$spec" --backend cuda \
            --time "$time" --seed "$seed" --state "$work/state-$f-$which" \
            --json > "$work/$f-$which.json" 2> "$work/$f-$which.err"
        search_result "$f: $time search ($which)" $? "$work/$f-$which.json" "$work/$f-$which.err"
    done
done

python3 - "$work" "$fixtures" <<'PY' | tee -a "$report"
import json, os, subprocess, sys
sys.path.insert(0, "scripts/lib")
import tables
work, fixtures = sys.argv[1], sys.argv[2].split()
gpu = tables.gpus()
print(f"GPU: {gpu[0] if gpu else 'unknown'}. Date: {subprocess.run(['date', '-u', '+%Y-%m-%d'], capture_output=True, text=True).stdout.strip()}.")
print()
tables.header([
    "fixture", "build", "seconds", "variants measured", "output check", "per measured variant",
    "timing", "safety gate", "variants measured/s", "GPU worker starts", "best validated"
])
per = {}
for f in fixtures:
    for which in ["base", "new"]:
        where = which
        try:
            r = json.load(open(os.path.join(work, f"{f}-{which}.json")))
        except (OSError, ValueError) as e:
            print(f"| {f} | {where} | no result: {e} |")
            continue
        u = r.get("utilization") or {}
        spent = u.get("spent") or {}
        measured = u.get("measured", 0)
        check = spent.get("check_s", 0.0)
        each = 1e3 * check / measured if measured else float("nan")
        per[(f, which)] = (each, u.get("measured_per_s", 0.0))
        timeline = r.get("timeline") or []
        seconds = timeline[-1]["seconds"] if timeline else 0.0
        best = r.get("best")
        end = f'{best["speedup"]:.3f}x' if best else "none"
        print(f"| {f} | {where} | {seconds:.0f} | {measured} | {check:.1f} s | {each:.1f} ms | "
              f'{spent.get("timing_s", 0.0):.1f} s | {spent.get("sanitizer_s", 0.0):.1f} s | '
              f'{u.get("measured_per_s", 0):.1f} | {u.get("gpu_starts", 0)} | {end} |')
print()
for f in fixtures:
    if (f, "base") in per and (f, "new") in per:
        (b, bm), (n, nm) = per[(f, "base")], per[(f, "new")]
        print(f"{f}: output check per measured variant {b:.1f} ms -> {n:.1f} ms ({b / n:.1f}x less); "
              f"variants measured/s {bm:.1f} -> {nm:.1f}.")
PY

# What cost each new-build search a GPU worker restart (with
# GEVOD_LOG=gevod::worker::gpu=info in the environment), counted.
for f in $fixtures; do
    causes=$(grep -h "cost its GPU worker a restart" "$work/$f-new.err" 2>/dev/null |
        sed 's/.*failure=//; s/[0-9.]* *us)/N us)/; s/past [0-9.]*m*s/past T/' | sort | uniq -c | sort -rn)
    if [ -n "$causes" ]; then printf '%s restarts (new):\n%s\n' "$f" "$causes"; fi
done
