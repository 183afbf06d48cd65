#!/usr/bin/env bash
# Times this machine's ptxas on the modules the ptxas_batches bench wrote
# (PTX_OUT=DIR cargo bench -p gevod --bench ptxas_batches --profile dev): per
# fixture, a module with no code (the fixed cost of a run), each variant
# alone, and each batch of variants in one run, for the guarded and the
# ordinary builds. For the GPU host, which has ptxas but no Rust.
#
#   scripts/ptxas-cost.sh DIR [ARCH]     ARCH: sm_90 unless given
#   FIXTURES="stencil lu" ...             those fixtures, in that order
#
# Prints a Markdown table: CPU ms (user and system, ptxas's) a run for the
# empty module (the mean of 5 runs), and a variant for the rest; where cuobjdump is found, also
# how many ordinary kernels have in the batch the machine code they have
# alone.
set -euo pipefail

dir=${1:?usage: scripts/ptxas-cost.sh DIR [ARCH]}
arch=${2:-sm_90}
ptxas=${PTXAS:-ptxas}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# CPU seconds ptxas took on each file given (one run each).
cpu_of() {
    local TIMEFORMAT='%U %S' times
    times=$({ time (for f in "$@"; do "$ptxas" -arch="$arch" "$f" -o "$work/out.cubin"; done); } 2>&1 >/dev/null)
    awk '{ printf "%.4f", $1 + $2 }' <<<"${times##*$'\n'}"
}

# Each function's machine code in a cubin, one file per function under $2,
# with the batch's suffixes taken out.
functions_of() {
    mkdir -p "$2"
    cuobjdump -sass "$1" | sed -E 's/__gevo_b[0-9]+//g; s/[[:space:]]+$//' |
        grep -v -E '^\.*$' | awk -v out="$2" -v suffix="$3" '
            /Function : / { name = $3; file = out "/" name suffix; next }
            file != "" { print > file }'
}

# Ordinary kernels whose batched machine code is their own: "same of all".
same_code() {
    local batch_dir=$1 same=0 all=0 n f
    command -v cuobjdump >/dev/null || { echo "-"; return; }
    "$ptxas" -arch="$arch" "$batch_dir/batch.ptx" -o "$work/batch.cubin"
    rm -rf "$work/sass" && mkdir -p "$work/sass"
    for f in "$batch_dir"/variant-*.ptx; do
        n=${f##*/variant-}; n=${n%.ptx}
        "$ptxas" -arch="$arch" "$f" -o "$work/alone.cubin"
        functions_of "$work/alone.cubin" "$work/sass/alone-$n" ""
    done
    # The batch's copies, by the index their names carried.
    cuobjdump -sass "$work/batch.cubin" | sed -E 's/[[:space:]]+$//' | grep -v -E '^\.*$' |
        awk -v out="$work/sass" '
            /Function : / { name = $3; n = name; sub(/.*__gevo_b/, "", n); sub(/__gevo_b[0-9]+$/, "", name)
                            system("mkdir -p " out "/batch-" n); file = out "/batch-" n "/" name; next }
            file != "" { gsub(/__gevo_b[0-9]+/, ""); print > file }'
    for f in "$work"/sass/alone-*/*; do
        n=${f%/*}; n=${n##*/alone-}
        all=$((all + 1))
        if cmp -s "$f" "$work/sass/batch-$n/${f##*/}"; then same=$((same + 1)); fi
    done
    echo "$same of $all"
}

echo "ptxas: $("$ptxas" --version | tail -n 1); arch $arch"
echo
echo "| fixture | variants | fixed, ms a run | guarded: alone | batched | alone / batched | ordinary: alone | batched | alone / batched | same code |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for fixture in ${FIXTURES:-$(ls "$dir")}; do
    fixture_dir="$dir/$fixture"
    empty="$fixture_dir/empty.ptx"
    fixed=$(awk -v t="$(cpu_of "$empty" "$empty" "$empty" "$empty" "$empty")" 'BEGIN { print t / 5 }')
    declare -A alone=() together=()
    variants=0
    same_total=0 all_total=0
    for build in guarded ordinary; do
        alone[$build]=0 together[$build]=0
        for batch_dir in "$fixture_dir/$build"/*/; do
            mapfile -t files < <(ls "$batch_dir"/variant-*.ptx)
            alone[$build]=$(awk -v a="${alone[$build]}" -v b="$(cpu_of "${files[@]}")" 'BEGIN { print a + b }')
            together[$build]=$(awk -v a="${together[$build]}" -v b="$(cpu_of "$batch_dir/batch.ptx")" 'BEGIN { print a + b }')
            if [ "$build" = guarded ]; then
                variants=$((variants + ${#files[@]}))
            else
                read -r same _ all < <(same_code "$batch_dir")
                if [ "$same" != "-" ]; then
                    same_total=$((same_total + same)) all_total=$((all_total + all))
                fi
            fi
        done
    done
    awk -v f="$fixture" -v n="$variants" -v fixed="$fixed" -v ga="${alone[guarded]}" -v gb="${together[guarded]}" \
        -v oa="${alone[ordinary]}" -v ob="${together[ordinary]}" -v same="$same_total of $all_total" 'BEGIN {
        printf "| %s | %d | %.1f | %.1f | %.1f | **%.2fx** | %.1f | %.1f | **%.2fx** | %s |\n",
            f, n, 1e3 * fixed, 1e3 * ga / n, 1e3 * gb / n, ga / gb, 1e3 * oa / n, 1e3 * ob / n, oa / ob, same }'
done
