#!/usr/bin/env bash
# Prepared in session 47 for the next (any Hopper GPU; carry .chunks/s48; ~560 s): v29's
# re-test (NOTES.md "v29 re-test": why, prediction and rule written before it).
#   head.txz = mainline 15606a4
#   v29.txz  = branch v29r 16e73d6 (v29's two commits on 15606a4: the portable kernel's mask
#              in attention_mask.h's interval form; patch record
#              v29_portable_mask_on_15606a4.patch beside this script)
# Gate: v29's portable prefill tests at full lengths; five rounds of the bf16 prefill grid
# (`attention_bench --prefill --dtype bf16`), `mma` measured, kAuto's Hopper kernel the
# control; v29's whole test binary; memcheck + racecheck of portable tests past 1k keys.
# Rebuild a bundle: as callS.sh says (v29: branch v29r).
CHUNKS=${CHUNKS:-.chunks/s48} BENCH_ARGS="--prefill --dtype bf16" BENCH_TIMEOUT=80 \
  exec bench/attention/variant_call.sh t head v29 5 bench/attention/results/session47/rule_v29_retest.py \
  'All/PrefillTest.*/mmasync*:All/WindowPrefillTest.*/*mma*' \
  '*/mmasync_bf16_d64_causal_gqa3_varlen:*/mmasync_bf16_d128_causal_gqa8_chunked:*WindowPrefillTest*/mmasync_bf16_d64_w1100_chunked' \
  "${1:-560}"
