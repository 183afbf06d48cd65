#!/usr/bin/env bash
# Regenerate the committed LLVM IR fixtures from the CUDA sources in
# tests/fixtures/kernels/, then check that every module compiles to PTX.
#
# Needs clang-19 and llc-19/llvm-link-19 (LLVM 19), no CUDA SDK: the sources
# are compiled with -nocudainc -nocudalib against tests/fixtures/kernels/gevo_shim.h,
# and calls to libdevice (__nv_expf) are resolved for the self-check with
# tests/fixtures/libdevice-stub.ll.
#
# Every module is compiled with line tables (-gline-tables-only), so edits
# and verdicts name their CUDA source line. Each source is compiled from its
# own directory with a relative compilation directory: the output (ModuleID,
# source_filename, the line tables' file names) names the file alone and does
# not depend on where the repository is checked out. Instruction ids are the
# same as without line tables (debug locations add no instructions).
# Running the script twice leaves `git diff` empty.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export LC_ALL=C

CLANG=${CLANG:-clang-19}
LLC=${LLC:-llc-19}
LLVM_LINK=${LLVM_LINK:-llvm-link-19}

KDIR=tests/fixtures/kernels
SHIM=$KDIR/gevo_shim.h
STUB=tests/fixtures/libdevice-stub.ll

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

shopt -s nullglob
# tests/fixtures/findings/ holds kernels with planted faults whose verdicts
# name the CUDA source line.
FDIR=tests/fixtures/findings
findings=("$FDIR"/*.cu)
# tests/fixtures/pipelines/: modules of several kernels that a spec's
# [[launches]] run as a pipeline.
PDIR=tests/fixtures/pipelines
pipelines=("$PDIR"/*.cu)
# tests/fixtures/spec_init/: kernels with awkward parameter lists (comments,
# macros, directives), and stepper.cu, whose host code launches its kernel in
# a loop, for `gevod spec init`.
SIDIR=tests/fixtures/spec_init
spec_init=("$SIDIR"/*.cu)
# tests/fixtures/general/: kernels whose planted variants pass the user's
# tests and fail gevo's generated held-out tests (docs/evolve.md).
GDIR=tests/fixtures/general
general=("$GDIR"/*.cu)
srcs=("$KDIR"/*.cu "${findings[@]}" "${pipelines[@]}" "${spec_init[@]}" "${general[@]}")
# An empty --cuda-path: an installed CUDA toolkit must not change the IR
# (clang would raise the PTX version in "target-features" to its own).
mkdir -p "$tmp/no-cuda"
if [ ${#srcs[@]} -eq 0 ]; then
    echo "gen-fixtures: no .cu files in $KDIR" >&2
    exit 1
fi

for src in "${srcs[@]}"; do
    out=${src%.cu}.ll
    echo "gen-fixtures: $src -> $out"
    shim=$(realpath --relative-to="$(dirname "$src")" "$SHIM")
    (cd "$(dirname "$src")" &&
        "$CLANG" -x cuda --cuda-device-only -nocudainc -nocudalib \
            --cuda-path="$tmp/no-cuda" --cuda-gpu-arch=sm_90 -O3 -S -emit-llvm \
            -gline-tables-only -fdebug-compilation-dir=. \
            -include "$shim" "$(basename "$src")" -o "$(basename "$out")")
done

# Self-check: every module must compile for sm_90; modules that call
# libdevice are linked with the stub first.
for src in "${srcs[@]}"; do
    ll=${src%.cu}.ll
    if ! grep -q '!"kernel", i32 1}' "$ll"; then
        echo "gen-fixtures: $ll: no kernel in !nvvm.annotations" >&2
        exit 1
    fi
    if grep -q '@__nv_' "$ll"; then
        linked=$tmp/$(basename "${ll%.ll}").linked.ll
        "$LLVM_LINK" -S "$ll" "$STUB" -o "$linked"
        "$LLC" -march=nvptx64 -mcpu=sm_90 "$linked" -o /dev/null
        echo "gen-fixtures: llc ok: $ll (+ $STUB)"
    else
        "$LLC" -march=nvptx64 -mcpu=sm_90 "$ll" -o /dev/null
        echo "gen-fixtures: llc ok: $ll"
    fi
done

# tests/fixtures/transplant/ holds changed versions of the kernel fixtures
# (<kernel>.<change>.cu) for carrying patches from one version to the next;
# each kernel's unchanged source is compiled there too, as <kernel>.base.ll.
# All with line tables, so matching can use debug locations.
TDIR=tests/fixtures/transplant
changed=("$TDIR"/*.cu)
bases=()
for src in "${changed[@]}"; do
    name=$(basename "$src"); name=${name%%.*}
    case " ${bases[*]} " in *" $name "*) ;; *) bases+=("$name") ;; esac
done
transplant_out=()
compile_lines() {
    "$CLANG" -x cuda --cuda-device-only -nocudainc -nocudalib \
        --cuda-path="$tmp/no-cuda" --cuda-gpu-arch=sm_90 -O3 -S -emit-llvm \
        -gline-tables-only -fdebug-compilation-dir=. \
        -include "$SHIM" "$1" -o "$2"
    transplant_out+=("$2")
}
for name in "${bases[@]}"; do
    echo "gen-fixtures: $KDIR/$name.cu -> $TDIR/$name.base.ll"
    compile_lines "$KDIR/$name.cu" "$TDIR/$name.base.ll"
done
for src in "${changed[@]}"; do
    echo "gen-fixtures: $src -> ${src%.cu}.ll"
    compile_lines "$src" "${src%.cu}.ll"
done
for ll in "${transplant_out[@]}"; do
    if grep -q '@__nv_' "$ll"; then
        linked=$tmp/$(basename "${ll%.ll}").linked.ll
        "$LLVM_LINK" -S "$ll" "$STUB" -o "$linked"
        "$LLC" -march=nvptx64 -mcpu=sm_90 "$linked" -o /dev/null
    else
        "$LLC" -march=nvptx64 -mcpu=sm_90 "$ll" -o /dev/null
    fi
    echo "gen-fixtures: llc ok: $ll"
done
