#!/usr/bin/env bash
# Call U's bundles (session 54), rebuilt from the patches: v42 (the checkout's HEAD as
# committed: f98d5be's kernels), v43 (+ session 53's divisors-as-parameter patch) and v47 (v43
# + session 53's v46 patch, which applies unchanged on v43: v44's sleeps, under it when it was
# written, touch the producer's waits, v46 the consumers' loop). Run at the repository root.
#
#   bench/attention/results/session54/bundles.sh [OUT_DIR]     (default .chunks/s54)
p53=bench/attention/results/session53
exec bench/attention/bundles_from_patches.sh "${1:-.chunks/s54}" v42 \
  v43=$p53/v43_divisors_as_parameter.patch \
  v47=$p53/v43_divisors_as_parameter.patch,$p53/v46_causal_one_loop_body_on_v44.patch
