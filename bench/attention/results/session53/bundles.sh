#!/usr/bin/env bash
# The bundles of calls R, S and T (session 53's variants), rebuilt from the patches in this
# folder: v42 (the checkout's HEAD as committed: f98d5be's kernels), v43 (+ its patch), v44
# (v43 + its patch), then v45 and v46, each v44 + its own patch. Run at the repository root;
# writes OUT_DIR/NAME.txz and NAME.commit (make_bundle.sh). A few minutes each from scratch.
#
#   bench/attention/results/session53/bundles.sh [OUT_DIR]     (default .chunks/s53v)
set -eu
out=$(realpath -m "${1:-.chunks/s53v}")
here=$(dirname "$(realpath "$0")")
mkdir -p "$out"
wt=$(mktemp -d /tmp/stack53.XXXX)
git worktree add -q --detach "$wt" HEAD
trap 'git worktree remove --force "$wt"' EXIT
(cd "$wt" && bench/attention/make_bundle.sh "$out" v42)
(cd "$wt" && git apply "$here/v43_divisors_as_parameter.patch" && bench/attention/make_bundle.sh "$out" v43)
(cd "$wt" && git apply "$here/v44_producer_sleeps_on_v43.patch" && bench/attention/make_bundle.sh "$out" v44)
(cd "$wt" && git add -A kernels &&
  git -c user.name=bundles -c user.email=bundles@localhost commit -qm "v44 (bundles.sh)")
for v in v45_q_by_tma_on_v44 v46_causal_one_loop_body_on_v44; do
  (cd "$wt" && git reset -q --hard HEAD && git apply "$here/$v.patch" &&
    bench/attention/make_bundle.sh "$out" "${v%%_*}")
done
ls -la "$out"
