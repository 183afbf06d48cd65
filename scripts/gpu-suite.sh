#!/usr/bin/env bash
# The GPU test machine's suite. That machine has CUDA (ptxas, libdevice, the
# driver) but no Rust and no clang, so it runs a prebuilt gevod:
#
#   here:   scripts/package-gevod.sh           (writes .dist/gevod.gz)
#   there:  scripts/gpu-suite.sh [.dist/gevod.gz]
#
# Checks, each counted: every fixture's PTX (libdevice linked from the CUDA
# install) is accepted by ptxas for sm_90; for every fixture, SEEDS mutated
# variants emit PTX that ptxas accepts; vecadd's PTX loads and runs on the GPU
# and gives the right sums. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

package=${1:-.dist/gevod.gz}
seeds=${SEEDS:-40}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gevod=$work/gevod
gunzip -c "$package" > "$gevod" && chmod +x "$gevod" || { echo "gpu-suite: cannot unpack $package" >&2; exit 1; }

passed=0 failed=0
check() { # name, command...
    local name=$1; shift
    if "$@" > "$work/log" 2>&1; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); echo "FAIL $name"; tail -5 "$work/log"
    fi
}

echo "gpu-suite: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); $(ptxas --version | tail -1)"
check "no libLLVM in gevod" bash -c "! ldd '$gevod' | grep -qi libllvm"

fixtures=(vecadd reduce stencil nw loops expf)
for f in "${fixtures[@]}"; do
    ll=tests/fixtures/kernels/$f.ll
    check "$f: original PTX assembles" bash -c "'$gevod' ptx $ll -o $work/$f.ptx && ptxas -arch=sm_90 $work/$f.ptx -o $work/$f.cubin"
    ok=0
    for seed in $(seq 1 "$seeds"); do
        edits=$(( seed % 10 + 1 ))
        if "$gevod" mutate "$ll" --seed "$seed" --edits "$edits" -o "$work/p.json" 2> "$work/err" &&
           "$gevod" ptx "$ll" --patch "$work/p.json" -o "$work/v.ptx" 2>> "$work/err" &&
           ptxas -arch=sm_90 "$work/v.ptx" -o "$work/v.cubin" 2>> "$work/err"; then
            ok=$((ok + 1))
        else
            echo "  $f seed $seed:"; tail -3 "$work/err"
        fi
    done
    echo "gpu-suite: $f: $ok/$seeds mutated variants assembled by ptxas"
    check "$f: all mutated variants assemble" test "$ok" -eq "$seeds"
done

check "vecadd PTX runs on the GPU" python3 - "$work/vecadd.ptx" <<'PY'
import sys, numpy as np, cupy as cp
mod = cp.RawModule(path=sys.argv[1])
k = mod.get_function("vecadd")
n = 1 << 20
a = cp.random.rand(n, dtype=cp.float32); b = cp.random.rand(n, dtype=cp.float32)
c = cp.zeros(n, dtype=cp.float32)
k(((n + 255) // 256,), (256,), (a, b, c, np.int32(n)))
cp.cuda.runtime.deviceSynchronize()
assert cp.array_equal(c, a + b), "wrong sums"
print("vecadd ok")
PY

echo "gpu-suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
