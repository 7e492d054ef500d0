#!/usr/bin/env bash
# Call B (session 57, for session 58; any Hopper GPU; carry .chunks/s57z, which
# results/session59/bundles.sh builds, v51.txz first; ~360 s): what issue
# 20's "done means" still lacks at the head's kernel code (7955020 = v51; later commits change
# no machine code, cuobjdump), and two more runs of RESULTS.md's prefill grid.
#   1. racecheck, on v51.txz (7955020's bundle), of the sanitize-full tests that RESULTS.md's
#      call E did not reach and call A did not race at v51's code: the d128 stream-K walk
#      (wgmmaps d128 full varlen) at its full lengths, the split prefill, the window prefill at
#      d64 and d128, the window decode with automatic splits and unsplit decode (the decode
#      kernels are v42's machine code, raced at f98d5be, and cost ~10 s); then the persistent
#      d128 causal varlen case with lengths capped at 1,100 keys (past 1k, as session 54's call
#      V; at its full lengths it ran > 380 s under racecheck);
#   2. calls W2 and X2 (`results_repeats.sh`): the bf16 prefill grid twice more at 7955020, so
#      that RESULTS.md's table can be read as the median of five runs as well as of three (the
#      s512 d64 causal row read 1.04 / 1.10 / 0.94 over E, W and X; NOTES.md "Session 57").
# With arguments, the same for another head: `callB.sh BUNDLE.txz COMMIT` (if v52 is adopted:
# after its call E, so that W2 and X2 are that table's two repeats and the racecheck is its).
#
#   bench/attention/results/session57/callB.sh [BUNDLE.txz COMMIT]
set -u
bundle=${1:-${CHUNKS:-.chunks/s57z}/v51.txz} commit=${2:-7955020}
R=/tmp/b B=/tmp/b_b
rm -rf "$R" "$B" && mkdir -p "$R" "$B" && tar -xJf "$bundle" -C "$B"
V=$B/.gpu
( while sleep 20; do tar -czf "$OUT/b.tgz.part" -C /tmp b && mv "$OUT/b.tgz.part" "$OUT/b.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo "call B: $bundle ($commit)" | tee "$R/summary.txt"
six='*/wgmmaps_bf16_d128_full_gqa3_varlen'
six+=':*WindowPrefillTest*/auto_bf16_d64_w1100_chunked:*WindowPrefillTest*/auto_bf16_d128_w300_varlen'
six+=':*/bf16_d64_gqa3_splitsauto_w1025:*DecodeTest*/bf16_d128_gqa8_splits1'
six+=':*SplitPrefillTest*/wgmma_bf16_d64_causal_gqa3_chunked_s7'
S=bench/attention/sanitize_tests.sh
TOOLS=racecheck $S "$R" six "$V" 150 "$six" | tee -a "$R/summary.txt"
TOOLS=racecheck FLASHSERVE_TEST_MAX_LEN=1100 $S "$R" d128causal_1100 "$V" 130 \
  '*/wgmmaps_bf16_d128_causal_gqa8_varlen' | tee -a "$R/summary.txt"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/b.tgz" -C /tmp b
bench/attention/results_repeats.sh "$bundle" "$commit" w2 x2
