#!/usr/bin/env bash
# Session 42, call D (any Hopper GPU; carry .chunks/s42/{b,d}.txz, .chunks/s42/d.commit, this
# script; ~450 s): b = 1ed22d7 (v20 mainline), d = 72c0718 (the same kernels; the bench and
# the peers warm the clock up >= 25 ms before each row's timed loop).
# 1. The clock question: attention_bench --decode of b, then of d, with the SM clock sampled
#    every 20 ms by nvidia-smi beside each (calls B and C: single decode rows 3x slow).
# 2. gpu-check info tests bench peers at d (bench/attention/RESULTS.md's run), then
#    sanitize-full (memcheck + racecheck, a split prefill test included) with the time left.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in b d; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s42/$b.txz -C /tmp/$b; done
R=$OUT/d; mkdir -p $R
for b in b d; do
  nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu --format=csv,noheader -lms 20 > $R/clk_$b.csv &
  smi=$!
  LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout 60 /tmp/$b/.gpu/bin/attention_bench \
    --decode --csv $R/decode_$b.csv > $R/decode_$b.log 2>&1
  echo "decode $b rc=$? $(el) s"
  kill $smi; sleep 1
  awk -F', ' '{split($2,a," "); n++; if (a[1] < 1500) lo++} END {print "  clock samples", n, "below 1500 MHz:", lo+0}' $R/clk_$b.csv
done
rm -rf .gpu && cp -r /tmp/d/.gpu .gpu
C=$(cut -c1-7 .chunks/s42/d.commit)
GIT_COMMIT=$C TESTS_TIMEOUT=90 BENCH_TIMEOUT=220 PEERS_TIMEOUT=280 \
  scripts/gpu-check.sh $R/check info tests bench peers > $R/gpu_check_stdout.txt 2>&1
echo "gpu-check rc=$? $(el) s"
cat $R/check/summary.txt
left=$(( (575 - $(el)) / 2 ))
if [[ $left -gt 30 ]]; then
  SANITIZER_FULL_TIMEOUT=$left GIT_COMMIT=$C scripts/gpu-check.sh $R/san sanitize-full > $R/san_stdout.txt 2>&1
  echo "sanitize-full rc=$? $(el) s"; cat $R/san/summary.txt
fi
tar -czf $OUT/d.tgz -C $OUT d && rm -rf $R
echo "end $(el) s"
