#!/usr/bin/env bash
# Prepared in session 41 for the next session's first call (any Hopper GPU; carry
# .chunks/s41/{i,c,s3}.txz and this script; ~420 s): i = f21b99e (before v19), c = the head
# 840f30c (v19c: the split prefill a kernel of its own; + cuda_runner_test, flashserve-make-gguf
# and a vocab-only GGUF), s3 = branch stages3 28c53c6 (v21: three K/V stages, on 7e4efec).
# 1. c's and s3's attention tests at full lengths; c's runner prefill tests on a random
#    SmolLM2-shaped Q4_1 file (the 512 chunk onto 1,536 cached tokens runs 4 splits);
# 2. attention_bench --prefill --serving bf16, i / c / s3 alternating, two rounds;
# 3. memcheck + racecheck of one c split test and one s3 test past 1k keys.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in i c s3; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s41/$b.txz -C /tmp/$b; done
R=$OUT/l; mkdir -p $R
for b in c s3; do
  LD_LIBRARY_PATH=/tmp/$b/.gpu/lib:/usr/local/cuda/lib64 timeout 120 /tmp/$b/.gpu/bin/attention_cuda_test > $R/tests_$b.txt 2>&1
  echo "tests $b rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_$b.txt | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $R/tests_$b.txt | head -5
done
(export LD_LIBRARY_PATH=/tmp/c/.gpu/lib:/usr/local/cuda/lib64
 /tmp/c/.gpu/bin/flashserve-make-gguf --tokenizer-from /tmp/c/.gpu/vocab.gguf --out /tmp/smollm2-q4_1.gguf \
   --preset smollm2-135m --type q4_1 > $R/make.log 2>&1
 FLASHSERVE_TEST_MODEL=/tmp/smollm2-q4_1.gguf timeout 150 /tmp/c/.gpu/bin/cuda_runner_test \
   --gtest_filter='*LayerByLayer*:*AChunkOntoALongPrefix*:*MixedPrefillAndDecode*' > $R/cuda_runner_test.log 2>&1
 echo "cuda_runner_test rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/cuda_runner_test.log | tr '\n' ' ')")
grep -E "chunk 512|len 1025 layers 30" $R/cuda_runner_test.log | head -3
bench/attention/alternate_bench.sh $R 2 i=/tmp/i/.gpu c=/tmp/c/.gpu s3=/tmp/s3/.gpu
echo "bench done $(el) s"
grep -h "key splits" $R/bench_c_1.log | head -4
P='All/PrefillTest.MatchesReferenceWithinNaiveError'
bench/attention/sanitize_tests.sh $R c /tmp/c/.gpu 60 \
  'All/SplitPrefillTest.MatchesReferenceWithinNaiveError/wgmma_bf16_d64_causal_gqa3_chunked_s7'
bench/attention/sanitize_tests.sh $R s3 /tmp/s3/.gpu 60 "$P/wgmma_bf16_d128_causal_gqa3_varlen"
echo "sanitizers done $(el) s"
tar -czf $OUT/l.tgz -C $OUT l && rm -rf $R
echo "end $(el) s"
