#!/usr/bin/env bash
# (Bundles: results/session54/bundles.sh [.chunks/s54] rebuilds all three from the patches.)
# Call U (session 54, after call R; any Hopper GPU; carry .chunks/s54; ~430 s): v47 (session
# 53's v46, the one loop body under the causal mask only, on v43 since call R kept neither v43
# nor v44) against v43, and seven more s512 rounds of v43 against v42 for v43's re-test.
# Predictions and rules: NOTES.md "v43 re-test" and v47 (written before the call);
# rule_v43b.py (pools call R's s512 rounds with these), rule_v47.py.
#   1. v47's attention_cuda_test (v43's ran in call R: 454/454);
#   2. 7 alternating rounds of `--prefill --max-keys=512 --dtype both`, v42, v43 and v47;
#   3. 2 rounds of the bf16 grid past 512 keys, v43 and v47 (v43 against v42 there: call R);
#   4. memcheck + racecheck of v47: the static walk at <= 512 keys (causal: the one body;
#      full: the peeled first tile), the one-tile kernel under the causal mask, the d64
#      counter walk and the d128 stream-K walk past 1k keys, 30 s a tool; then the rules.
H=bench/attention/results/session54
SAN_SHORT='*/wgmmaps_bf16_d128_full_gqa3_varlen:*/wgmma_bf16_d64_causal_gqa3_chunked' \
  LONG_BUILDS="v43 v47" bench/attention/stack_call.sh u "${CHUNKS:-.chunks/s54}" "v42 v43 v47" \
  $H/rule_v47.py
python3 $H/rule_v43b.py $H/r /tmp/u | tee /tmp/u/rule_v43b.md | grep -E "RULE|bf16 rows|controls"
tar -czf "$OUT/u.tgz" -C /tmp u
