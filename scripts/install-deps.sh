#!/usr/bin/env bash
# Installs what gevo needs, and only what is missing, on Debian 12 or Ubuntu
# 24.04 (Rust itself is expected to be installed with rustup). Safe to run
# again: it does nothing when everything is present.
#
#   scripts/install-deps.sh build   what building gevod and gevo-client and
#                                   running them need (scripts/run.sh)
#   scripts/install-deps.sh cmake   that, and what gevo_optimize() needs in a
#                                   CMake project: clang-19, cmake, make and
#                                   the distribution's CUDA toolkit (docs/cmake.md)
#   scripts/install-deps.sh test    build's and cmake's, and what the checks and
#                                   tests need besides (scripts/test.sh, CI); the default
#   ... --list                      print what the purpose installs, install nothing
set -euo pipefail

purpose=test
list=
for arg in "$@"; do
    case $arg in
        build | cmake | test) purpose=$arg ;;
        --list) list=1 ;;
        -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install-deps: unknown argument '$arg' (build, cmake, test, --list)" >&2; exit 2 ;;
    esac
done

# Building and running: LLVM 19 for inkwell (linked statically), its link
# libraries, and g++ for the C++ runtime and cc, rustc's linker.
build_packages=(llvm-19-dev libpolly-19-dev libzstd-dev libffi-dev zlib1g-dev g++)
# A CMake project using gevo_optimize(), and the fixtures and CMake tests
# (daemon/tests/cmake_*.rs): clang-19 for the kernels' IR, cmake and make;
# also the distribution's CUDA toolkit where none is installed (below), for
# MODE REPLACE.
cmake_packages=(clang-19 cmake make)
cmake_extras=(nvidia-cuda-toolkit)
# Testing besides: slurmctld, slurmd, slurm-client and munge for the
# single-node cluster of daemon/tests/slurm.rs (scripts/slurm-cluster.sh);
# python3 for daemon/tests/worker_cpu.rs (scripts/lib/worker_cpu.py, which
# the GPU scripts' tables use too).
test_packages=(slurmctld slurmd slurm-client munge python3)
# Testing also: systemd-analyze (scripts/verify-systemd.sh), a headless
# chromium, rustfmt and clippy (below, each only where missing).
test_extras=(systemd-analyze chromium rustfmt clippy)

packages=("${build_packages[@]}")
extras=()
if [ "$purpose" = cmake ] || [ "$purpose" = test ]; then
    packages+=("${cmake_packages[@]}")
    extras+=("${cmake_extras[@]}")
fi
if [ "$purpose" = test ]; then
    packages+=("${test_packages[@]}")
    extras+=("${test_extras[@]}")
fi
if [ -n "$list" ]; then
    echo "apt: ${packages[*]}"
    if ((${#extras[@]})); then
        echo "also, where missing: ${extras[*]}"
    fi
    exit 0
fi

# Some containers ship /dev/null as a regular file. Whatever one process writes
# there, the next one reads back: cargo's rustc probe takes its stdin from it and
# fails on another build's error text. Put the character device back.
if [ ! -c /dev/null ]; then
    if [ "$(id -u)" -eq 0 ] && mknod -m 666 /dev/.null.gevo.$$ c 1 3 2>/dev/null && mv -f /dev/.null.gevo.$$ /dev/null; then
        echo "install-deps: /dev/null was a regular file; restored the character device" >&2
    else
        echo "install-deps: warning: /dev/null is not a character device and cannot be restored; builds may fail reading it" >&2
    fi
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
# systemd-analyze, for scripts/verify-systemd.sh.
if [ "$purpose" = test ]; then
    command -v systemd-analyze >/dev/null || missing+=(systemd)
fi

sudo_cmd=()
as_root() { # command...: as root, through sudo when needed
    if [ "$(id -u)" -ne 0 ] && [ ${#sudo_cmd[@]} -eq 0 ]; then
        command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install $want" >&2; return 1; }
        sudo_cmd=(sudo)
    fi
    "${sudo_cmd[@]}" "$@"
}
apt_get() { as_root env DEBIAN_FRONTEND=noninteractive apt-get -qq "$@"; }

if ((${#missing[@]})); then
    want="${missing[*]}"
    echo "install-deps: installing $want" >&2
    apt_get update
    apt_get install -y --no-install-recommends "${missing[@]}" >/dev/null
    updated=1
fi

# The distribution's CUDA toolkit (nvidia-cuda-toolkit: ptxas, fatbinary,
# cuobjdump, headers, cudart, libdevice; no GPU or driver needed), with which
# a CMake project's MODE REPLACE builds (and the CMake tests build it for
# real): the cmake and test purposes. Skipped where a toolkit is
# installed already (NVIDIA's /usr/local/cuda, a ptxas on the PATH) and with
# GEVO_NO_CUDA_TOOLKIT=1. It is in Debian's non-free component (its driver
# library needs contrib) and Ubuntu's multiverse (the driver library is in
# restricted), which are enabled for this release's apt sources when the
# package cannot be installed otherwise. Failing here is a warning: those
# tests then skip.
cuda_package=nvidia-cuda-toolkit
installable() { apt-get install -s -qq --no-install-recommends "$1" >/dev/null 2>&1; }

# Adds the components $@ to every apt source of this release (a suite that
# starts with its codename), in deb822 *.sources files and one-line *.list
# files alike. Fails when there was nothing to add them to.
enable_components() {
    local codename f tmp changed=1
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || return 1
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        tmp=$(mktemp)
        if awk -v codename="$codename" -v want="$*" -v deb822="$([[ $f == *.sources ]] && echo 1)" '
            function add(line,    n, words, have, w, i, j, out) {
                n = split(want, words, " ")
                split(line, have, /[ \t]+/)
                out = line
                for (i = 1; i <= n; i++) {
                    w = 0
                    for (j in have) if (have[j] == words[i]) w = 1
                    if (!w) { out = out " " words[i]; changed = 1 }
                }
                return out
            }
            function flush(    i) {
                for (i = 1; i <= nlines; i++) print (ours && i == comp) ? add(lines[i]) : lines[i]
                nlines = 0; ours = 0; comp = 0
            }
            deb822 {
                if ($0 ~ /^[ \t]*$/) { flush(); print; next }
                lines[++nlines] = $0
                if ($1 == "Suites:") for (i = 2; i <= NF; i++) if (index($i, codename) == 1) ours = 1
                if ($1 == "Components:") comp = nlines
                next
            }
            /^[ \t]*deb(-src)?[ \t]/ {
                s = 3
                if ($2 ~ /^\[/) { s = 2; while (s <= NF && $s !~ /\]$/) s++; s += 2 }
                if (index($s, codename) == 1) { print add($0); next }
            }
            { print }
            END { if (deb822) flush(); exit !changed }
        ' "$f" > "$tmp"; then
            as_root cp "$tmp" "$f" && changed=0
        fi
        rm -f "$tmp"
    done
    return $changed
}

if [ "$purpose" != build ] && [ -z "${GEVO_NO_CUDA_TOOLKIT:-}" ] && [ ! -x /usr/local/cuda/bin/ptxas ] && ! command -v ptxas >/dev/null &&
    ! dpkg-query -W -f='${Status}' "$cuda_package" 2>/dev/null | grep -q "install ok installed"; then
    want=$cuda_package
    case "$(. /etc/os-release && echo "${ID:-}")" in
        debian) components=(contrib non-free non-free-firmware) ;;
        ubuntu) components=(restricted multiverse) ;;
        *) components=() ;;
    esac
    if ! installable "$cuda_package" && [ -z "${updated:-}" ]; then
        apt_get update || true
    fi
    if ! installable "$cuda_package" && ((${#components[@]})) && enable_components "${components[@]}"; then
        echo "install-deps: enabled the apt components ${components[*]} (for $cuda_package)" >&2
        apt_get update || true
    fi
    if ! installable "$cuda_package"; then
        echo "install-deps: warning: $cuda_package cannot be installed from apt; without a CUDA toolkit MODE REPLACE is off (MODE AUTO builds EMBED) and its CMake tests skip" >&2
    else
        echo "install-deps: installing $cuda_package" >&2
        # Quiet unless it fails (debconf chatters on stderr).
        if ! said=$(apt_get install -y --no-install-recommends "$cuda_package" 2>&1); then
            echo "$said" >&2
            echo "install-deps: warning: installing $cuda_package failed; without a CUDA toolkit MODE REPLACE is off (MODE AUTO builds EMBED) and its CMake tests skip" >&2
        fi
    fi
fi

# A headless browser for the HTML report's test (daemon/tests/report_browser.rs):
# Debian's chromium, with a font so the screenshot has readable text. On
# Ubuntu (24.04) the chromium package only installs a snap, which does not
# run in containers or CI: nothing is installed there, and the test skips
# with its reason unless chromium or google-chrome is on the PATH or
# GEVO_CHROMIUM names a browser. GEVO_NO_CHROMIUM=1 skips this step.
if [ "$purpose" = test ] && [ -z "${GEVO_NO_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
    case "$(. /etc/os-release && echo "${ID:-}")" in
        debian)
            want="chromium fonts-dejavu-core"
            echo "install-deps: installing $want" >&2
            [ -n "${updated:-}" ] || apt_get update || true
            if ! said=$(apt_get install -y --no-install-recommends chromium fonts-dejavu-core 2>&1); then
                echo "$said" >&2
                echo "install-deps: warning: installing chromium failed; the browser test of the HTML report will skip" >&2
            fi
            ;;
        *)
            echo "install-deps: not installing chromium here (on Ubuntu it is a snap); the browser test of the HTML report skips unless GEVO_CHROMIUM names a browser" >&2
            ;;
    esac
fi

if ! command -v cargo >/dev/null; then
    echo "install-deps: cargo not found; install Rust with rustup (https://rustup.rs) first" >&2
    exit 1
fi
if [ "$purpose" = test ] && command -v rustup >/dev/null; then
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" >/dev/null
    done
fi
