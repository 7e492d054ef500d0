#!/usr/bin/env bash
# Prepared in session 48 for the next (any Hopper GPU; carry .chunks/s48; ~300 s): where the
# d128 full rows of 1k-4k keys lose to cuDNN (RESULTS.md at 7192a6a: 0.94 / 0.95 / 0.97, the
# rows below the musts besides s512), under ncu, ours against cuDNN's kernel in one call, as
# session 37 did at s512 and session 42 at s1k (NOTES.md):
#   1. ncu of one launch of each of our kernels at the grid's b8 s2048 rows (attention_bench
#      --profile=2048: the portable kernel then the one-tile `wgmma` (kAuto's at 2k), d128 then
#      d64, full then causal: 8 launches), the same sections and stall metrics as the peer's;
#   2. ncu of cuDNN's kernel at the same rows (peers_profile.py --seq 2048).
# Bundle: .chunks/s48/v30.txz = 7192a6a, mainline 8e44200's GPU code (RESULTS.md's run);
# rebuild from the head per session47/callS.sh's header if gone. Raw into $OUT/y.tgz.
# Then here: the table of NOTES.md session 37 (us, grid, regs, smem, tensor pipe %, issue %,
# long_sb, wait, barrier) for s2048, and a design against what differs.
C=${CHUNKS:-.chunks/s48}
rm -rf .gpu /tmp/b_y /tmp/y; mkdir -p /tmp/b_y /tmp/y
tar -xJf "$C/v30.txz" -C /tmp/b_y && cp -r /tmp/b_y/.gpu .gpu
( while sleep 30; do tar -czf "$OUT/y.tgz.part" -C /tmp y && mv "$OUT/y.tgz.part" "$OUT/y.tgz"; done ) &
saver=$!
GIT_COMMIT=$(cat "$C/v30.commit") NCU_PROFILE=--profile=2048 NCU_COUNT=8 NCU_PEER_SEQ=2048 \
  scripts/gpu-check.sh /tmp/y/check info ncu > /tmp/y/stdout.txt 2>&1
echo "gpu-check rc=$?"; cat /tmp/y/check/summary.txt
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/y.tgz" -C /tmp y
