#!/usr/bin/env bash
# Times assembling in process (the CUDA toolkit's nvJitLink library, no
# process a module) against a ptxas process a module, on the modules the
# ptxas_batches bench wrote (PTX_OUT=DIR cargo bench -p gevod --bench
# ptxas_batches --profile dev): per fixture, its variants' guarded builds
# (what the GPU checks) and ordinary builds (what is timed), one module a
# run, and whether the machine code is the same (`cuobjdump -sass`, the
# instructions of every function). For the GPU host, which has the toolkit
# and a C compiler but no Rust (docs/evolve.md, "Why a ptxas process").
#
#   scripts/ptxas-in-process.sh DIR [ARCH]      ARCH: sm_90 unless given
#   FIXTURES="stencil lu" ...                    those fixtures, in that order
#
# Prints a Markdown table: CPU ms (user and system) a module, ptxas's and
# nvJitLink's (after its first module, which pays the library's start), their
# ratio, and how many modules' machine code is the same both ways.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:?usage: scripts/ptxas-in-process.sh DIR [ARCH]}
arch=${2:-sm_90}
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cc=$(command -v gcc || command -v cc) || { echo "ptxas-in-process: no C compiler" >&2; exit 1; }
"$cc" -O2 -o "$work/nvjitlink_cost" scripts/lib/nvjitlink_cost.c -I"$cuda/include" -L"$cuda/lib64" \
    -lnvJitLink -Wl,-rpath,"$cuda/lib64"

# The instructions of every function in cubin $1, without the file's headers.
instructions() {
    cuobjdump -sass "$1" | grep -E '^\s+/\*[0-9a-f]{4}\*/' || true
}

echo "ptxas: $(ptxas --version | tail -n 1); arch $arch"
echo
echo "| fixture | build | modules | ptxas, ms a module | nvJitLink, ms a module | ptxas / nvJitLink | same machine code |"
echo "|---|---|---|---|---|---|---|"
for fixture in ${FIXTURES:-$(ls "$dir")}; do
    for build in guarded ordinary; do
        mapfile -t files < <(ls "$dir/$fixture/$build"/*/variant-*.ptx)
        n=${#files[@]}
        mkdir -p "$work/ptxas" "$work/in-process"
        TIMEFORMAT='%U %S'
        times=$({ time (for k in "${!files[@]}"; do
            ptxas -arch="$arch" "${files[$k]}" -o "$work/ptxas/$k.cubin"
        done); } 2>&1)
        ptxas_ms=$(awk -v n="$n" '{ printf "%.1f", ($1 + $2) / n * 1000 }' <<<"${times##*$'\n'}")
        # The first module twice: once to pay the library's start.
        read -r in_process_ms _ _ < <("$work/nvjitlink_cost" "$work/in-process" "$arch" "${files[0]}" "${files[@]}")
        same=0
        for k in "${!files[@]}"; do
            if [ "$(instructions "$work/ptxas/$k.cubin")" = "$(instructions "$work/in-process/$((k + 1)).cubin")" ]; then
                same=$((same + 1))
            fi
        done
        ratio=$(awk -v a="$ptxas_ms" -v b="$in_process_ms" 'BEGIN { printf "%.2fx", a / b }')
        echo "| $fixture | $build | $n | $ptxas_ms | $in_process_ms | $ratio | $same of $n |"
        rm -rf "$work/ptxas" "$work/in-process"
    done
done
