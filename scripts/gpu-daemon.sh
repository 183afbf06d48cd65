#!/usr/bin/env bash
# The daemon part of the GPU suite (called by scripts/gpu-suite.sh):
#   scripts/gpu-daemon.sh GEVOD GEVO_CLIENT.gz WORKDIR
# Starts `gevod serve` (cuda backend, the default idle grace) watching an
# empty build directory, drops the stencil fixture's spec there, then
# checks, printing "ok NAME" or "FAIL NAME" per check and a Markdown table
# of the measured times:
#  - the new spec's job starts within 5 s on the idle GPU, and its first
#    generation is timed;
#  - with nothing else on the GPU the job holds it at least 95% of HOLD_TIME
#    (default 300 s), with no stop at all: the daemon's own processes (its
#    workers, the compute-sanitizer gate) never count as other users;
#  - another process computing on the GPU (tests/fixtures/gpu/busy.cu)
#    makes gevod stop its GPU worker, which frees the GPU's memory;
#  - once that process ends, the job resumes after the grace period;
#  - gevo-client best serves a validated variant that ptxas accepts;
#  - SIGTERM: exit 0 within 10 s.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
gevod=$1 client_package=$2 work=$3
mkdir -p "$work/app/build"
client=$work/gevo-client
gunzip -c "$client_package" > "$client" && chmod +x "$client" || { echo "FAIL unpack $client_package"; exit 1; }
grace=30  # the default [gpu] idle_grace
hold_time=${HOLD_TIME:-300}

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }
status_json() { "$client" --socket "$work/sock" --json status 2>/dev/null; }
slot_state() { status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["slots"][0]["state"])' 2>/dev/null; }
generations() { status_json | python3 -c 'import json,sys; j=[j for j in json.load(sys.stdin)["jobs"] if j["job"]]; print(j[0]["generations"] if j else -1)' 2>/dev/null; }
running() { [[ $(slot_state) == running* ]]; }
waiting_busy() { [[ $(slot_state) == "waiting: GPU busy"*"other process"* ]]; }
worker_gone() { ! pgrep -f "gevod gpu-worker" > /dev/null; }

nvcc -O2 -o "$work/busy" tests/fixtures/gpu/busy.cu || { fail "busy.cu builds"; exit 1; }
grep -v '^project' tests/fixtures/kernels/stencil.gevo.toml > "$work/stencil.gevo.toml"
cat > "$work/gevod.toml" <<TOML
[daemon]
settle = "500ms"
[schedule]
slice = "5s"
[gpu]
backend = "cuda"
poll_interval = "250ms"
[evolve]
population = 64
TOML
"$work/busy" 0.1 > /dev/null  # the CUDA runtime's first start, out of the timings

GEVOD_LOG=info "$gevod" serve --config "$work/gevod.toml" --state "$work/state" \
    --socket "$work/sock" --watch "$work/app" > "$work/gevod.log" 2>&1 &
daemon=$!
wait_until 30 bash -c "[ -S '$work/sock' ] && [[ \$('$client' --socket '$work/sock' --json status 2>/dev/null) == *slots* ]]" ||
    { fail "daemon: answers on its socket" "$work/gevod.log"; kill -9 $daemon; exit 1; }
sleep 2  # past the daemon's first look at the GPU
# The spec arrives: the IR first, then the spec, as a build writes them.
cp tests/fixtures/kernels/stencil.ll "$work/app/build/"
cp "$work/stencil.gevo.toml" "$work/app/build/stencil.gevo.toml"
arrived=$(now)
if wait_until 60 running; then
    to_running=$(since "$arrived")
    if python3 -c "import sys; sys.exit(float(sys.argv[1]) > 5)" "$to_running"; then
        ok "daemon: a new spec's job runs on the idle GPU ${to_running}s after it arrived (at most 5 s)"
    else
        fail "daemon: a new spec's job runs within 5 s on the idle GPU (took ${to_running}s)" "$work/gevod.log"
    fi
else
    fail "daemon: the job runs on the idle GPU" "$work/gevod.log"; kill -9 $daemon; exit 1
fi
evaluated() { status_json | python3 -c 'import json,sys; j=[j for j in json.load(sys.stdin)["jobs"] if j["job"]]; sys.exit(not (j and j[0]["evaluations"] > 0))' 2>/dev/null; }
wait_until 120 evaluated && to_generation=$(since "$arrived")
wait_until 60 bash -c '[ "$(pgrep -fc "gevod gpu-worker")" -ge 1 ]' && ok "daemon: its GPU worker is up" || fail "daemon: its GPU worker is up" "$work/gevod.log"

# Nothing else computes: the job holds the GPU for HOLD_TIME.
stops() { grep -c "stopping the running job" "$work/gevod.log"; }
held_s() { status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["slots"][0]["held_s"])' 2>/dev/null; }
validated() { status_json | python3 -c 'import json,sys; j=[j for j in json.load(sys.stdin)["jobs"] if j["job"]]; print(j[0]["validated"] if j else 0)' 2>/dev/null; }
sleep "$(python3 -c "import sys; print(max(0.0, float(sys.argv[1]) - float(sys.argv[2])))" "$hold_time" "$(since "$arrived")")"
held=$(held_s)
window=$(since "$arrived")
share=$(python3 -c "import sys; print(f'{100 * float(sys.argv[1]) / float(sys.argv[2]):.1f}')" "${held:-0}" "$window")
held_validated=$(validated)
held_stops=$(stops)
[ "$held_stops" -eq 0 ] && ok "daemon: no stop while nothing else computes (${held_validated} validated meanwhile)" ||
    fail "daemon: $held_stops stops while nothing else computes" "$work/gevod.log"
if python3 -c "import sys; sys.exit(float(sys.argv[1]) < 95)" "$share"; then
    ok "daemon: the job held the GPU ${share}% of ${window}s"
else
    fail "daemon: the job held the GPU ${share}% of ${window}s (at least 95%)" "$work/gevod.log"
fi

"$work/busy" 12 > "$work/busy.out" 2>&1 &
busy=$!
busy_started=$(now)
if wait_until 10 bash -c "nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qw $busy"; then
    seen=$(now)
    if wait_until 10 worker_gone; then
        released=$(since "$seen"); ok "daemon: GPU worker stopped ${released}s after another process started computing"
    else
        fail "daemon: GPU worker stopped when another process computes" "$work/gevod.log"
    fi
    wait_until 5 waiting_busy && ok "daemon: status says why ($(slot_state))" || fail "daemon: status names the other process ($(slot_state))"
    others=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -vcw $busy)
    [ "$others" -eq 0 ] && ok "daemon: no gevod process holds GPU memory meanwhile" || fail "daemon: $others other compute processes remain"
    sleep 3
    [[ $(slot_state) == waiting* ]] && ok "daemon: still waiting while the GPU is busy" || fail "daemon: still waiting while the GPU is busy ($(slot_state))"
else
    fail "daemon: busy.cu shows up in nvidia-smi" "$work/busy.out"
fi
wait $busy
busy_ended=$(now)
# Every stop so far must name busy.cu's process, never one of gevod's own.
own_stops=$(grep "stopping the running job" "$work/gevod.log" | grep -v "pid $busy\b" | wc -l)
[ "$own_stops" -eq 0 ] && ok "daemon: no stop for the daemon's own processes" ||
    { fail "daemon: $own_stops stops for processes other than busy.cu ($busy)"; grep "stopping the running job" "$work/gevod.log" | grep -v "pid $busy\b" | head -3 | sed 's/^/    /'; }
if wait_until 60 running; then
    resumed=$(since "$busy_ended"); ok "daemon: the job resumed ${resumed}s after the other process ended (grace ${grace}s)"
else
    fail "daemon: the job resumes after the grace period" "$work/gevod.log"
fi

served() { "$client" --socket "$work/sock" best stencil --arch sm_90 -o "$work/best.ptx" 2> "$work/best.err"; }
if wait_until 300 served; then
    ok "daemon: gevo-client best serves a validated variant"
    "$client" --socket "$work/sock" --json best stencil 2>/dev/null | python3 -c '
import json, sys
b = json.load(sys.stdin)
lo, hi = b["interval"]
print(f"    {b['"'"'kernel'"'"']} on {b['"'"'backend'"'"']}: speedup {b['"'"'speedup'"'"']:.3f}x [{lo:.3f}, {hi:.3f}], generation {b['"'"'generation'"'"']}")'
    ptxas -arch=sm_90 "$work/best.ptx" -o "$work/best.cubin" && ok "daemon: the served PTX assembles" || fail "daemon: the served PTX assembles"
else
    fail "daemon: gevo-client best serves a validated variant ($(cat "$work/best.err"))" "$work/gevod.log"
fi
gens=$(generations)

term=$(now)
kill -TERM $daemon
wait $daemon
rc=$?
stop_time=$(since "$term")
if [ "$rc" -eq 0 ] && python3 -c "import sys; sys.exit(float(sys.argv[1]) >= 10)" "$stop_time"; then
    ok "daemon: SIGTERM exits 0 in ${stop_time}s"
else
    fail "daemon: SIGTERM exits 0 within 10 s (rc $rc, ${stop_time}s)" "$work/gevod.log"
fi
"$client" --socket "$work/sock" --state "$work/state" best stencil --arch sm_90 -o "$work/exported.ptx" 2> "$work/export.err" &&
    cmp -s "$work/exported.ptx" "$work/best.ptx" || "$client" --socket "$work/sock" --state "$work/state" best stencil > /dev/null 2>&1
[ $? -eq 0 ] && ok "daemon: gevo-client best answers from the export when gevod is down" || fail "daemon: answers from the export" "$work/export.err"
grep -E "WARN|ERROR" "$work/gevod.log" | head -5 | sed 's/^/    log: /'

echo
echo "| daemon on the GPU | seconds |"
echo "|---|---|"
echo "| a new spec's arrival to its job running | ${to_running:-} |"
echo "| a new spec's arrival to its first generation's evaluations | ${to_generation:-} |"
echo "| share of ${window:-} s the job held the GPU, nothing else running (%) | ${share:-} |"
echo "| stops in that time (validated variants: ${held_validated:-}) | ${held_stops:-} |"
echo "| another process computing to gevod's GPU worker gone | ${released:-} |"
echo "| other process ended to the job running again (grace ${grace} s) | ${resumed:-} |"
echo "| SIGTERM to exit | ${stop_time:-} |"
echo "| generations when stopped | ${gens:-} |"
