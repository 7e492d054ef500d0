#!/usr/bin/env bash
# (Bundles: results/session54/bundles_z.sh [.chunks/s54z] rebuilds v42 and v51 with the rest.)
# Call Z3 (session 54, for session 55; any Hopper GPU; carry .chunks/s54z; ~420 s): v51 (row
# blocks aligned to the sequence's end) against v42 (the head's kernels), every row.
# Prediction and rule: NOTES.md v51 (written before the call); rule_v51.py.
#   1. v51's attention_cuda_test (varlen, chunked, split, window, every walk: the geometry is
#      every Hopper kernel's);
#   2. 11 alternating rounds of `--prefill --max-keys=512 --dtype both`;
#   3. 2 rounds of the bf16 grid past 512 keys;
#   4. memcheck + racecheck of v51 (the static walk at <= 512 keys, the one-tile kernel's
#      chunked case, the d64 counter walk and the d128 stream-K walk past 1k keys, 30 s a
#      tool); then the rule.
H=bench/attention/results/session54
S512_ROUNDS=11 SAN_SHORT='*/wgmma_bf16_d64_causal_gqa3_chunked' \
  bench/attention/stack_call.sh z3 "${CHUNKS:-.chunks/s54z}" "v42 v51" $H/rule_v51.py
