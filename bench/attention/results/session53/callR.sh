#!/usr/bin/env bash
# (Bundles: results/session53/bundles.sh [.chunks/s53v] rebuilds all five from the patches.)
# Call R (session 53, for session 54; any Hopper GPU; carry .chunks/s53v; ~550 s, timeout_s
# 600): v43 (the walk's divisors made by the launcher, a kernel parameter) against v42 (the
# head, f98d5be's kernels), and v44 (+ the producer's buffer waits with a suspend-time hint,
# session 52's v41 rebased onto v43) against v43. Bundles (.chunks/s53v): v42.txz is
# f98d5be's (`bench/attention/make_bundle.sh .chunks/s53v v42` at the head); v43.txz with
# results/session53/v43_divisors_as_parameter.patch applied; v44.txz with that and
# v44_producer_sleeps_on_v43.patch. Predictions and rules: NOTES.md v43, v44 (written before
# the call); rule_v43.py, rule_v44.py.
#   1. v43's and v44's attention_cuda_test;
#   2. 7 alternating rounds of `--prefill --max-keys=512 --dtype both`;
#   3. 3 rounds of the bf16 grid past 512 keys `--prefill --dtype bf16 --min-keys=513` (to
#      16,384 keys: the d128 full 8k row, stream-K's, is v43's point);
#   4. memcheck + racecheck of v44 (both changes): the static walk at <= 512 keys, the d64
#      counter walk and the d128 stream-K walk past 1k keys, 30 s a tool; then the rules.
LONG_ROUNDS=3 bench/attention/stack_call.sh r "${CHUNKS:-.chunks/s53v}" "v42 v43 v44" \
  bench/attention/results/session53/rule_v43.py bench/attention/results/session53/rule_v44.py
