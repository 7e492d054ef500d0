#!/usr/bin/env bash
# Session 49 (any Hopper GPU; carry .chunks/s49; ~460 s): session 48's callY.sh (ncu at s2048,
# ours against cuDNN, for the d128 full rows of 1k-4k keys) and a probe of the last wave.
#   1. as session48/callY.sh: ncu of our 8 launches at the b8 s2048 rows and cuDNN's kernel.
#   2. the wave probe: the prefill grid, bf16, at 32 and then 33 heads (attention_bench and
#      peers_sdpa.py --heads=N), twice each in turn. At d128 the grid has 128 h tiles of 128
#      queries, one CTA an SM on 132 SMs: h16 (the grid's) 2,048 tiles = 15.52 waves, h32 31.03,
#      h33 32.00 (whole). If the last wave's idle SMs cost what the arithmetic says, our TFLOP/s
#      at h33 read ~3 % above h32 (same time, 3 % more work) at every d128 full length; if
#      cuDNN's do too, it pays the same tail.
# Bundle: .chunks/s49/y.txz (attention_cuda_test and attention_bench of the commit in y.commit, 2bc77db;
# GPU code = 7192a6a's). Raw into $OUT/y.tgz.
C=${CHUNKS:-.chunks/s49}
rm -rf .gpu /tmp/b_y /tmp/y; mkdir -p /tmp/b_y /tmp/y
tar -xJf "$C/y.txz" -C /tmp/b_y && cp -r /tmp/b_y/.gpu .gpu
( while sleep 30; do tar -czf "$OUT/y.tgz.part" -C /tmp y && mv "$OUT/y.tgz.part" "$OUT/y.tgz"; done ) &
saver=$!
GIT_COMMIT=$(cat "$C/y.commit") NCU_PROFILE=--profile=2048 NCU_COUNT=8 NCU_PEER_SEQ=2048 \
  scripts/gpu-check.sh /tmp/y/check info ncu > /tmp/y/stdout.txt 2>&1
echo "gpu-check rc=$?"; cat /tmp/y/check/summary.txt
for round in 1 2; do
  for h in 32 33; do
    GIT_COMMIT=$(cat "$C/y.commit") BENCH_ARGS="--prefill --dtype bf16 --heads=$h" BENCH_TIMEOUT=120 \
      PEERS_TIMEOUT=120 scripts/gpu-check.sh /tmp/y/h${h}_$round bench peers > /tmp/y/h${h}_$round.txt 2>&1
    echo "h$h round $round rc=$?"
    grep -E 'd128 full' /tmp/y/h${h}_$round/table.md | cut -d'|' -f2-4,10-12
  done
done
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/y.tgz" -C /tmp y
