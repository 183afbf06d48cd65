#!/usr/bin/env bash
# An earlier commit against this tree in one run, on a 2-GPU host
# (docs/cluster.md, "Against an earlier commit"): REV's package
# (`scripts/package-commit.sh REV` made .dist/commit-REV/) on GPU 0 and the
# first half of the cores, GEVOD (this tree's) on GPU 1 and the second half,
# each running its own tree's scripts/gpu-scaling.sh on its own fixtures:
# one search per RUNS entry (FIXTURE:SEED, default "stencil:1"), TIME each
# (default 60s, stopped at LIMIT seconds, default 70), one after another on
# each side, both sides at once. Prints a row per search and side (the
# compile workers' busy seconds per variant measured: pre-screen, ptxas,
# code generation and generated tests together, wall time in each; their CPU
# seconds per variant measured from /proc, either commit's, and as the
# newer build reports them (getrusage); then ptxas's share on the
# guarded and the timed builds, code generation's, and how many of each
# build the compile workers assembled per variant measured, "-" where a
# side's results predate those figures; the validated speedup, 1 where
# nothing validated), then per fixture the medians over its seeds.
#
#   RUNS="lu:1 lu:2 pyramid:1" scripts/gpu-side-by-side.sh REV GEVOD WORKDIR
#   scripts/gpu-side-by-side.sh --table REV WORKDIR    (the runs already made)
set -uo pipefail
cd "$(dirname "$0")/.."
summary() {
    python3 - "$1" "$2" <<'PY'
import glob, json, os, statistics, sys
sys.path.insert(0, "scripts/lib")
import tables
work, rev = sys.argv[1:3]
tables.header(["fixture", "seed", "commit", "generations", "measured/s", "GPU busy", "CPU s per measured variant",
               "CPU s per measured variant, /proc", "getrusage CPU s per measured variant",
               "of which ptxas: guarded / timed", "code generation", "assemblies per measured: guarded / timed",
               "validated"])
runs = {}
for side in (rev, "new"):
    for path in sorted(glob.glob(os.path.join(work, side, "s*", "*-one.json"))):
        seed = os.path.basename(os.path.dirname(path))[1:]
        fixture = os.path.basename(path)[: -len("-one.json")]
        try:
            r = json.load(open(path))
        except ValueError as e:
            print(f"| {fixture} | {seed} | {side} | no result: {e} |")
            continue
        u = r.get("utilization") or {}
        spent = u.get("spent") or {}
        measured = u.get("measured") or 0
        cpu = sum(spent.get(k, 0.0) for k in tables.COMPILE_WORKER_PHASES)
        per = cpu / measured if measured else float("nan")
        speedup = (r.get("best") or {}).get("speedup") or 1.0
        per_measured = lambda v: f"{v / measured:.3f}" if measured else "-"
        # Results from before the split have one ptxas figure, both builds'.
        guarded = per_measured(spent["assemble_guarded_s"]) if "assemble_guarded_s" in spent else "-"
        assemblies = (f"{u['guarded_assembled'] / measured:.2f} / {u['timed_assembled'] / measured:.2f}"
                      if measured and "guarded_assembled" in u else "-")
        # The compile workers' CPU as the kernel counts it, either commit's.
        try:
            sampled = json.load(open(path[: -len(".json")] + ".cpu.json"))["compile_cpu_s"]
            proc = f"{sampled / measured:.3f}" if measured else "-"
        except (OSError, ValueError, KeyError):
            sampled, proc = None, "-"
        runs.setdefault(fixture, {}).setdefault(side, []).append((per, speedup, sampled and sampled / measured))
        print(f"| {fixture} | {seed} | {side} | {r.get('generations')} | {u.get('measured_per_s', 0):.1f} "
              f"| {u.get('gpu_busy_share', 0):.0%} | {per:.3f} | {proc} | {tables.compile_cpu(u)} | {guarded} / {per_measured(spent.get('assemble_s', 0.0))} "
              f"| {per_measured(spent.get('compile_s', 0.0))} | {assemblies} | {speedup:.4f}x |")
print()
print(f"| fixture | seeds | CPU s per measured variant, {rev} -> new (median) | the same from /proc | validated, {rev} -> new (median) |")
print("|---|---|---|---|---|")
for fixture, sides in runs.items():
    old, new = sides.get(rev, []), sides.get("new", [])
    if not old or not new:
        print(f"| {fixture} | - | one side has no result | |")
        continue
    median = lambda rows, i: statistics.median(row[i] for row in rows)
    proc = "-"
    if all(row[2] for row in old + new):
        proc = f"{median(old, 2):.3f} -> {median(new, 2):.3f} ({median(new, 2) / median(old, 2):.2f}x)"
    print(f"| {fixture} | {len(old)} / {len(new)} | {median(old, 0):.3f} -> {median(new, 0):.3f} "
          f"({median(new, 0) / median(old, 0):.2f}x) | {proc} | {median(old, 1):.4f}x -> {median(new, 1):.4f}x |")
PY
}
if [ "${1:-}" = --table ]; then
    summary "${3:?usage: scripts/gpu-side-by-side.sh --table REV WORKDIR}" "$2"
    exit
fi
rev=${1:?usage: scripts/gpu-side-by-side.sh REV GEVOD WORKDIR}
gevod=${2:?usage: scripts/gpu-side-by-side.sh REV GEVOD WORKDIR}
work=${3:?usage: scripts/gpu-side-by-side.sh REV GEVOD WORKDIR}
old=.dist/commit-$rev
if [ ! -f "$old/gevod.gz" ]; then
    echo "no $old/gevod.gz: run scripts/package-commit.sh $rev first" >&2
    exit 2
fi
RUNS=${RUNS:-stencil:1} TIME=${TIME:-60s} LIMIT=${LIMIT:-70}
mkdir -p "$work"
gunzip -c "$old/gevod.gz" > "$work/gevod-$rev" && chmod +x "$work/gevod-$rev"
cores=$(nproc)
half=$((cores / 2))
# side NAME GPU CPUS SCRIPT GEVOD: the searches of RUNS, one after another.
# Each search's compile workers' CPU, sampled from /proc
# (scripts/lib/worker_cpu.py), goes to FIXTURE-one.cpu.json beside its result.
side() {
    # Expanded here: in a command sent to the background, $BASHPID is its own.
    local root=$BASHPID
    for run in $RUNS; do
        local dir=$work/$1/s${run##*:}
        mkdir -p "$dir"
        python3 scripts/lib/worker_cpu.py "$root" "$dir/${run%%:*}-one.cpu.json" &
        local sampler=$!
        CUDA_VISIBLE_DEVICES=$2 taskset -c "$3" env MODES=one:0 FIXTURES="${run%%:*}" \
            TIME="$TIME" LIMIT="$LIMIT" SEED="${run##*:}" "$4" "$5" "$dir"
        kill -TERM "$sampler" && wait "$sampler"
    done > "$work/$1.log" 2>&1
}
side "$rev" 0 "0-$((half - 1))" "$old/scripts/gpu-scaling.sh" "$work/gevod-$rev" &
side new 1 "$half-$((cores - 1))" scripts/gpu-scaling.sh "$gevod" &
wait
grep -h '^ok\|^FAIL' "$work/$rev.log" "$work/new.log"
summary "$work" "$rev"
