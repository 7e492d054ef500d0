#!/usr/bin/env bash
# Session 40, call A: session 39's prepared call T7 (v14b vs the head's kernels: tests, alternating
# bench, memcheck + racecheck, ncu) and then the head db7afc9's GPU code no GPU has run yet:
# attention_cuda_test whole (kAuto's d64 causal threshold at 768) and cuda_runner_test on a random
# 2-layer Llama-3.2-1B-shaped Q4_K_M file (the golden test must skip there).
set -u
t0=$(date +%s)
bash .chunks/s39/callT7.sh
el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/hd && mkdir -p /tmp/hd && tar -xJf .chunks/s40/hd.txz -C /tmp/hd
H=/tmp/hd/.gpu; export LD_LIBRARY_PATH=$H/lib:/usr/local/cuda/lib64
R=$OUT/a; mkdir -p $R
timeout 150 $H/bin/attention_cuda_test > $R/attention_cuda_test.txt 2>&1
echo "head attention_cuda_test rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/attention_cuda_test.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/attention_cuda_test.txt | head
$H/bin/flashserve-make-gguf --tokenizer-from $H/vocab.gguf --preset llama-3.2-1b --ftype q4_k_m \
  --layers 2 --out /tmp/1b2.gguf | tail -n1
FLASHSERVE_TEST_MODEL=/tmp/1b2.gguf timeout 150 $H/bin/cuda_runner_test > $R/cuda_runner_test_1b2.txt 2>&1
echo "head cuda_runner_test rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/cuda_runner_test_1b2.txt | tr '\n' ' ')"
grep -E '^\[  (FAILED|SKIPPED) \]' $R/cuda_runner_test_1b2.txt | head
tar -czf $OUT/a.tgz -C $OUT a && rm -rf $R
echo "end $(el) s"
