#!/usr/bin/env bash
# (Bundles: results/session53/bundles.sh [.chunks/s53v] rebuilds all five from the patches.)
# Call S (session 53, for session 54, after call R; any Hopper GPU; carry .chunks/s53v; ~350
# s): v45 (whole Q row blocks by TMA, session 52's v40 rebased onto v44) against v44. Bundle:
# v45.txz with results/session53/v43_divisors_as_parameter.patch,
# v44_producer_sleeps_on_v43.patch and v45_q_by_tma_on_v44.patch applied in turn. If call R
# keeps v43 but not v44, v45 is rebased onto v43 first (v44's change is four waits). Prediction
# and rule: NOTES.md v45 (written before the call); rule_v45.py.
#   1. v45's attention_cuda_test;
#   2. 7 alternating rounds of `--prefill --max-keys=512 --dtype both`;
#   3. 2 rounds of the bf16 grid past 512 keys (`--prefill --dtype bf16 --min-keys=513`);
#   4. memcheck + racecheck of v45: the static walk at <= 512 keys, the d64 counter walk and
#      the d128 stream-K walk past 1k keys, 30 s a tool; then rule_v45.py.
bench/attention/stack_call.sh s "${CHUNKS:-.chunks/s53v}" "v44 v45" \
  bench/attention/results/session53/rule_v45.py
