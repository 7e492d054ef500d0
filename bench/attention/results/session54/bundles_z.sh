#!/usr/bin/env bash
# Call Z's bundles (session 54), rebuilt from the patches: v42 (the checkout's HEAD as
# committed; its kernels are f98d5be's, its attention_bench has --head-dim), v48 (+
# v48_d64_three_stages.patch), v49 (+ v49_d64_four_stages.patch instead) and v50 (+
# v50_d128_producer_80_registers.patch instead; call Z2) and v51 (+
# v51_rows_aligned_to_the_end.patch instead; call Z3). Run at the
# repository root; writes OUT_DIR/NAME.txz and NAME.commit (make_bundle.sh).
#
#   bench/attention/results/session54/bundles_z.sh [OUT_DIR]     (default .chunks/s54z)
set -eu
out=$(realpath -m "${1:-.chunks/s54z}")
here=$(dirname "$(realpath "$0")")
mkdir -p "$out"
wt=$(mktemp -d /tmp/stack54z.XXXX)
git worktree add -q --detach "$wt" HEAD
trap 'git worktree remove --force "$wt"' EXIT
(cd "$wt" && bench/attention/make_bundle.sh "$out" v42)
for v in v48_d64_three_stages v49_d64_four_stages v50_d128_producer_80_registers \
    v51_rows_aligned_to_the_end; do
  (cd "$wt" && git checkout -q -- kernels && git clean -fdq -- kernels tests &&
    git apply "$here/$v.patch" &&
    bench/attention/make_bundle.sh "$out" "${v%%_*}")
done
ls -la "$out"
