#!/usr/bin/env bash
# Builds gevod in release mode, strips it and gzips it to .dist/gevod.gz, for
# machines without a Rust toolchain (the GPU test machine).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p gevod
mkdir -p .dist
strip -o .dist/gevod target/release/gevod
gzip -9 -f .dist/gevod
ls -l .dist/gevod.gz
