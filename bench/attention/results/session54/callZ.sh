#!/usr/bin/env bash
# (Bundles: results/session54/bundles_z.sh [.chunks/s54z] rebuilds all three from the patches.)
# Call Z (session 54, for session 55; any Hopper GPU; carry .chunks/s54z; ~360 s): v48 (three
# K/V stages at d64) and v49 (four) against v42 (the head's kernels), on the d64 rows only
# (`--head-dim=64`: the d128 kernels of all three are the same machine code). Predictions and
# rules: NOTES.md v48/v49 (written before the call); rule_v48_v49.py.
#   1. v48's and v49's attention_cuda_test;
#   2. 7 alternating rounds of `--prefill --max-keys=512 --dtype both --head-dim=64`;
#   3. 2 rounds of the d64 bf16 grid past 512 keys;
#   4. memcheck + racecheck of v49 (the deeper ring): the static walk at <= 512 keys, the d64
#      counter walk and the d128 stream-K walk past 1k keys, 30 s a tool; then the rules.
H=bench/attention/results/session54
BENCH_EXTRA=--head-dim=64 bench/attention/stack_call.sh z "${CHUNKS:-.chunks/s54z}" "v42 v48 v49" \
  $H/rule_v48_v49.py
