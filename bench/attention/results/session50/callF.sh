#!/usr/bin/env bash
# Next session's call F (any Hopper GPU; carry .chunks/s51; ~400 s). Bundle:
# `bench/attention/make_bundle.sh .chunks/s51 head` (attention_cuda_test + attention_bench of
# the head, head.commit beside it).
#   1. past 4,096 keys, the persistent form against the one-tile grid in the head's own
#      columns: 7 runs of `attention_bench --prefill --serving --dtype bf16 --min-keys=4097`,
#      then rule_long.py (rule written before the call);
#   2. ncu at the s512 rows (12 launches: mma.sync, wgmma, wgmma_ps a row; d128 then d64, full
#      then causal) and cuDNN's kernel at the same rows: where the s512 rows' 3-8 % go.
C=${CHUNKS:-.chunks/s51}
rm -rf .gpu /tmp/b_f /tmp/f && mkdir -p /tmp/b_f /tmp/f && tar -xJf "$C/head.txz" -C /tmp/b_f && cp -r /tmp/b_f/.gpu .gpu
( while sleep 30; do tar -czf "$OUT/f.tgz.part" -C /tmp f && mv "$OUT/f.tgz.part" "$OUT/f.tgz"; done ) &
saver=$!
BENCH_ARGS="--prefill --serving --dtype bf16 --min-keys=4097" BENCH_TIMEOUT=60 \
  bench/attention/alternate_bench.sh /tmp/f 7 head=.gpu
python3 bench/attention/results/session50/rule_long.py /tmp/f | tee /tmp/f/rule_long.md | grep RULE
GIT_COMMIT=$(cat "$C/head.commit") NCU_PROFILE=--profile=512 NCU_COUNT=12 NCU_PEER_SEQ=512 \
  scripts/gpu-check.sh /tmp/f/ncu info ncu > /tmp/f/ncu_stdout.txt 2>&1
echo "ncu rc=$?"; cat /tmp/f/ncu/summary.txt
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/f.tgz" -C /tmp f
