#!/usr/bin/env bash
# Session 39, call T2 (any Hopper GPU; carry .chunks/s39/m.txz = the bundle of the head
# (.chunks/s39/m.commit): attention_cuda_test, attention_bench, quant_gemm_cuda_test,
# cuda_runner_test, flashserve-make-gguf, vocab.gguf): bench/attention/RESULTS.md regenerated
# at the head with v12 (K/V by TMA): every attention GPU test at full length, the benchmark
# and the torch SDPA peers in the same run.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf .gpu && tar -xJf .chunks/s39/m.txz
R=$OUT/t2; mkdir -p $R
GIT_COMMIT=$(cut -c1-7 .chunks/s39/m.commit) TESTS_TIMEOUT=90 BENCH_TIMEOUT=200 PEERS_TIMEOUT=260 \
  scripts/gpu-check.sh $R/check info tests bench peers > $R/gpu_check_stdout.txt 2>&1
echo "gpu-check rc=$? $(el) s"
cat $R/check/summary.txt
tar -czf $OUT/t2.tgz -C $OUT t2 && rm -rf $R
echo "end $(el) s"
