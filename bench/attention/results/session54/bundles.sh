#!/usr/bin/env bash
# Call U's bundles (session 54), rebuilt from the patches: v42 (the checkout's HEAD as
# committed: f98d5be's kernels), v43 (+ session 53's divisors-as-parameter patch) and v47 (v43
# + session 53's v46 patch, which applies unchanged on v43: v44's sleeps, under it when it was
# written, touch the producer's waits, v46 the consumers' loop). Run at the repository root;
# writes OUT_DIR/NAME.txz and NAME.commit (make_bundle.sh). A few minutes each from scratch.
#
#   bench/attention/results/session54/bundles.sh [OUT_DIR]     (default .chunks/s54)
set -eu
out=$(realpath -m "${1:-.chunks/s54}")
p53=$(dirname "$(realpath "$0")")/../session53
mkdir -p "$out"
wt=$(mktemp -d /tmp/stack54.XXXX)
git worktree add -q --detach "$wt" HEAD
trap 'git worktree remove --force "$wt"' EXIT
(cd "$wt" && bench/attention/make_bundle.sh "$out" v42)
(cd "$wt" && git apply "$p53/v43_divisors_as_parameter.patch" && bench/attention/make_bundle.sh "$out" v43)
(cd "$wt" && git apply "$p53/v46_causal_one_loop_body_on_v44.patch" && bench/attention/make_bundle.sh "$out" v47)
ls -la "$out"
