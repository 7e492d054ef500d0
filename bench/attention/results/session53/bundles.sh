#!/usr/bin/env bash
# The bundles of calls R, S and T (session 53's variants), rebuilt from the patches in this
# folder: v42 (the checkout's HEAD as committed: f98d5be's kernels), v43 (+ its patch), v44
# (v43 + its patch), then v45 and v46, each v44 + its own patch. Run at the repository root
# at a commit whose kernels are f98d5be's.
#
#   bench/attention/results/session53/bundles.sh [OUT_DIR]     (default .chunks/s53v)
h=bench/attention/results/session53
v44=$h/v43_divisors_as_parameter.patch,$h/v44_producer_sleeps_on_v43.patch
exec bench/attention/bundles_from_patches.sh "${1:-.chunks/s53v}" v42 \
  v43=$h/v43_divisors_as_parameter.patch v44=$v44 \
  v45=$v44,$h/v45_q_by_tma_on_v44.patch v46=$v44,$h/v46_causal_one_loop_body_on_v44.patch
