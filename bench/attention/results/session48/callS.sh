#!/usr/bin/env bash
# Session 48 (any Hopper GPU; carry .chunks/s48; ~560 s): session 47's callS.sh (v30's
# measurement; NOTES.md v30: prediction and rule written before it) with RESULTS_ELSE_BASE=1,
# so that one device start covers both verdicts: adopted -> RESULTS.md's run of v30, not
# adopted -> RESULTS.md's run of mainline's kernels (head.txz; what session 47's callU.sh
# would have run in a call of its own). Refused starts had taken 630 s of this session's
# 1,800 before it was written.
#   head.txz = 15606a4 (mainline's GPU code: git diff 15606a4 79489a9 changes bench scripts
#              and one Python test only); v30.txz = branch v30 7192a6a.
# Then here: merge v30 if adopted; musts.py on s/r/check/table.md; RESULTS.md's header.
CHUNKS=${CHUNKS:-.chunks/s48} BENCH_ARGS="--prefill --serving --dtype bf16 --max-keys=1024" \
  BENCH_TIMEOUT=60 RESULTS_IF_ADOPTED=1 RESULTS_ELSE_BASE=1 \
  exec bench/attention/variant_call.sh s head v30 5 bench/attention/results/session47/rule_v30.py \
  'PersistentPrefillTest*:AttentionConfigTest*:All/PrefillTest.*/wgmmaps*:All/SplitPrefillTest.*/auto*' \
  'PersistentPrefillTest.CallsBackToBackEachRunEveryTile:All/PrefillTest.*/wgmmaps_bf16_d128_causal_gqa8_varlen:All/PrefillTest.*/wgmmaps_bf16_d64_full_gqa3_chunked' \
  "${1:-560}"
