#!/usr/bin/env bash
# Session 39, call T3 (right after T2, same bundle in .gpu/ if the machine is still warm, else
# unpacked again from .chunks/s39/m.txz): 1. quant_gemm_cuda_test (the tensor-map encoder now
# shared with the attention kernel); 2. cuda_runner_test on a random 2-layer Llama-3.2-1B-shaped
# Q4_K_M file (d64: its 1,025-token prompts now take the wgmma kernel with K/V by TMA);
# 3. gpu-check's sanitize-full (memcheck and racecheck over one test of each kernel kAuto can
# pick, past 1k keys) at the head. (The <= 97 stage is left out: no whole 128-key tile there,
# so it cannot reach the TMA loads, and its kernels are unchanged.)
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
[[ -x .gpu/bin/cuda_runner_test ]] || { rm -rf .gpu && tar -xJf .chunks/s39/m.txz; }
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64
R=$OUT/t3; mkdir -p $R
timeout 60 .gpu/bin/quant_gemm_cuda_test > $R/quant_gemm_cuda_test.txt 2>&1
echo "quant_gemm_cuda_test rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/quant_gemm_cuda_test.txt | tr '\n' ' ')"
.gpu/bin/flashserve-make-gguf --tokenizer-from .gpu/vocab.gguf --preset llama-3.2-1b --ftype q4_k_m \
  --layers 2 --out /tmp/1b2.gguf | tail -n1
FLASHSERVE_TEST_MODEL=/tmp/1b2.gguf timeout 150 .gpu/bin/cuda_runner_test > $R/cuda_runner_test_1b2.txt 2>&1
echo "cuda_runner_test rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/cuda_runner_test_1b2.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/cuda_runner_test_1b2.txt | head
SANITIZER_FULL_TIMEOUT=$(( (570 - $(el)) / 2 )) \
  GIT_COMMIT=$(cut -c1-7 .chunks/s39/m.commit) scripts/gpu-check.sh $R/check sanitize-full > $R/gpu_check_stdout.txt 2>&1
echo "gpu-check sanitize rc=$? $(el) s"
cat $R/check/summary.txt
tar -czf $OUT/t3.tgz -C $OUT t3 && rm -rf $R
echo "end $(el) s"
