#!/usr/bin/env bash
# Installs gevo: the release binaries and the CMake package.
#
#   scripts/install.sh [--prefix P] [--no-build | --bin-dir DIR]
#
#   <prefix>/bin/gevod, <prefix>/bin/gevo-client
#   <prefix>/lib/cmake/gevo/   gevoConfig.cmake and the rest of cmake/, so that
#                              find_package(gevo) finds it with
#                              CMAKE_PREFIX_PATH=<prefix>, or with no setting
#                              when <prefix> is one CMake searches (/usr/local,
#                              or any prefix whose bin/ is on the PATH)
#
# --prefix P     where to install [default: /usr/local as root, else ~/.local]
# --no-build     install the binaries already built in the cargo target
#                directory ($CARGO_TARGET_DIR, else target/) under release/
# --bin-dir DIR  install gevod and gevo-client from DIR (built elsewhere);
#                implies --no-build
#
# Without --no-build it runs `cargo build --release -p gevod -p gevo-client`
# first (docs/cmake.md, "Installing"). The package directory is replaced
# whole, so files of an older version do not linger. The systemd units are
# not installed here: docs/systemd.md.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

usage() {
    local text
    text=$(sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//')
    if [ "${1:-2}" = 0 ]; then echo "$text"; else echo "$text" >&2; fi
    exit "${1:-2}"
}

if [ "$(id -u)" -eq 0 ]; then prefix=/usr/local; else prefix=$HOME/.local; fi
build=yes
bin_dir=
while [ $# -gt 0 ]; do
    case $1 in
        --prefix) [ $# -ge 2 ] || usage; prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --no-build) build=no; shift ;;
        --bin-dir) [ $# -ge 2 ] || usage; bin_dir=$2; build=no; shift 2 ;;
        --bin-dir=*) bin_dir=${1#--bin-dir=}; build=no; shift ;;
        -h|--help) usage 0 ;;
        *) echo "install.sh: unknown argument: $1" >&2; usage ;;
    esac
done
# Relative paths are the caller's, not the repository's.
case $prefix in
    /*) ;;
    *) prefix=$PWD/$prefix ;;
esac
case $bin_dir in
    /*|'') ;;
    *) bin_dir=$PWD/$bin_dir ;;
esac
cd "$repo"

if [ "$build" = yes ]; then
    echo "install.sh: cargo build --release -p gevod -p gevo-client" >&2
    cargo build --release -p gevod -p gevo-client
fi
if [ -z "$bin_dir" ]; then
    bin_dir=${CARGO_TARGET_DIR:-target}/release
fi
for program in gevod gevo-client; do
    if [ ! -x "$bin_dir/$program" ]; then
        echo "install.sh: $bin_dir/$program is missing: build it (cargo build --release), or name its directory with --bin-dir" >&2
        exit 1
    fi
done

package=$prefix/lib/cmake/gevo
install -d "$prefix/bin" "$prefix/lib/cmake"
install -m755 "$bin_dir/gevod" "$bin_dir/gevo-client" "$prefix/bin/"
rm -rf "$package.new"
install -d "$package.new"
install -m644 cmake/*.cmake cmake/gevo_cuda_shim.h "$package.new/"
cp -R cmake/cuda-compat "$package.new/cuda-compat"
chmod -R a+rX,go-w "$package.new"
rm -rf "$package"
mv "$package.new" "$package"

echo "installed gevod and gevo-client in $prefix/bin"
echo "installed the CMake package in $package (find_package(gevo))"
case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) echo "note: $prefix/bin is not on your PATH: add it, or give cmake -DCMAKE_PREFIX_PATH=$prefix" ;;
esac
