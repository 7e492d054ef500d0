#!/usr/bin/env bash
# Prepared in session 47 for the next (any Hopper GPU; carry .chunks/s48; ~560 s): v30's
# measurement (NOTES.md v30: prediction and rule written before it).
#   head.txz = mainline 15606a4 (v28 merged; kAuto's persistent form at <= 512 keys, static walk)
#   v30.txz  = branch v30 7192a6a (the static walk at <= 512 keys, the counter walk at
#              513-1,024, kAuto's persistent class <= 1,024 keys; patch record
#              v30_walks.patch beside this script, on 15606a4, at the branch's ce15510,
#              which changes musts.py only)
# Gate: v30's persistent and split tests and the choice table at full lengths; five rounds of
# the 11 rows of at most 1,024 keys with the one-tile `wgmma` as the control; if adopted,
# RESULTS.md's run of v30 in the same call (results_run.sh: tests, bench, peers,
# sanitize-full); else v30's whole test binary and memcheck + racecheck of the counter walk.
# Then here: merge v30 if adopted; musts.py on s/r/check/table.md; RESULTS.md's header.
# Rebuild a bundle: git checkout the commit; cmake --build build -j2 --target
#   attention_cuda_test attention_bench; scripts/gpu-bundle.sh /tmp/b/.gpu
#   build/bin/attention_{cuda_test,bench}; tar -cJf .chunks/s48/NAME.txz -C /tmp/b .gpu;
#   git rev-parse --short HEAD > .chunks/s48/NAME.commit
CHUNKS=${CHUNKS:-.chunks/s48} BENCH_ARGS="--prefill --serving --dtype bf16 --max-keys=1024" \
  BENCH_TIMEOUT=60 RESULTS_IF_ADOPTED=1 \
  exec bench/attention/variant_call.sh s head v30 5 bench/attention/results/session47/rule_v30.py \
  'PersistentPrefillTest*:AttentionConfigTest*:All/PrefillTest.*/wgmmaps*:All/SplitPrefillTest.*/auto*' \
  'PersistentPrefillTest.CallsBackToBackEachRunEveryTile:All/PrefillTest.*/wgmmaps_bf16_d128_causal_gqa8_varlen:All/PrefillTest.*/wgmmaps_bf16_d64_full_gqa3_chunked' \
  "${1:-560}"
