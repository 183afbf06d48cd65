#!/usr/bin/env bash
# Installs what is missing, builds gevod, and runs the main job on its
# embedded default, the CPU simulator: the bundled stencil kernel's tests,
# first as written, then with the patch that drops its redundant barrier
# (a variant GEVO finds), showing both pass and the cost ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --release -p gevod
gevod=target/release/gevod
spec=tests/fixtures/kernels/stencil.gevo.toml
patch=tests/fixtures/kernels/stencil.drop-barrier.patch.json
echo "== stencil, original kernel, on the simulator"
"$gevod" run "$spec"
echo "== stencil with its redundant barrier deleted"
"$gevod" edits tests/fixtures/kernels/stencil.ll --patch "$patch" | head -20
"$gevod" run "$spec" --patch "$patch"
mkdir -p target/demo
"$gevod" ptx --patch "$patch" -o target/demo/stencil.ptx
echo "run: the variant's PTX for sm_90 is in target/demo/stencil.ptx"
