#!/usr/bin/env bash
# Prepared in session 46 for the next (any Hopper GPU; carry .chunks/s47; ~560 s; after call Q,
# if v28 is adopted): v29's first measurement, against v28 (NOTES.md v29: prediction and rule
# written before it).
#   v28.txz = branch v28 1d5fe3f (v28_mask.patch on 7deed65)
#   v29.txz = branch v29 4059d13 (v29_portable_mask.patch on v28: the portable mma.sync
#             prefill's mask in the interval form, asked of each warp's rows)
# Gate: v29's portable prefill tests at full lengths; three rounds with the `mma` column
# measured and kAuto's Hopper kernel as the control; v29's whole test binary; memcheck +
# racecheck of the portable kernel's tests past 1k keys.
# Rebuild v29.txz: both patches on 7deed65 (or later mainline), then as callP.sh says.
exec bench/attention/variant_call.sh r v28 v29 3 bench/attention/results/session46/rule_v29.py \
  'All/PrefillTest.*/mmasync*:All/WindowPrefillTest.*/*mma*:All/WindowPrefillTest.*/auto*' \
  '*/mmasync_bf16_d64_causal_gqa3_varlen:*/mmasync_bf16_d128_causal_gqa8_chunked:*WindowPrefillTest*/mmasync_bf16_d64_w1100_chunked' \
  "${1:-560}"
