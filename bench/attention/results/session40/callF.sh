#!/usr/bin/env bash
# Prepared in session 40 for the next session's first call (any Hopper GPU; carry
# .chunks/s40/h.txz = the head's attention_bench with --host, .chunks/s40/f.txz = v15 (branch
# ps-flat 8eb0211), .chunks/s40/f6.txz / f2.txz = v16 (ps-flat 7f7c871: L2 section budget 6 MiB;
# the same with 2 MiB, bench only), this script; ~300 s):
# 1. attention_bench --host three times (host time of one prefill call, mma against wgmma);
# 2. v16's persistent and config tests; 3. attention_bench --prefill --serving bf16, v15 / f6 /
# f2 alternating, two rounds; 4. ncu (speed of light + memory workload) of f6 at s512: DRAM
# bytes of the persistent walk against call B's 376 MB (v13) and the one-tile kernel's 261 MB.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in h f f6 f2; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s40/$b.txz -C /tmp/$b; done
R=$OUT/f; mkdir -p $R
for r in 1 2 3; do
  LD_LIBRARY_PATH=/tmp/h/.gpu/lib:/usr/local/cuda/lib64 timeout 60 /tmp/h/.gpu/bin/attention_bench --host
done 2>&1 | tee $R/host.txt
export LD_LIBRARY_PATH=/tmp/f6/.gpu/lib:/usr/local/cuda/lib64
timeout 120 /tmp/f6/.gpu/bin/attention_cuda_test --gtest_filter='*wgmmaps*:*Persistent*:*Config*' > $R/tests_f6.txt 2>&1
echo "tests rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_f6.txt | tr '\n' ' ')"
bench/attention/alternate_bench.sh $R 2 f=/tmp/f/.gpu f6=/tmp/f6/.gpu f2=/tmp/f2/.gpu
echo "bench done $(el) s"
timeout 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --kernel-name regex:sm90_ws --launch-count 4 /tmp/f6/.gpu/bin/attention_bench --profile=512 > $R/ncu_f6_s512.txt 2>&1
echo "ncu rc=$? $(el) s"
grep -E "attention_prefill|Duration|DRAM Throughput|Memory Throughput|L2 Hit" $R/ncu_f6_s512.txt | head -24
tar -czf $OUT/f.tgz -C $OUT f && rm -rf $R
echo "end $(el) s"
