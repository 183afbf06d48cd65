#!/usr/bin/env bash
# Installs what gevo needs to build and test, and only what is missing, on
# Debian 12 or Ubuntu 24.04 (Rust itself is expected to be installed with rustup).
# Safe to run again: it does nothing when everything is present.
set -euo pipefail

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

# g++ and make: the CMake example project (daemon/tests/cmake_example.rs).
packages=(llvm-19-dev clang-19 libpolly-19-dev libzstd-dev libffi-dev zlib1g-dev cmake g++ make)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
# systemd-analyze, for scripts/verify-systemd.sh.
command -v systemd-analyze >/dev/null || missing+=(systemd)

if ((${#missing[@]})); then
    echo "install-deps: installing ${missing[*]}" >&2
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
        sudo_cmd=(sudo)
    fi
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
    echo "install-deps: cargo not found; install Rust with rustup (https://rustup.rs) first" >&2
    exit 1
fi
if command -v rustup >/dev/null; then
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" >/dev/null
    done
fi
