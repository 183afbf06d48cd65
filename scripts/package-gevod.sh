#!/usr/bin/env bash
# Builds gevod and gevo-client in release mode, strips and gzips them to
# .dist/gevod.gz and .dist/gevo-client.gz, for machines without a Rust
# toolchain (the GPU test machine).
#
# Also writes .dist/e2e/stencil.ll, the device IR of examples/stencil-app,
# for the GPU suite's end-to-end section (scripts/gpu-e2e.sh): that machine
# has no clang, so the IR is emitted here by gevo_optimize() itself (the
# example configured and built in a temporary directory with clang-19, no
# daemon, so that build embeds the original PTX), and the build there takes
# it with -DGEVO_IR_DIR=.dist/e2e. .dist/e2e/SOURCES has the SHA-256 of the
# files it came from, which the GPU side compares with its checkout.
#
# With GEVO_CUDA_PATH set (a CUDA toolkit: ptxas, fatbinary, headers,
# cudart), also builds examples/stencil-replace in MODE REPLACE with the
# original PTX into .dist/stencil-replace, for the GPU suite to run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p gevod -p gevo-client
mkdir -p .dist
for bin in gevod gevo-client; do
    strip -o ".dist/$bin" "target/release/$bin"
    gzip -9 -f ".dist/$bin"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
if ! { cmake -S examples/stencil-app -B "$tmp/build" "${generator[@]}" \
           -DGEVOD="$PWD/target/release/gevod" -DGEVO_CLIENT="$tmp/no-gevo-client" &&
       cmake --build "$tmp/build"; } > "$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    echo "package-gevod: building examples/stencil-app for its IR failed (above)" >&2
    exit 1
fi
ll=$tmp/build/gevo/stencil.ll
if ! grep -q 'define .*@stencil5(' "$ll"; then
    echo "package-gevod: $ll has no stencil5 kernel" >&2
    exit 1
fi
mkdir -p .dist/e2e
cp "$ll" .dist/e2e/stencil.ll
sha256sum examples/stencil-app/kernels/stencil.cu examples/stencil-app/CMakeLists.txt \
    cmake/gevo_cuda_shim.h > .dist/e2e/SOURCES
grep -E 'gevo: .*(clang|using the)' "$tmp/log" | sed 's/^/package-gevod: /'

if [ -n "${GEVO_CUDA_PATH:-}" ]; then
    if ! { cmake -S examples/stencil-replace -B "$tmp/replace" "${generator[@]}" \
               -DGEVO_CUDA_PATH="$GEVO_CUDA_PATH" -DGEVO_USE_EVOLVED=OFF -DCMAKE_BUILD_TYPE=Release \
               -DGEVOD="$PWD/target/release/gevod" -DGEVO_CLIENT="$tmp/no-gevo-client" &&
           cmake --build "$tmp/replace"; } > "$tmp/replace.log" 2>&1; then
        cat "$tmp/replace.log" >&2
        echo "package-gevod: building examples/stencil-replace failed (above)" >&2
        exit 1
    fi
    grep -q 'MODE REPLACE is off' "$tmp/replace.log" && {
        grep 'MODE REPLACE is off' "$tmp/replace.log" >&2
        echo "package-gevod: $GEVO_CUDA_PATH does not serve MODE REPLACE" >&2
        exit 1
    }
    cp "$tmp/replace/stencil-replace" .dist/stencil-replace
    ls -l .dist/stencil-replace
fi
ls -l .dist/*.gz .dist/e2e/stencil.ll
