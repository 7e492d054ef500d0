#!/usr/bin/env bash
# Call V (session 54; any Hopper GPU; carry .chunks/s54; ~400 s): the racecheck that
# RESULTS.md's call E (session 53, f98d5be) did not reach. E's sanitize-full racecheck was cut
# by its 500 s limit after 8 of scripts/gpu-check.sh's 14 full-length tests, in the 9th
# (wgmmaps_bf16_d128_causal_gqa8_varlen, which ran > 380 s under racecheck). Here, on
# f98d5be's kernels (v42.txz, the head's kernel code):
#   1. racecheck of the five after it at their full lengths (the window prefill at d64 and
#      d128, the window decode with automatic splits, unsplit decode, the split prefill);
#   2. racecheck of wgmmaps_bf16_d128_causal_gqa8_varlen with lengths capped at 1,100 keys
#      (FLASHSERVE_TEST_MAX_LEN: still past 1k, as issue 20 asks, at a fraction of its cost).
set -u
R=/tmp/v B=/tmp/b_v
rm -rf "$R" "$B" && mkdir -p "$R" "$B" && tar -xJf "${CHUNKS:-.chunks/s54}/v42.txz" -C "$B"
V=$B/.gpu
export LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64
( while sleep 20; do tar -czf "$OUT/v.tgz.part" -C /tmp v && mv "$OUT/v.tgz.part" "$OUT/v.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
five='*WindowPrefillTest*/auto_bf16_d64_w1100_chunked:*WindowPrefillTest*/auto_bf16_d128_w300_varlen'
five+=':*/bf16_d64_gqa3_splitsauto_w1025:*DecodeTest*/bf16_d128_gqa8_splits1'
five+=':*SplitPrefillTest*/wgmma_bf16_d64_causal_gqa3_chunked_s7'
step() {  # step NAME TIMEOUT FILTER [ENV...]
  local name=$1 t=$2 f=$3; shift 3
  env "$@" timeout "$t" compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$V/bin/attention_cuda_test" --gtest_filter="$f" > "$R/$name.txt" 2>&1
  echo "$name rc=$? $(grep -cE '^\[ +OK +\]' "$R/$name.txt") ok $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$R/$name.txt" | tail -1)"
}
step racecheck_five 200 "$five" | tee -a "$R/summary.txt"
step racecheck_d128causal_1100 "${D128_TIMEOUT:-170}" '*/wgmmaps_bf16_d128_causal_gqa8_varlen' \
  FLASHSERVE_TEST_MAX_LEN=1100 | tee -a "$R/summary.txt"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/v.tgz" -C /tmp v
