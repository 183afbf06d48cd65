#!/usr/bin/env bash
# The end-to-end part of the GPU suite (called by scripts/gpu-suite.sh):
#   scripts/gpu-e2e.sh GEVOD GEVO_CLIENT WORKDIR [IR_DIR]
# GEVOD and GEVO_CLIENT are the unpacked binaries. IR_DIR (default
# .dist/e2e) holds stencil.ll, the device IR of examples/stencil-app that
# scripts/package-gevod.sh emitted through gevo_optimize() with clang-19:
# this machine has no clang, so the build takes it with -DGEVO_IR_DIR.
#
# Runs the example the way a user would, on the GPU, checking, with "ok NAME"
# or "FAIL NAME" per check and the tail of the relevant log after a failure:
#  - `gevod serve` (cuda backend, idle grace 3 s) starts in a temporary state
#    directory with its own socket; configuring the example (Ninja, the CUDA
#    toolkit of nvcc, GEVOD, GEVO_CLIENT, GEVO_SOCKET, GEVO_IR_DIR) registers
#    its build directory's gevo/ with it;
#  - the first build embeds the original PTX (the build log says so), built
#    from the carried IR, and the program runs it on the GPU and matches its
#    CPU reference;
#  - gevod validates a variant within E2E_TIME (default 240 s):
#    `gevo-client best` exits 0;
#  - with the job paused, the rebuild embeds that variant: the build log says
#    so with its speedup, the program's PTX (--print-ptx) hashes to the
#    ptx_hash of `gevo-client --json best` and is not the original,
#    `--origin` says evolved, and the program's output matches its CPU
#    reference; compute-sanitizer's memcheck and racecheck of that run are
#    reported (not counted) when it is installed;
#  - SIGTERM: gevod exits 0.
# With REPORT=FILE, appends the Markdown section "End to end on the GPU
# (CMake EMBED)" to FILE.
# With E2E_LOGS=DIR, leaves its logs (gevod's, cmake's, the program's) in
# DIR/gpu-e2e-logs.tar.gz.
#
# E2E_BACKEND=sim runs the same steps on the simulator (a dry run on a
# machine without a GPU; the program's GPU runs then fail).
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 GEVOD GEVO_CLIENT WORKDIR [IR_DIR]" >&2; exit 2; }
mkdir -p "$3"
gevod=$(realpath "$1") client=$(realpath "$2") work=$(realpath "$3")
ir_dir=${4:+$(realpath -m "$4")}
cd "$(dirname "$0")/.." || exit 2
source scripts/lib/common.sh
ir_dir=${ir_dir:-$PWD/.dist/e2e}
backend=${E2E_BACKEND:-cuda}
population=${E2E_POPULATION:-64}
# The search's seed. With seed 1 on this IR the search dwells on
# near-neutral edits (a 0.9999 cost ratio after 10 simulator generations,
# nothing validated in 240 s on an H200); seed 4 reaches the redundant
# barrier's deletion within 7 simulator generations.
seed=${E2E_SEED:-4}
grace=3
arch=sm_90
kernel=stencil-app/stencil
case ${E2E_TIME:-240} in
    *m) e2e_time=$(( ${E2E_TIME%m} * 60 )) ;;
    *s) e2e_time=${E2E_TIME%s} ;;
    *) e2e_time=${E2E_TIME:-240} ;;
esac
build=$work/build
app=$build/stencil-app
sock=$work/sock
state=$work/state
report=${REPORT:-}
rm -rf "$build" "$state" "$sock"

passed=0 failed=0
daemon=
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
indent() { sed 's/^/    /'; }
ok() { passed=$((passed + 1)); echo "ok   $1"; }
# fail NAME [FILE [LINES]]: the check failed; shows FILE's last LINES lines.
fail() {
    failed=$((failed + 1)); echo "FAIL $1"
    if [ -n "${2:-}" ]; then
        if [ -s "$2" ]; then tail -n "${3:-25}" "$2" | indent; else echo "    ($2 is empty or missing)"; fi
    fi
}
skip() { echo "skip $1"; }
cl() { "$client" --socket "$sock" --state "$state" "$@"; }
# What the daemon is doing, in one line: its slots and jobs.
read -r -d '' describe_status <<'PY'
import json, sys
try:
    s = json.load(sys.stdin)
except Exception:
    print("status unreadable (is gevod up?)")
    sys.exit()
slots = "; ".join(f"{x['name']}: {x['state']}" for x in s["slots"]) or "none"
jobs = "; ".join(
    f"{j['kernel']} v{j['version']} {j['state']}, generation {j['generations']}, "
    f"{j['evaluations']} evaluations, {j['validated']} validated"
    + (f" ({j['message']})" if j.get("message") else "")
    for j in s["jobs"]) or "none"
print(f"slots: {slots}; jobs: {jobs}")
PY
daemon_state() { cl --json status 2>/dev/null | python3 -c "$describe_status"; }
# The daemon's warnings and errors, then the end of its log.
daemon_log() {
    if grep -qE "WARN|ERROR" "$work/gevod.log"; then
        echo "    gevod.log, warnings and errors (the first 10):"
        grep -E "WARN|ERROR" "$work/gevod.log" | head -10 | indent
    fi
    echo "    gevod.log, last lines:"
    tail -n "${1:-20}" "$work/gevod.log" | indent
}
# shellcheck disable=SC2317  # called through wait_until
daemon_gone() { ! daemon_alive; }
daemon_alive() { [ -n "$daemon" ] && [ -e "/proc/$daemon" ] && [ "$(awk '{print $3}' "/proc/$daemon/stat" 2>/dev/null)" != Z ]; }
# shellcheck disable=SC2317  # called through wait_until
not_running() { [[ $(cl --json status 2>/dev/null | python3 -c 'import json,sys; print(" ".join(s["state"] for s in json.load(sys.stdin)["slots"]))' 2>/dev/null) != *running* ]]; }
first_line() { grep -m1 -E "$1" "$2" | sed 's/^ *//'; }

# The report's facts, filled in as the steps get there.
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
to_valid='' valid_state='' best_summary='' log_original='' log_evolved='' hash_line='' origin_line='' run_lines='' sanitizer='' stop_line=''

write_report() {
    [ -n "$report" ] || return 0
    {
        echo
        echo "## End to end on the GPU (CMake EMBED)"
        echo
        echo "Command (on the GPU test machine, with \`.dist\` from \`scripts/package-gevod.sh\`):"
        echo "\`SECTIONS=e2e scripts/gpu-suite.sh .dist/gevod.gz .dist/gevo-client.gz\` (the section is"
        echo "\`scripts/gpu-e2e.sh\`; the example's device IR is \`.dist/e2e/stencil.ll\`, emitted by"
        echo "\`gevo_optimize()\` with clang-19 on the packaging machine). Machine: ${gpu:-no GPU found}; $tools."
        echo "Date: $(date -u +%Y-%m-%d). Result: **$passed passed, $failed failed**."
        echo
        echo "\`gevod serve\` (backend $backend, idle grace ${grace} s, population $population, seed $seed) in a temporary"
        echo "state directory; \`examples/stencil-app\` configured with \`-DGEVO_IR_DIR\`, \`GEVOD\`,"
        echo "\`GEVO_CLIENT\` and \`GEVO_SOCKET\` (configuring registers its \`gevo/\` with the daemon), built,"
        echo "evolved until \`gevo-client best\` answered, rebuilt with the job paused, and run."
        echo
        echo "- time to the first validated variant, from the end of the first build: ${to_valid:-none within ${e2e_time} s}${valid_state:+ ($valid_state)}"
        echo "- best: ${best_summary:-none}"
        echo "- embedded PTX: ${hash_line:-not checked}"
        echo "- compute-sanitizer on the evolved program: ${sanitizer:-not run}"
        echo "- gevod after SIGTERM: ${stop_line:-not checked}"
        echo
        echo "Build log, first build and rebuild:"
        echo
        echo '```text'
        echo "${log_original:-(no line)}"
        echo "${log_evolved:-(no line)}"
        echo '```'
        echo
        echo "The program (\`stencil-app --origin\`, then \`stencil-app\`):"
        echo
        echo '```text'
        echo "${origin_line:-(not run)}"
        [ -n "$run_lines" ] && echo "$run_lines"
        echo '```'
    } >> "$report"
}

# SIGTERM to the daemon; checks exit 0 within 20 s.
stop_daemon() {
    local term stop_time rc
    if ! daemon_alive; then
        wait "$daemon"; rc=$?
        stop_line="it had exited early (exit $rc)"
        fail "gevod still runs at the end (it exited early, exit $rc)"; daemon_log; daemon=; return
    fi
    term=$(now)
    kill -TERM "$daemon"
    if wait_until 20 daemon_gone; then
        wait "$daemon"; rc=$?
        stop_time=$(since "$term")
        stop_line="exit $rc in ${stop_time} s"
        if [ "$rc" -eq 0 ]; then
            ok "gevod: SIGTERM exits 0 (${stop_time}s)"
        else
            fail "gevod: SIGTERM exits 0 (exit $rc)"; daemon_log
        fi
    else
        stop_line="still running 20 s after SIGTERM (killed)"
        fail "gevod: SIGTERM exits within 20 s"; daemon_log
        kill -9 "$daemon"; wait "$daemon"
    fi
    daemon=
}

finish() {
    [ -n "$daemon" ] && stop_daemon
    write_report
    if [ -n "${E2E_LOGS:-}" ]; then
        mkdir -p "$E2E_LOGS"
        (cd "$work" && tar czf "$E2E_LOGS/gpu-e2e-logs.tar.gz" --ignore-failed-read ./*.log ./*.out ./*.err ./*.toml ./*.json \
            build/gevo/stencil.gevo.toml build/gevo/stencil.ptx.origin 2>/dev/null)
        echo "    logs: $E2E_LOGS/gpu-e2e-logs.tar.gz"
    fi
    echo "gpu-e2e: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}
trap '[ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null' EXIT
trap 'exit 130' INT TERM

# --- 0. What this needs.
if [ -s "$ir_dir/stencil.ll" ]; then
    ir_dir=$(realpath "$ir_dir")
    ok "the example's IR is here: $ir_dir/stencil.ll ($(wc -c < "$ir_dir/stencil.ll") bytes)"
    if [ -f "$ir_dir/SOURCES" ] && ! sha256sum --quiet -c "$ir_dir/SOURCES" > "$work/sources.txt" 2>&1; then
        echo "    note: the IR was emitted from other sources than this checkout's (rerun scripts/package-gevod.sh):"
        indent < "$work/sources.txt"
    fi
else
    fail "the example's IR is here ($ir_dir/stencil.ll: run scripts/package-gevod.sh and carry .dist)"
    finish
fi
# The CUDA toolkit that nvcc belongs to (the example links its libcuda).
cuda_root=/usr/local/cuda
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc_path" ] && cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
tools="$(nvcc --version 2>/dev/null | tail -1 || true), $(cmake --version | head -1), ${generator[*]:-default generator}"
tools=${tools#, }
echo "    gpu: ${gpu:-none}; CUDA toolkit: $cuda_root; $tools; backend $backend; E2E_TIME ${e2e_time}s"

# --- 1. The daemon.
cat > "$work/gevod.toml" <<TOML
[daemon]
settle = "500ms"
debounce = "200ms"
[schedule]
slice = "10s"
[gpu]
backend = "$backend"
idle_grace = "${grace}s"
poll_interval = "250ms"
[jobs]
seed = $seed
[evolve]
population = $population
TOML
GEVOD_LOG=info NO_COLOR=1 "$gevod" serve --config "$work/gevod.toml" --state "$state" --socket "$sock" \
    > "$work/gevod.log" 2>&1 &
daemon=$!
started=$(now)
answers() { "$client" --socket "$sock" status > /dev/null 2>&1; }
# shellcheck disable=SC2317  # called through wait_until
answers_or_exited() { answers || ! daemon_alive; }
if wait_until 30 answers_or_exited && answers; then
    ok "gevod serve answers on its socket after $(since "$started")s"
else
    fail "gevod serve answers on its socket within 30 s"; daemon_log
    if daemon_alive; then kill -9 "$daemon"; fi
    wait "$daemon"; daemon=
    finish
fi

# --- 2. Configure and the first build: the original PTX.
configure() {
    timeout 300 cmake -S examples/stencil-app -B "$build" "${generator[@]}" \
        -DGEVO_IR_DIR="$ir_dir" -DGEVOD="$gevod" -DGEVO_CLIENT="$client" \
        -DGEVO_PROJECT=stencil-app -DGEVO_SOCKET="$sock" -DGEVO_STATE="$state" -DCUDAToolkit_ROOT="$cuda_root"
}
if configure > "$work/configure.log" 2>&1; then
    ok "configure: examples/stencil-app with GEVO_IR_DIR"
else
    fail "configure: examples/stencil-app with GEVO_IR_DIR" "$work/configure.log" 40; finish
fi
if grep -A3 "Manually-specified variables were not used" "$work/configure.log" | grep -q GEVO_IR_DIR; then
    fail "configure: gevo_optimize() takes GEVO_IR_DIR (this checkout's cmake/GevoOptimize.cmake ignores it)"
fi
watched=$(realpath "$build/gevo")
if grep -q "gevod: watching $watched" "$work/configure.log"; then
    ok "configure: registered $watched with gevod"
else
    fail "configure: registered $watched with gevod" "$work/configure.log"; echo "    $(daemon_state)"
fi
driver_lib=$(sed -n 's/^CUDA_cuda_driver_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")
echo "    CUDA driver library found by CMake: ${driver_lib:-none}"

if timeout 300 cmake --build "$build" > "$work/build1.log" 2>&1; then
    t_first=$(now)  # the kernel's IR and spec are in the watched directory now
    ok "first build"
else
    fail "first build" "$work/build1.log" 40; finish
fi
if ldd "$app" 2>&1 | grep -q 'libcuda\.so'; then
    ok "first build: the program links the CUDA driver (CMake's CUDA::cuda_driver: $driver_lib)"
else
    fail "first build: the program links the CUDA driver (CMake found no CUDA toolkit at $cuda_root: it cannot run the kernel)"
    grep -i 'cuda' "$build/CMakeCache.txt" | grep -v '^//' | head -15 | indent
fi
log_original=$(first_line 'gevo: .*using the' "$work/build1.log")
if [[ $log_original == *"using the original PTX"* ]]; then
    ok "first build: embeds the original PTX: $log_original"
else
    fail "first build: embeds the original PTX (log: ${log_original:-no 'using the' line})" "$work/build1.log"
fi
if cmp -s "$ir_dir/stencil.ll" "$build/gevo/stencil.ll"; then
    ok "first build: the kernel's IR is the carried one"
else
    fail "first build: the kernel's IR is the carried one ($build/gevo/stencil.ll)"
    find "$build/gevo" -maxdepth 1 -printf '%f %s bytes\n' | indent
fi
original=$build/gevo/stencil.original.ptx
original_hash=$(sha256sum < "$original" | cut -d' ' -f1)
if "$app" --print-ptx > "$work/first.ptx" 2> "$work/first.err" && cmp -s "$work/first.ptx" "$original" &&
    [ "$("$app" --origin)" = original ]; then
    ok "first build: the program carries the original PTX (--origin: original)"
else
    fail "first build: the program carries the original PTX (--origin: $("$app" --origin 2>&1))" "$work/first.err"
fi
"$app" > "$work/run1.out" 2>&1; rc=$?
if [ "$rc" -eq 0 ] && grep -q "against the CPU: ok" "$work/run1.out"; then
    ok "first build: the original runs on the GPU and matches the CPU: $(tail -1 "$work/run1.out")"
else
    fail "first build: the original runs on the GPU and matches the CPU (exit $rc)" "$work/run1.out"
fi

# --- 3. Evolve until a variant is validated.
deadline=$(( $(date +%s) + e2e_time ))
note=$(( $(date +%s) + 30 ))
while :; do
    cl best "$kernel" --arch "$arch" -o "$work/probe.ptx" > /dev/null 2> "$work/best.err"; best_rc=$?
    [ "$best_rc" -eq 0 ] && break
    daemon_alive || break
    [ "$(date +%s)" -ge "$deadline" ] && break
    if [ "$(date +%s)" -ge "$note" ]; then
        echo "    $(since "$t_first")s: $(daemon_state)"
        note=$(( note + 30 ))
    fi
    sleep 1
done
if [ "$best_rc" -eq 0 ]; then
    to_valid="$(since "$t_first") s"
    ok "gevod validated a variant ${to_valid} after the first build: $(sed 's/^gevo-client: //; s/; wrote .*//' "$work/best.err")"
    valid_state=$(daemon_state)
    echo "    $valid_state"
else
    if daemon_alive; then
        fail "gevod validates a variant within ${e2e_time}s (best exit $best_rc: $(tail -1 "$work/best.err"))"
    else
        fail "gevod validates a variant (gevod exited; best exit $best_rc: $(tail -1 "$work/best.err"))"
    fi
    echo "    $(daemon_state)"
    daemon_log 30
    for s in "pause and rebuild" "embedded PTX is best's" "the evolved program runs"; do skip "$s"; done
    finish
fi

# --- 4. Pause (so the answer stays put), rebuild: the variant.
if cl pause "$kernel" > "$work/pause.out" 2>&1 && wait_until 60 not_running; then
    ok "gevo-client pause: the job stopped ($(daemon_state))"
else
    fail "gevo-client pause: the job stops within 60 s ($(daemon_state))" "$work/pause.out"
fi
if timeout 300 cmake --build "$build" > "$work/build2.log" 2>&1; then
    ok "rebuild"
else
    fail "rebuild" "$work/build2.log" 40
fi
log_evolved=$(first_line 'gevo: .*using the' "$work/build2.log")
if [[ $log_evolved == *"using the evolved PTX"*"speedup"* ]]; then
    ok "rebuild: embeds the validated variant: $log_evolved"
else
    fail "rebuild: embeds the validated variant (log: ${log_evolved:-no 'using the' line})" "$work/build2.log"
fi
cl --json best "$kernel" --arch "$arch" > "$work/best.json" 2> "$work/best.err"
read -r best_hash best_summary < <(python3 - "$work/best.json" <<'PY'
import json, sys
try:
    b = json.load(open(sys.argv[1]))
    lo, hi = b["interval"]
    print(b["ptx_hash"], f'speedup {b["speedup"]:.3f}x [{lo:.3f}, {hi:.3f}], {b["backend"]} {b["target"]}, '
          f'{b["job"]} generation {b["generation"]}')
except Exception as e:
    print("-", f"unreadable: {e}")
PY
)
"$app" --print-ptx > "$work/evolved.ptx" 2> "$work/evolved.err"
embedded_hash=$(sha256sum < "$work/evolved.ptx" | cut -d' ' -f1)
hash_line="sha256 \`${embedded_hash:0:16}…\`, best's ptx_hash \`${best_hash:0:16}…\`, the original's \`${original_hash:0:16}…\`"
if [ "$embedded_hash" = "$best_hash" ] && [ "$embedded_hash" != "$original_hash" ]; then
    ok "rebuild: the embedded PTX hashes to best's ptx_hash and is not the original ($best_summary)"
else
    fail "rebuild: the embedded PTX hashes to best's ptx_hash and is not the original ($hash_line)" "$work/best.err"
    [ "$embedded_hash" = "$original_hash" ] && echo "    the embedded PTX is the original"
    grep "gevo: " "$work/build2.log" | indent
fi

# --- 5. The evolved program.
origin_line=$("$app" --origin 2>&1)
if [[ $origin_line == "evolved: $kernel $arch, speedup "* ]]; then
    ok "stencil-app --origin: $origin_line"
else
    fail "stencil-app --origin says evolved (it says: $origin_line)"
fi
"$app" > "$work/run2.out" 2>&1; rc=$?
run_lines=$(cat "$work/run2.out")
if [ "$rc" -eq 0 ] && grep -q "embedded PTX of .*: evolved: " "$work/run2.out" &&
    grep -q "against the CPU: ok" "$work/run2.out"; then
    ok "stencil-app runs the evolved variant on the GPU and matches the CPU: $(tail -1 "$work/run2.out")"
else
    fail "stencil-app runs the evolved variant on the GPU and matches the CPU (exit $rc)" "$work/run2.out"
fi
sanitizer_bin=$(command -v compute-sanitizer || echo "$cuda_root/bin/compute-sanitizer")
if [ -x "$sanitizer_bin" ] && [ "$rc" -eq 0 ]; then
    for tool in memcheck racecheck; do
        timeout 45 "$sanitizer_bin" --tool "$tool" --error-exitcode 99 "$app" > "$work/$tool.out" 2>&1
        src=$?
        case $src in
            0) verdict="$tool clean" ;;
            99) verdict="$tool: $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$work/$tool.out" | sed 's/^=* *//')" ;;
            *) verdict="$tool did not finish (exit $src)" ;;
        esac
        echo "    compute-sanitizer (reported, not counted): $verdict"
        [ "$verdict" = "$tool clean" ] || tail -12 "$work/$tool.out" | indent
        sanitizer="${sanitizer:+$sanitizer, }$verdict"
    done
fi

# --- 6. Stop.
finish
