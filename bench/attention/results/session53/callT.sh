#!/usr/bin/env bash
# (Bundles: results/session53/bundles.sh [.chunks/s53v] rebuilds all five from the patches.)
# Call T (session 53, for session 54, after call R; any Hopper GPU; carry .chunks/s53v; ~350
# s): v46 (v38's one loop body under the causal mask only: without it the first key tile stays
# peeled) against v44. Bundle: v46.txz with results/session53/v43_divisors_as_parameter.patch,
# v44_producer_sleeps_on_v43.patch and v46_causal_one_loop_body_on_v44.patch applied in turn
# (v46 does not contain v45). If call R keeps v43 but not v44, rebase v46 onto v43 first (the
# two touch different code: v44 the producer's waits, v46 the consumers' loop). Prediction
# and rule: NOTES.md v46 (written before the call); rule_v46.py.
#   1. v46's attention_cuda_test;
#   2. 7 alternating rounds of `--prefill --max-keys=512 --dtype both`;
#   3. 2 rounds of the bf16 grid past 512 keys (`--prefill --dtype bf16 --min-keys=513`);
#   4. memcheck + racecheck of v46: the static walk at <= 512 keys (causal: the one body; full:
#      the peeled first tile), the one-tile kernel under the causal mask, the d64 counter walk
#      and the d128 stream-K walk past 1k keys, 30 s a tool; then rule_v46.py.
SAN_SHORT='*/wgmmaps_bf16_d128_full_gqa3_varlen:*/wgmma_bf16_d64_causal_gqa3_chunked' bench/attention/stack_call.sh t "${CHUNKS:-.chunks/s53v}" "v44 v46" \
  bench/attention/results/session53/rule_v46.py
