#!/usr/bin/env bash
# Builds attention_cuda_test and attention_bench of the checkout (or worktree) it is run in and
# packs them with their libraries as one device-call bundle: a scripts/gpu-bundle.sh folder
# tarred as NAME.txz (unpacks to .gpu/), with NAME.commit (the short commit, "-dirty" when the
# tree has uncommitted changes) beside it. Bundles live in a git-ignored .chunks/ folder and go
# to the GPU machine through `carry` (CONTRIBUTING.md).
#
#   bench/attention/make_bundle.sh OUT_DIR NAME [BUILD_DIR]     (BUILD_DIR default build)
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 OUT_DIR NAME [BUILD_DIR]" >&2; exit 2; }
out=$1 name=$2 build=${3:-build}
root=$(git rev-parse --show-toplevel)
cd "$root"
[[ -f $build/CMakeCache.txt ]] ||
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA=ON > /dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --build "$build" -j "$(nproc)" --target attention_cuda_test attention_bench > "$tmp/build.log" 2>&1 ||
  { tail -30 "$tmp/build.log"; exit 1; }
scripts/gpu-bundle.sh "$tmp/.gpu" "$build/bin/attention_cuda_test" "$build/bin/attention_bench"
mkdir -p "$out"
tar -cJf "$out/$name.txz" -C "$tmp" .gpu
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- kernels bench tests || commit="$commit-dirty"
echo "$commit" > "$out/$name.commit"
echo "make_bundle: $out/$name.txz ($(du -h "$out/$name.txz" | cut -f1)), commit $commit"
# A candidate merges only if scripts/test.sh passes; its size check is the one a kernel
# variant trips (v51 took attention_prefill_sm90_ws.cuh past 800 lines, found at merge time).
python3 scripts/check-size.py > /dev/null || echo "make_bundle: WARNING: scripts/check-size.py fails on this tree (it cannot merge as it is)" >&2
