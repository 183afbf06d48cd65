#!/usr/bin/env bash
# The daemon's jobs on several GPUs (`[gpu] devices_per_job`, docs/cluster.md):
# for each of FIXTURES (default "stencil wavefront") and each N of SIZES
# (default "1 2 4", those larger than the host's GPUs left out), starts
# `gevod serve` with `devices_per_job = N` watching a build directory that
# holds only that fixture's spec, lets its one job run TIME seconds (default
# 40) from the moment it runs, stops the daemon with SIGTERM and reads the
# job's numbers back with `gevod report --json`. Prints "ok"/"FAIL" lines and
# a Markdown table: variants measured per second (the GPU workers'
# utilization over the job's committed generations) and their ratio to the
# first group size, the GPUs' and the compile workers' busy shares.
# BACKEND=sim runs the same steps on the simulator (a check of the script
# on a machine without a GPU; its rates say nothing).
#
#   scripts/gpu-daemon-scaling.sh GEVOD GEVO_CLIENT WORKDIR
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
gevod=$(realpath "$1") client=$(realpath "$2") work=$(realpath -m "$3")
mkdir -p "$work"
run_time=${TIME:-40}
gpus=$(nvidia-smi -L | wc -l)


for f in ${FIXTURES:-stencil wavefront}; do
    spec=$(fixture_spec "$f")
    for n in ${SIZES:-1 2 4}; do
        [ "$n" -le "$gpus" ] || { echo "skip $f-$n: $gpus GPU(s) here"; continue; }
        name=$f-$n dir=$work/$f-$n
        rm -rf "$dir" && mkdir -p "$dir/app/build"
        cat > "$dir/gevod.toml" <<TOML
[daemon]
settle = "500ms"
[gpu]
backend = "${BACKEND:-cuda}"
devices_per_job = $n
TOML
        GEVOD_LOG=info "$gevod" serve --config "$dir/gevod.toml" --state "$dir/state" \
            --socket "$dir/sock" --watch "$dir/app" > "$dir/gevod.log" 2>&1 &
        daemon=$!
        running() {
            "$client" --socket "$dir/sock" --json status 2>/dev/null | python3 -c '
import json, sys
sys.exit(not any(s["state"].startswith("running") for s in json.load(sys.stdin)["slots"]))' 2>/dev/null
        }
        answers() { [ -S "$dir/sock" ] && "$client" --socket "$dir/sock" --json status > /dev/null 2>&1; }
        if ! wait_until 30 answers; then
            fail "$name: the daemon answers on its socket" "$dir/gevod.log"; kill -9 $daemon; continue
        fi
        # The IR first, then the spec, as a build writes them; the spec's
        # own project line goes, so that the daemon names it by directory.
        cp "$(dirname "$spec")/$(sed -n 's/^ir = "\(.*\)"/\1/p' "$spec")" "$dir/app/build/"
        grep -v '^project' "$spec" > "$dir/app/build/$f.gevo.toml"
        if ! wait_until 90 running; then
            fail "$name: the job runs" "$dir/gevod.log"; kill -9 $daemon; continue
        fi
        sleep "$run_time"
        kill -TERM $daemon
        wait $daemon
        rc=$?
        if "$gevod" report "$dir/state" --json > "$work/$name.json" 2> "$dir/report.err"; then
            [ "$rc" -eq 0 ] && ok "$name: ${run_time}s with devices_per_job = $n" ||
                fail "$name: the daemon exits 0 on SIGTERM (rc $rc)" "$dir/gevod.log"
        else
            fail "$name: gevod report --json" "$dir/report.err"
        fi
    done
done

python3 - "$work" <<'PY'
import glob, json, os, sys
sys.path.insert(0, "scripts/lib")
import tables
work = sys.argv[1]
print(tables.host())
print()
tables.header([
    "fixture", "devices_per_job", "generations", "seconds", "variants measured",
    "variants measured/s", "vs the first", "GPU busy", "compile busy"
])
rows = {}
for path in glob.glob(os.path.join(work, "*.json")):
    name = os.path.basename(path)[:-5]
    fixture, n = name.rsplit("-", 1)
    rows.setdefault(fixture, []).append((int(n), json.load(open(path))))
for fixture, runs in sorted(rows.items()):
    first = None
    for n, r in sorted(runs, key=lambda x: x[0]):
        u = r.get("utilization") or {}
        rate = u.get("measured_per_s", 0.0)
        first = first or rate
        ratio = f"{rate / first:.2f}x" if first else ""
        print(f"| {fixture} | {n} | {r['generations']} | {u.get('wall_s', 0):.0f} | {u.get('measured', 0)} "
              f"| {rate:.1f} | {ratio} | {100 * u.get('gpu_busy_share', 0):.0f}% "
              f"| {100 * u.get('compile_busy_share', 0):.0f}% |")
PY
