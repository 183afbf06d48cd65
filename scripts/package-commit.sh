#!/usr/bin/env bash
# Packs an earlier commit for a side-by-side measurement on the GPU machine
# (the issues' "in one run against this commit"): its gevod, built in
# release mode from a worktree, stripped and gzipped, with its own scripts/
# and tests/fixtures/, into .dist/commit-REV/ (.dist is what a GPU run
# carries). Its target directory stays under target/commits/ (or
# $COMMITS_TARGET_DIR) for the next commit packed.
#
#   scripts/package-commit.sh REV
#
# On a 2-GPU machine, each side on its own GPU and half the cores, each
# running its own tree's scripts/gpu-scaling.sh on its own fixtures
# (docs/cluster.md, "Against an earlier commit"):
#
#   gunzip -c .dist/gevod.gz > /tmp/gevod && chmod +x /tmp/gevod
#   RUNS="stencil:1 lu:1" scripts/gpu-side-by-side.sh REV /tmp/gevod /tmp/side
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$(git rev-parse --short "${1:?usage: scripts/package-commit.sh REV}^{commit}")
out=.dist/commit-$rev
target=${COMMITS_TARGET_DIR:-$PWD/target/commits}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/src" 2> /dev/null || true; rm -rf "$work"' EXIT
git worktree add --detach --quiet "$work/src" "$rev"
# An earlier commit's code need not pass today's lints: no clippy wrapper.
(cd "$work/src" && env -u RUSTC_WORKSPACE_WRAPPER CARGO_TARGET_DIR="$target" \
    cargo build --release --quiet -p gevod)
rm -rf "$out"
mkdir -p "$out"
strip -o "$out/gevod" "$target/release/gevod"
gzip -9 -f "$out/gevod"
git archive "$rev" scripts tests/fixtures | tar -x -C "$out"
echo "package-commit: $out ($(du -sh "$out" | cut -f1)): gevod.gz, scripts/, tests/fixtures/ of $rev"
