#!/usr/bin/env bash
# Times this machine's ptxas at each optimization level on the modules the
# ptxas_batches bench wrote (PTX_OUT=DIR cargo bench -p gevod --bench
# ptxas_batches --profile dev): per fixture, each variant's guarded build
# (what the GPU checks; compile workers assemble it at ptxas's quickest
# level, `Assembler::for_checks`) and ordinary build (what is timed, at
# ptxas's default) alone, one run each. For the GPU host, which has ptxas but
# no Rust (docs/evolve.md, "Guarded builds assembled for speed").
#
#   scripts/ptxas-levels.sh DIR [ARCH]          ARCH: sm_90 unless given
#   FIXTURES="stencil lu" ...                    those fixtures, in that order
#   LEVELS="default -O0 --Ofast-compile=max" ... those levels ("default": no flag;
#                                                a comma joins flags: "-O0,-maxrregcount=64")
#
# Prints a Markdown table: CPU ms (user and system, ptxas's) a variant at
# each level, its ratio to the default level's, and the most registers a
# function uses at that level (`ptxas -v`), per fixture and build. A level
# this ptxas does not know prints "-".
set -euo pipefail

dir=${1:?usage: scripts/ptxas-levels.sh DIR [ARCH]}
arch=${2:-sm_90}
ptxas=${PTXAS:-ptxas}
levels=${LEVELS:-default -O0 -O1 --Ofast-compile=min --Ofast-compile=mid --Ofast-compile=max}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "CPU-seconds most-registers" of ptxas at level $1 on each file after it,
# one run each; "-" where a run fails.
cost_of() {
    local level=$1 TIMEFORMAT='%U %S' times flag=() f
    shift
    [ "$level" = default ] || IFS=, read -r -a flag <<<"$level"
    : > "$work/log"
    if ! times=$({ time (for f in "$@"; do
        "$ptxas" "${flag[@]}" -v -arch="$arch" "$f" -o "$work/out.cubin" 2>> "$work/log" || exit 1
    done); } 2>&1 >/dev/null); then
        echo "-"
        return
    fi
    local registers
    registers=$(grep -o 'Used [0-9]* registers' "$work/log" | awk '$2 > most { most = $2 } END { print most + 0 }')
    awk -v r="$registers" '{ printf "%.4f %d", $1 + $2, r }' <<<"${times##*$'\n'}"
}

echo "ptxas: $("$ptxas" --version | tail -n 1); arch $arch"
echo
header="| fixture | build | variants |"
rule="|---|---|---|"
for level in $levels; do
    header="$header $level: ms a variant | registers |"
    rule="$rule---|---|"
done
echo "$header"
echo "$rule"
for fixture in ${FIXTURES:-$(ls "$dir")}; do
    for build in guarded ordinary; do
        mapfile -t files < <(ls "$dir/$fixture/$build"/*/variant-*.ptx)
        n=${#files[@]}
        row="| $fixture | $build | $n |"
        base=
        for level in $levels; do
            read -r cpu registers <<<"$(cost_of "$level" "${files[@]}")"
            if [ "$cpu" = "-" ]; then
                row="$row - | - |"
                continue
            fi
            ms=$(awk -v c="$cpu" -v n="$n" 'BEGIN { printf "%.1f", 1000 * c / n }')
            [ -n "$base" ] || base=$ms
            ratio=$(awk -v m="$ms" -v b="$base" 'BEGIN { printf "%.2f", m / b }')
            row="$row $ms (${ratio}x) | $registers |"
        done
        echo "$row"
    done
done
