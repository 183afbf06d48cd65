#!/usr/bin/env bash
# Builds the IR of every configuration of a tunable fixture's [tune] table:
# the source's configuration as the spec's top-level `ir`, every other as the
# file its `tune.ir` pattern names, each from the spec's .cu with
# `-D NAME=value` per constant, with the flags of scripts/gen-fixtures.sh
# (clang-19, sm_90, -O3, line tables, gevo_shim.h, no CUDA SDK), compiled
# from the spec's directory so the output names the source file alone.
# Then checks each with llc-19. Running it twice leaves `git diff` empty.
#
#   scripts/tune-fixture-ir.sh [SPEC...]   (default tests/fixtures/tune/*.gevo.toml)
#
# The .cu is the spec's `ir` with .ll replaced by .cu. Needs python3 (3.11's
# tomllib) to read the spec.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export LC_ALL=C

CLANG=${CLANG:-clang-19}
LLC=${LLC:-llc-19}
SHIM=tests/fixtures/kernels/gevo_shim.h

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# An empty --cuda-path: an installed CUDA toolkit must not change the IR.
mkdir -p "$tmp/no-cuda"

specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(tests/fixtures/tune/*.gevo.toml)

for spec in "${specs[@]}"; do
    dir=$(dirname "$spec")
    shim=$(realpath --relative-to="$dir" "$SHIM")
    # One line per configuration: the output path (relative to the spec's
    # directory), then NAME=value per constant.
    python3 - "$spec" > "$tmp/configs" <<'PY'
import itertools, sys, tomllib
spec = tomllib.load(open(sys.argv[1], "rb"))
tune = spec["tune"]
names = [k for k in tune if k not in ("ir", "source", "chosen")]
source = tune["source"]
configs = [dict(zip(names, vs)) for vs in itertools.product(*(tune[n] for n in names))]
if source not in configs:
    configs.insert(0, source)
for c in configs:
    if c == source:
        out = spec["ir"]
    else:
        out = tune["ir"]
        for n, v in c.items():
            out = out.replace("{" + n + "}", str(v))
    print(out, *(f"{n}={v}" for n, v in c.items()))
PY
    src=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["ir"].removesuffix(".ll") + ".cu")' "$spec")
    while read -r out defs; do
        flags=()
        for d in $defs; do flags+=(-D "$d"); done
        echo "tune-fixture-ir: $dir/$src ${defs} -> $dir/$out"
        mkdir -p "$dir/$(dirname "$out")"
        (cd "$dir" &&
            "$CLANG" -x cuda --cuda-device-only -nocudainc -nocudalib \
                --cuda-path="$tmp/no-cuda" --cuda-gpu-arch=sm_90 -O3 -S -emit-llvm \
                -gline-tables-only -fdebug-compilation-dir=. \
                "${flags[@]}" -include "$shim" "$src" -o "$out")
        if ! grep -q '!"kernel", i32 1}' "$dir/$out"; then
            echo "tune-fixture-ir: $dir/$out: no kernel in !nvvm.annotations" >&2
            exit 1
        fi
        "$LLC" -march=nvptx64 -mcpu=sm_90 "$dir/$out" -o /dev/null
    done < "$tmp/configs"
    echo "tune-fixture-ir: $spec: $(wc -l < "$tmp/configs") configurations, llc ok"
done
