#!/usr/bin/env bash
# The bundles of calls O and P (session 52's stack), rebuilt from the patches in this folder:
# head (the checkout's HEAD as committed), then v38, v39, v40, v41, each the one before with
# its patch applied, built in one worktree in turn. Run at the repository root, at the commit
# the patches were written on (a record of session 52: its patches predate v42); writes
# OUT_DIR/NAME.txz and NAME.commit (make_bundle.sh). A few minutes each from scratch.
#
#   bench/attention/results/session52/bundles.sh [OUT_DIR]     (default .chunks/s52)
set -eu
out=$(realpath -m "${1:-.chunks/s52}")
here=$(dirname "$(realpath "$0")")
mkdir -p "$out"
wt=$(mktemp -d /tmp/stack52.XXXX)
git worktree add -q --detach "$wt" HEAD
trap 'git worktree remove --force "$wt"' EXIT
(cd "$wt" && bench/attention/make_bundle.sh "$out" head)
for v in v38_one_loop_body v39_stmatrix_epilogue v40_q_by_tma v41_producer_sleeps; do
  (cd "$wt" && git apply "$here/$v.patch" && bench/attention/make_bundle.sh "$out" "${v%%_*}")
done
ls -la "$out"
