#!/usr/bin/env bash
# Session 41, call J (any Hopper GPU; carry .chunks/s41/j.txz = attention_cuda_test,
# attention_bench, cuda_runner_test, flashserve-make-gguf + a vocab-only GGUF at the v19
# candidate (split prefill), .chunks/s41/j.commit, .chunks/s41/i.txz = the head before it
# (f21b99e), this script; ~500 s):
# 1. gpu-check info tests bench peers at the candidate (the table RESULTS.md would take);
# 2. one more alternating round head / candidate (attention_bench --prefill --serving bf16);
# 3. cuda_runner_test's prefill tests on a random SmolLM2-shaped Q4_1 file (the 512 chunk
#    onto 1,536 cached tokens runs 4 splits; len 1025 runs 2);
# 4. memcheck over two split tests past 1k keys, racecheck over one.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf .gpu /tmp/i && tar -xJf .chunks/s41/j.txz && mkdir -p /tmp/i && tar -xJf .chunks/s41/i.txz -C /tmp/i
R=$OUT/j; mkdir -p $R
C=$(cut -c1-7 .chunks/s41/j.commit)
GIT_COMMIT=$C TESTS_TIMEOUT=90 BENCH_TIMEOUT=200 PEERS_TIMEOUT=260 \
  scripts/gpu-check.sh $R/check info tests bench peers > $R/gpu_check_stdout.txt 2>&1
echo "gpu-check rc=$? $(el) s"
cat $R/check/summary.txt
grep -E "key splits" $R/check/bench.log | head -8
bench/attention/alternate_bench.sh $R 1 i=/tmp/i/.gpu j=$PWD/.gpu
echo "bench done $(el) s"
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64
.gpu/bin/flashserve-make-gguf --tokenizer-from .gpu/vocab.gguf --out /tmp/smollm2-q4_1.gguf \
  --preset smollm2-135m --type q4_1 > $R/make.log 2>&1
echo "make rc=$? $(el) s"
FLASHSERVE_TEST_MODEL=/tmp/smollm2-q4_1.gguf timeout 200 .gpu/bin/cuda_runner_test \
  --gtest_filter='*LayerByLayer*:*AChunkOntoALongPrefix*:*MixedPrefillAndDecode*:*GraphsOnAndOff*' \
  > $R/cuda_runner_test.log 2>&1
echo "cuda_runner_test rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/cuda_runner_test.log | tr '\n' ' ')"
grep -E "chunk 512|len 1025|FAILED" $R/cuda_runner_test.log | head -8
S='All/SplitPrefillTest.MatchesReferenceWithinNaiveError/wgmma_bf16_d64_causal_gqa3_chunked_s7'
S="$S:All/SplitPrefillTest.MatchesReferenceWithinNaiveError/wgmma_bf16_d128_causal_gqa3_varlen_s2"
for tool in memcheck racecheck; do
  left=$(( 585 - $(el) )); [[ $left -gt 150 ]] && left=150
  [[ $tool == racecheck ]] && S=${S%%:*}
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 .gpu/bin/attention_cuda_test --gtest_filter="$S" > $R/san_$tool.txt 2>&1
  echo "$tool rc=$? $(el) s $(grep -cE '^\[ +OK +\]' $R/san_$tool.txt) ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_$tool.txt | tail -1)"
done
tar -czf $OUT/j.tgz -C $OUT j && rm -rf $R
echo "end $(el) s"
