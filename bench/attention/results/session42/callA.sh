#!/usr/bin/env bash
# Session 42, call A (any Hopper GPU; carry .chunks/s42/{i,c,s3,ts}.txz and this script;
# ~480 s). Session 41's calls L and M in one (their bundles were lost with that checkout and
# were rebuilt here from the same commits): i = f21b99e (before v19), c = the head f3406e6
# (v19c: the split prefill a kernel of its own; + cuda_runner_test, flashserve-make-gguf and a
# vocab-only GGUF), s3 = v21 (three K/V stages, patch record on 7e4efec), ts = v20 (whole
# 64-row output blocks stored by TMA, patch record on 7e4efec).
# 1. c's, s3's and ts's attention tests at full lengths; c's runner prefill tests on a random
#    SmolLM2-shaped Q4_1 file (the 512 chunk onto 1,536 cached tokens runs 4 splits);
# 2. attention_bench --prefill --serving bf16, i / c / s3 / ts alternating, two rounds.
# Sanitizers: in the final gpu-check's sanitize-full (which now names a split test).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in i c s3 ts; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s42/$b.txz -C /tmp/$b; done
R=$OUT/a; mkdir -p $R
for b in c s3 ts; do
  LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout 120 /tmp/$b/.gpu/bin/attention_cuda_test > $R/tests_$b.txt 2>&1
  echo "tests $b rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_$b.txt | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $R/tests_$b.txt | head -5
done
(export LD_LIBRARY_PATH=/tmp/c/.gpu/lib:/usr/local/cuda/lib64
 /tmp/c/.gpu/bin/flashserve-make-gguf --tokenizer-from /tmp/c/.gpu/vocab.gguf --out /tmp/smollm2-q4_1.gguf \
   --preset smollm2-135m --type q4_1 > $R/make.log 2>&1
 FLASHSERVE_TEST_MODEL=/tmp/smollm2-q4_1.gguf timeout 120 /tmp/c/.gpu/bin/cuda_runner_test \
   --gtest_filter='*LayerByLayer*:*AChunkOntoALongPrefix*:*MixedPrefillAndDecode*' > $R/cuda_runner_test.log 2>&1
 echo "cuda_runner_test rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/cuda_runner_test.log | tr '\n' ' ')")
grep -E "chunk 512|len 1025 layers 30" $R/cuda_runner_test.log | head -3
tar -czf $OUT/a_tests.tgz -C $OUT a
BENCH_TIMEOUT=70 bench/attention/alternate_bench.sh $R 2 i=/tmp/i/.gpu c=/tmp/c/.gpu s3=/tmp/s3/.gpu ts=/tmp/ts/.gpu
echo "bench done $(el) s"
grep -h "key splits" $R/bench_c_1.log | head -4
rm -f $OUT/a_tests.tgz; tar -czf $OUT/a.tgz -C $OUT a && rm -rf $R
echo "end $(el) s"
