#!/usr/bin/env bash
# Prepared in session 46 for the next (any Hopper GPU; carry .chunks/s47; ~560 s): v28's first
# measurement (NOTES.md v28: prediction and rule written before it).
#   head.txz = mainline 4f34939
#   v28.txz  = branch v28 1d5fe3f (v28_mask.patch beside this script, on 7deed65: the
#              consumers' mask without branches, asked of each warpgroup's rows)
# Gate: v28's Hopper prefill tests at full lengths (causal, varlen, chunks, windows, both
# forms); three rounds of `attention_bench --prefill --serving --dtype bf16` with `mma` as the
# control; v28's whole test binary; memcheck + racecheck of gpu-check's sanitize-full tests
# that run the changed mask past 1k keys.
# Rebuild v28.txz: `git apply` the patch on 7deed65 (or later mainline), then as callP.sh says
# (head.txz: the same at 4f34939, unpatched).
exec bench/attention/variant_call.sh q head v28 3 bench/attention/results/session46/rule_v28.py \
  'All/PrefillTest.*/wgmma*:All/WindowPrefillTest.*/*wgmma*:All/WindowPrefillTest.*/auto*:PersistentPrefillTest*' \
  '*/wgmma_bf16_d64_causal_gqa3_chunked:*/wgmma_bf16_d128_full_gqa8_varlen:*WindowPrefillTest*/auto_bf16_d64_w1100_chunked:*WindowPrefillTest*/auto_bf16_d128_w300_varlen:*/wgmmaps_bf16_d128_causal_gqa8_varlen' \
  "${1:-560}"
