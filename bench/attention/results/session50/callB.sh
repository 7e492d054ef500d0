#!/usr/bin/env bash
# Session 50, call B (any Hopper GPU; carry .chunks/s50; ~560 s): v32 (NOTES.md v32:
# prediction and rule written before it) against the head, three alternating rounds of the
# bf16 grid and serving rows; then v32's whole attention_cuda_test and memcheck + racecheck of
# the stream-K cases with the time left.
#   head.txz = 247d158 (GPU code 7192a6a's, mainline's); v32.txz = branch v32 (v32.commit).
# If adopted: callC.sh (RESULTS.md's run of v32) on the warm machine.
CHUNKS=${CHUNKS:-.chunks/s50} BENCH_ARGS="--prefill --serving --dtype bf16" BENCH_TIMEOUT=90 \
  exec bench/attention/variant_call.sh b head v32 3 bench/attention/results/session50/rule_v32.py \
  'PersistentPrefillTest*:AttentionConfigTest*:All/PrefillTest.*/wgmmaps*:All/PrefillTest.*/auto_bf16*' \
  'PersistentPrefillTest.StreamK*:All/PrefillTest.*/wgmmaps_bf16_d128_full_gqa3_varlen' \
  "${1:-560}"
