#!/usr/bin/env bash
# Prepared in session 41 (any Hopper GPU; carry .chunks/s41/c.txz = the head 7e4efec's
# attention_cuda_test, attention_bench, ..., this script; ~260 s): ncu of our kernels and of
# cuDNN's at the grid's s = 1024 rows (b16 s1024: d128 full and causal, d64 full and causal),
# the sections of gpu-check's ncu stage: where the s1k rows' time goes against cuDNN's
# (d128 full 1k 0.83-0.86x, d128 causal 1k 0.81-0.84x; session 37 profiled s512 only). Then
# the full set with source counters of the one-tile d128 full kernel at s512 and at s16384,
# one launch each: per SASS instruction, what costs more per key tile at the short length
# (1.5x the long length's time per key tile: NOTES.md v16's ncu), in the same kernel.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf .gpu && tar -xJf .chunks/s41/c.txz
R=$OUT/n; mkdir -p $R
NCU_PROFILE=--profile=1024 NCU_COUNT=8 NCU_PEER_SEQ=1024 GIT_COMMIT=$(cut -c1-7 .chunks/s41/c.commit) \
  scripts/gpu-check.sh $R ncu > $R/stdout.txt 2>&1
echo "ncu rc=$? $(el) s"; cat $R/summary.txt
grep -E "attention_prefill|cudnn|Duration|Registers Per|Grid Size|Block Size|Dynamic Shared" $R/ncu.txt $R/ncu_peer.txt | head -60
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64
for S in 512 16384; do
  timeout 150 ncu --clock-control none --set full --import-source yes --kernel-name regex:sm90_ws \
    --launch-count 1 -o /tmp/n$S .gpu/bin/attention_bench --profile=$S > $R/ncu_full_$S.txt 2>&1
  echo "ncu full s$S rc=$? $(el) s"
  ncu -i /tmp/n$S.ncu-rep --page details > $R/details_$S.txt 2>&1
  ncu -i /tmp/n$S.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $R/source_sass_$S.csv.gz
  grep -E "Duration|Issue Slots Busy|Elapsed Cycles" $R/details_$S.txt | head -4
done
tar -czf $OUT/n.tgz -C $OUT n && rm -rf $R
echo "end $(el) s"
