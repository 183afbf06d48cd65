#!/usr/bin/env bash
# Several GPUs behind one search (docs/cluster.md): the same seeded search
# on each of FIXTURES (default "stencil wavefront", their GPU-sized
# [tests.gpu] sets) with each of MODES (default "one:0 two:0,1 all:all":
# NAME:--devices), TIME (default 40s) each, one after the other on this
# host (a FIXTURES entry may be a spec's path instead). Prints "ok"/"FAIL"
# lines and a Markdown table: variants measured per second and their ratio
# to the first mode, generations per second's
# ratio (the search's pace: variants measured are unequal work where a
# search that gets further sends more of its variants to the GPU), the
# GPUs' and the compile workers' busy shares, the GPU seconds with no
# request, the generations reached and the variants that
# passed their check and were timed, with their timing rounds (a search
# that gets further times more of its variants, each costing its GPU
# more), and what was done ahead (variants of the next batch measured where
# a GPU would have waited, promotion's measurements a batch left under way
# to the next), the compile workers' busy seconds per variant measured by
# phase (pre-screen, ptxas on guarded builds, ptxas on timed builds, code
# generation, generated held-out tests: wall time in each phase) and their
# CPU seconds per variant measured (getrusage, ptxas's included; "-" where
# the build did not count them), the builds they assembled per
# variant measured (guarded / timed), the variants answered as known to
# the search (by their IR after replay, or their PTX after code
# generation), the compile requests the search's variants took per variant
# measured (all, known and failed ones too / those the pre-screen
# rejected), promotion's share of the compile workers' CPU and of the GPU
# workers' time with the variants it measured, and the validated speedup.
# PRESCREENS (e.g. "all smallest off"; default none: gevod's default)
# runs each mode once per `--prescreen` placement
# (docs/evolve.md, "The pre-screen"), its rows named MODE.PLACEMENT;
# GEVOD_ARGS adds flags to every `gevod evolve`.
#
#   scripts/gpu-scaling.sh GEVOD WORKDIR
#   scripts/gpu-scaling.sh --table WORKDIR    (the table of runs already made)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
table() {
    python3 - "$1" <<'PY'
import glob, json, os, sys
sys.path.insert(0, "scripts/lib")
import tables
work = sys.argv[1]
print(tables.host())
print()
tables.header([
    "fixture", "devices", "seconds", "generations", "generations/s vs the first",
    "variants measured", "variants measured/s", "vs the first", "GPU busy",
    "GPU idle (no request)", "compile busy",
    "compile-worker busy s/measured: pre-screen / ptxas guarded / ptxas timed / compile / generated",
    "compile-worker CPU s/measured (getrusage)",
    "assemblies/measured: guarded / timed", "known to the search (IR or PTX)",
    "compile requests/measured: all / screened out", "promotion: compile CPU / GPU / measured",
    "timed", "timing rounds",
    "measured ahead", "promotion carried", "validated"
])
first = {}
results = [p for p in glob.glob(os.path.join(work, "*.json")) if not p.endswith(".cpu.json")]
for path in sorted(results, key=os.path.getmtime):
    name = os.path.basename(path)[:-5]
    fixture, mode = name.rsplit("-", 1)
    try:
        r = json.load(open(path))
    except ValueError as e:
        print(f"| {fixture} | {mode} | no result: {e} |")
        continue
    u = r.get("utilization") or {}
    timeline = r.get("timeline") or []
    seconds = timeline[-1]["seconds"] if timeline else 0.0
    rate = u.get("measured_per_s", 0.0)
    # Variants measured count unequal work where a search that gets
    # further sends more of its variants to the GPU: generations per
    # second are the other ratio.
    pace = r.get("generations", 0) / u["wall_s"] if u.get("wall_s") else 0.0
    base, base_pace = first.setdefault(fixture, (rate, pace))
    idle = u.get("gpu_idle_s", 0.0)
    capacity = u.get("wall_s", 0.0) * u.get("gpu_workers", 0)
    spent, measured = u.get("spent") or {}, max(u.get("measured", 0), 1)
    cpu = " / ".join(f"{spent.get(k, 0.0) / measured:.3f}"
                     for k in tables.COMPILE_WORKER_PHASES)
    assembled = (f"{u.get('guarded_assembled', 0) / measured:.2f} / "
                 f"{u.get('timed_assembled', 0) / measured:.2f}")
    validated = (r.get("best") or {}).get("speedup")
    validated = f"{validated:.3f}x" if validated else "-"
    print(f"| {fixture} | {mode} ({u.get('gpu_workers', 0)} GPU workers) | {seconds:.0f} | {r.get('generations', 0)} | "
          f"{pace / base_pace if base_pace else 0:.2f}x | "
          f"{u.get('measured', 0)} | {rate:.1f} | {rate / base if base else 0:.2f}x | "
          f"{100 * u.get('gpu_busy_share', 0):.0f}% | {idle:.1f} s of {capacity:.0f} | "
          f"{100 * u.get('compile_busy_share', 0):.0f}% | {cpu} | {tables.compile_cpu(u)} | {assembled} | "
          f"{u.get('known_skipped', 0)} | "
          f"{u.get('compiled', 0) / measured:.1f} / {u.get('screened_out', 0) / measured:.1f} | "
          f"{tables.promotion_share(u)} | "
          f"{u.get('timed', 0)} | {u.get('rounds', 0)} | {u.get('measured_ahead', 0)} | "
          f"{u.get('promotion_carried', 0)} | {validated} |")
PY
}
if [ "${1:-}" = --table ]; then
    table "$2"
    exit
fi
gevod=$(realpath "$1") work=$(realpath -m "$2")
mkdir -p "$work"
for f in ${FIXTURES:-stencil wavefront}; do
    # A fixture's name, or any spec's path (named by its file).
    spec=$f
    if [ -f "$spec" ]; then
        f=$(basename "$spec" .gevo.toml)
    else
        spec=$(fixture_spec "$f")
    fi
    for mode in ${MODES:-one:0 two:0,1 all:all}; do
        for placement in ${PRESCREENS:--}; do
            name=$f-${mode%%:*} flags=()
            if [ "$placement" != - ]; then
                name=$name.$placement flags=(--prescreen "$placement")
            fi
            # shellcheck disable=SC2086 # GEVOD_ARGS: flags, split on spaces
            timeout -s INT "${LIMIT:-85}" "$gevod" evolve "$spec" --backend cuda --devices "${mode#*:}" \
                --time "${TIME:-40s}" --seed "${SEED:-1}" --state "$work/state-$name" --json \
                "${flags[@]}" ${GEVOD_ARGS:-} > "$work/$name.json" 2> "$work/$name.err"
            search_result "$name: ${TIME:-40s} search on --devices ${mode#*:} ${flags[*]}" $? \
                "$work/$name.json" "$work/$name.err"
        done
    done
done
table "$work"
