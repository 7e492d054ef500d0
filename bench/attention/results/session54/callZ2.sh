#!/usr/bin/env bash
# (Bundles: results/session54/bundles_z.sh [.chunks/s54z] rebuilds v42 and v50 with the rest.)
# Call Z2 (session 54, for session 55, after call Z on the same warm machine; any Hopper GPU;
# carry .chunks/s54z; ~340 s): v50 (d128's setmaxnreg split 216 / 80: the persistent walks'
# producer no longer spills) against v42 (the head's kernels), on the d128 rows only
# (`--head-dim=128`: the d64 kernels of both are the same machine code). Prediction and rule:
# NOTES.md v50 (written before the call); rule_v50.py.
#   1. v50's attention_cuda_test;
#   2. 15 alternating rounds of `--prefill --max-keys=512 --dtype both --head-dim=128` (15, not
#      7: the fp16 d128 full s512 row spreads +-8 %, NOTES.md call U);
#   3. 2 rounds of the d128 bf16 grid past 512 keys;
#   4. memcheck + racecheck of v50 (the static walk at <= 512 keys, the d64 counter walk and the
#      d128 stream-K walk past 1k keys, 30 s a tool); then the rule.
H=bench/attention/results/session54
S512_ROUNDS=15 BENCH_EXTRA=--head-dim=128 bench/attention/stack_call.sh z2 "${CHUNKS:-.chunks/s54z}" \
  "v42 v50" $H/rule_v50.py
