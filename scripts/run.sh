#!/usr/bin/env bash
# Installs what is missing, builds gevod, and runs the main job on its
# embedded default, the CPU simulator (the GPU where one is present): GEVO's search on the bundled stencil
# kernel (3,000 evaluations), then the report: the best validated variant,
# its held-out results, its edits before and after minimization, the Pareto
# front, and where its PTX and patch were written. Running it again resumes
# the same job from its checkpoint and shows the report.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what building and running need; the test-only packages (Slurm,
# chromium, the CUDA toolkit, cmake, ...) are scripts/test.sh's.
scripts/install-deps.sh build
cargo build --release -p gevod
gevod=target/release/gevod
spec=tests/fixtures/kernels/stencil.gevo.toml
"$gevod" evolve "$spec" --evaluations 3000 --seed 1 --state target/demo/state --resume
best=$(ls target/demo/state/*/best.min.patch.json 2>/dev/null | head -1 || true)
if [ -n "$best" ]; then
    echo
    echo "== the minimized variant's edits and IR diff"
    "$gevod" edits tests/fixtures/kernels/stencil.ll --patch "$best" | head -40
fi
