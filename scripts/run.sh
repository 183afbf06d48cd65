#!/usr/bin/env bash
# Installs what is missing, builds gevod, and runs the main job on its
# embedded default: the bundled stencil kernel, mutated with a fixed seed,
# its edits shown, and the variant's PTX emitted for sm_90.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --release -p gevod
gevod=target/release/gevod
out=target/demo
mkdir -p "$out"
"$gevod" mutate tests/fixtures/kernels/stencil.ll --seed 1 --edits 3 -o "$out/stencil.patch.json"
"$gevod" edits tests/fixtures/kernels/stencil.ll --patch "$out/stencil.patch.json"
"$gevod" ptx --patch "$out/stencil.patch.json" -o "$out/stencil.ptx"
echo "run: variant PTX in $out/stencil.ptx ($(grep -c . "$out/stencil.ptx") lines), patch in $out/stencil.patch.json"
