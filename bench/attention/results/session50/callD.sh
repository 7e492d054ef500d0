#!/usr/bin/env bash
# Session 50, call D (any Hopper GPU; carry .chunks/s50; ~400 s): v33 (NOTES.md v33:
# prediction and rule written before it) against the head, five alternating rounds of the bf16
# grid and serving rows of at most 4,096 keys (the rows past them run the same kernels in both
# builds), then v33's whole attention_cuda_test.
#   head.txz = 247d158 (GPU code 7192a6a's, mainline's); v33.txz = branch v33 (v33.commit).
# If adopted: callE.sh (RESULTS.md's run of v33) on the warm machine.
CHUNKS=${CHUNKS:-.chunks/s50} BENCH_ARGS="--prefill --serving --dtype bf16 --max-keys=4096" BENCH_TIMEOUT=70 \
  exec bench/attention/variant_call.sh d head v33 5 bench/attention/results/session50/rule_v33.py \
  'PersistentPrefillTest*:AttentionConfigTest*:All/PrefillTest.*/wgmmaps*:All/PrefillTest.*/auto_bf16*' \
  'PersistentPrefillTest.StreamK*' "${1:-400}"
