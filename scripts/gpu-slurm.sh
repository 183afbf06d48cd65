#!/usr/bin/env bash
# Slurm GPU steps against local workers on one GPU host (docs/cluster.md):
# the same seeded search on each of FIXTURES (default "stencil", their
# GPU-sized [tests.gpu] sets), TIME (default 40s) each, first with local
# workers on device 0, then inside `salloc` with every worker a Slurm step
# (`--slurm --gpu-steps 1`: the GPU worker a step with `--gres=gpu:1`). The
# cluster is scripts/slurm-cluster.sh's single node, given the host's GPUs.
# Prints "ok"/"FAIL" lines and a Markdown table: variants measured per
# second each way and their ratio, and the GPU's busy share. WORKERS
# (default: the host's CPUs less two) sets the compile workers.
#
#   scripts/gpu-slurm.sh GEVOD WORKDIR
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
gevod=$(realpath "$1") work=$(realpath -m "$2")
mkdir -p "$work"
fixtures=${FIXTURES:-stencil}
time=${TIME:-40s}
seed=${SEED:-1}
limit=${LIMIT:-85}
# One CPU for the engine, the rest for compile workers, either way
# (WORKERS: as many as on another host, for a comparison across hosts).
workers=${WORKERS:-$(( $(nproc) - 2 ))}
gpus=$(nvidia-smi -L | wc -l)

started=$(SLURM_GPUS=$gpus scripts/slurm-cluster.sh start "$work/cluster") || {
    echo "FAIL slurm: a single-node cluster with $gpus GPUs starts"; exit 1; }
export "${started?}"
trap 'scripts/slurm-cluster.sh stop "$work/cluster"' EXIT
echo "ok   slurm: a single-node cluster with $gpus GPUs starts"

for f in $fixtures; do
    spec=$(fixture_spec "$f")
    search=(evolve "$spec" --backend cuda --workers "$workers" --time "$time" --seed "$seed" --json)
    timeout -s INT "$limit" "$gevod" "${search[@]}" --devices 0 --state "$work/state-$f-local" \
        > "$work/$f-local.json" 2> "$work/$f-local.err"
    search_result "$f: $time search, local workers" $? "$work/$f-local.json" "$work/$f-local.err"
    timeout -s INT "$limit" salloc --quiet --ntasks=$((workers + 1)) --gres=gpu:1 \
        "$gevod" "${search[@]}" --slurm --gpu-steps 1 --state "$work/state-$f-slurm" \
        > "$work/$f-slurm.json" 2> "$work/$f-slurm.err"
    search_result "$f: $time search, Slurm steps" $? "$work/$f-slurm.json" "$work/$f-slurm.err"
done

python3 - "$work" "$fixtures" <<'PY'
import json, os, sys
sys.path.insert(0, "scripts/lib")
import tables
work, fixtures = sys.argv[1], sys.argv[2].split()
gpu = tables.gpus()
print(f"GPU: {gpu[0] if gpu else 'unknown'}. CPUs: {os.cpu_count()}.")
print()
tables.header([
    "fixture", "workers", "seconds", "variants measured", "variants measured/s", "GPU busy",
    "compile busy", "GPU worker starts"
])
rate = {}
for f in fixtures:
    for which in ["local", "slurm"]:
        try:
            r = json.load(open(os.path.join(work, f"{f}-{which}.json")))
        except (OSError, ValueError) as e:
            print(f"| {f} | {which} | no result: {e} |")
            continue
        u = r.get("utilization") or {}
        timeline = r.get("timeline") or []
        seconds = timeline[-1]["seconds"] if timeline else 0.0
        rate[(f, which)] = u.get("measured_per_s", 0.0)
        print(f"| {f} | {which} | {seconds:.0f} | {u.get('measured', 0)} | {rate[(f, which)]:.1f} | "
              f"{100 * u.get('gpu_busy_share', 0):.0f}% | {100 * u.get('compile_busy_share', 0):.0f}% | "
              f"{u.get('gpu_starts', 0)} |")
print()
for f in fixtures:
    if rate.get((f, "local")) and (f, "slurm") in rate:
        print(f"{f}: Slurm steps measure {rate[(f, 'slurm')] / rate[(f, 'local')]:.2f}x the variants a second local workers do.")
PY
