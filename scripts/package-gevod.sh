#!/usr/bin/env bash
# Builds gevod and gevo-client in release mode, strips and gzips them to
# .dist/gevod.gz and .dist/gevo-client.gz, for machines without a Rust
# toolchain (the GPU test machine).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p gevod -p gevo-client
mkdir -p .dist
for bin in gevod gevo-client; do
    strip -o ".dist/$bin" "target/release/$bin"
    gzip -9 -f ".dist/$bin"
done
ls -l .dist/*.gz
