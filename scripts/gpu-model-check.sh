#!/usr/bin/env bash
# The GPU check of the models people download: every architecture and native (quantized)
# device weights, for the GPU machine (bundled binaries, nothing built there).
#
#   scripts/gpu-model-check.sh OUT_DIR [stage...]
#     stages: info tests sanitize memserve quantbench gemmprofile decodestep serve
#     (default: all but gemmprofile)
#
# Needs BIN_DIR (default .gpu/bin, libraries in .gpu/lib: scripts/gpu-bundle.sh) with
# flashserve, flashserve-cli, flashserve-make-gguf, flashserve-bench-decode-step,
# cuda_runner_test, cuda_arch_test, quant_gemv_cuda_test, quant_gemm_cuda_test, gemv_cuda_test,
# layers_cuda_test, attention_cuda_test, quant_gemv_bench, quant_gemm_bench, and VOCAB
# (default .gpu/vocab.gguf: `flashserve-make-gguf --vocab-only` of the default model, whose
# tokenizer keys the architecture tests' files copy). Models are made here by
# flashserve-make-gguf in MODELS_DIR (default /tmp/fs-models):
#   tests      kernel tests (quantized GEMV and GEMM, GEMV, layers, attention) and the runner tests: every
#              architecture CUDA vs CPU with bf16 and native weights (cuda_arch_test), and
#              cuda_runner_test on a random SmolLM2-shaped Q4_1 file (its HF-golden test needs
#              the real file and is left out here)
#   sanitize   compute-sanitizer memcheck over the quantized kernels and one architecture
#              case, racecheck over the quantized GEMM
#   memserve   compute-sanitizer memcheck over a serving run with --weights native of each
#              MEMSERVE_TYPES file (default q4_0 q4_1 q8_0 q4_K q5_K q6_K; a two-layer
#              MEMSERVE_PRESET shape, default llama-3.2-1b, whose rows are whole 256-value
#              blocks, so no type falls back; smollm2-135m with q4_0 q4_1 q8_0 runs the narrow
#              quantized GEMM of small matrices): start-up (decode graphs, prefill warm-up), 48 requests at concurrency 24
#              of 300-token prompts, 2 of 700, SIGTERM; 0 errors and every request OK
#   quantbench quant_gemv_bench (GB/s and % of 4.8 TB/s per format and shape) and
#              quant_gemm_bench (the GEMM paths of native weights against bf16)
#   gemmprofile ncu over one warm launch of the quantized GEMM (quant_gemm_bench) of
#              GEMM_PROFILE_SHAPE (default "8B gate_up") at each of GEMM_PROFILE_MS (256 128):
#              speed of light, memory workload, warp state, the stall reasons per issued
#              instruction, and cuBLASLt's kernel for the bf16 weight (SM clock, cycles), all
#              with the clocks not locked; plus the SM clock, power and clock-event reasons
#              sampled by nvidia-smi during a plain run
#   decodestep flashserve-bench-decode-step (in BIN_DIR too) on each DECODE_MODELS file
#              (default "llama-3.2-1b:q4_k_m llama-3.1-8b:q4_k_m"), --weights native,bf16 in one
#              process, at the contexts a served 128 -> 128 request decodes at (--context 192)
#              and 64 and 256 sequences, graphs on, the kernels of the 64-sequence step listed:
#              where a served native / bf16 ratio comes from (bench/serving/NOTES.md, step 18)
#   serve      bench/serving/run.sh at SERVE_CONCURRENCY over random-weight files of
#              SERVE_MODELS ("preset:ftype ...": a mixture, q4_k_m q5_k_m q6_k q8_0, or one
#              type, e.g. smollm2-135m:q4_1), --weights native then bf16, REQUESTS_PER_STREAM
#              (default 8: with 2-4 a stream the 64- and 256-stream runs of the small models
#              last under a second and their ratios moved by up to 10 points between calls)
# Results: OUT_DIR/summary.txt plus one log per stage.
set -uo pipefail
out=${1:?usage: $0 OUT_DIR [stage...]}
shift
stages=${*:-info tests sanitize memserve quantbench decodestep serve}
bin=${BIN_DIR:-.gpu/bin}
vocab=${VOCAB:-.gpu/vocab.gguf}
models=${MODELS_DIR:-/tmp/fs-models}
export LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FLASHSERVE_TEST_TOKENIZER_FROM=$vocab
mkdir -p "$out" "$models"
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }
has() { [[ " $stages " == *" $1 "* ]]; }
gtest_counts() { grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$1" | sort | uniq -c | tr '\n' ' '; }
# make NAME ARGS...: a random-weight model in $models/NAME.gguf (once).
make_model() {
  local name=$1; shift
  [[ -f $models/$name.gguf ]] || "$bin/flashserve-make-gguf" --tokenizer-from "$vocab" \
    --out "$models/$name.gguf" "$@" >> "$out/make.log" 2>&1
}
# The make-gguf flag of a spec's second half: a llama.cpp mixture (--ftype) or one type.
type_flag() { case $1 in q4_k_m|q5_k_m|q6_k|q8_0) echo --ftype ;; *) echo --type ;; esac; }
run_test() {  # run_test NAME TIMEOUT [args...]
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$bin/$name" "$@" > "$out/$name.log" 2>&1
  note "$name: rc=$? $(gtest_counts "$out/$name.log")"
  grep -E '^\[  FAILED  \]' "$out/$name.log" | head -10 | tee -a "$summary"
}
note "gpu-model-check $(date -u +%FT%TZ) stages: $stages commit: ${GIT_COMMIT:-unknown}"

if has info; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$summary"
fi
if has tests; then
  run_test quant_gemv_cuda_test 240
  run_test quant_gemm_cuda_test 240
  run_test attention_cuda_test 400
  run_test gemv_cuda_test 240
  run_test layers_cuda_test 240
  run_test cuda_arch_test 300
  grep -E '^\[cuda arch' "$out/cuda_arch_test.log" | sort -t'x' -k3 | tail -4 >> "$summary"
  make_model smollm2-q4_1 --preset smollm2-135m --type q4_1
  FLASHSERVE_TEST_MODEL=$models/smollm2-q4_1.gguf run_test cuda_runner_test 400 --gtest_filter=-*Golden*
  grep -E '^\[cuda runner\] (native|cuda)' "$out/cuda_runner_test.log" | head -12 >> "$summary"
fi
if has sanitize; then
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/quant_gemv_cuda_test" \
    --gtest_filter='*Rope*:*Dequantize*:*Largest*' > "$out/sanitizer.log" 2>&1
  note "memcheck quant_gemv_cuda_test: rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$out/sanitizer.log") clean summaries"
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/quant_gemm_cuda_test" \
    > "$out/sanitizer-gemm.log" 2>&1
  note "memcheck quant_gemm_cuda_test: rc=$? $(grep 'ERROR SUMMARY' "$out/sanitizer-gemm.log" | tail -1)"
  timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/quant_gemm_cuda_test" \
    > "$out/racecheck-gemm.log" 2>&1
  note "racecheck quant_gemm_cuda_test: rc=$? $(grep 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out/racecheck-gemm.log" | tail -1)"
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/cuda_arch_test" \
    --gtest_filter='*qwen2*' >> "$out/sanitizer.log" 2>&1
  note "memcheck cuda_arch_test qwen2: rc=$? $(grep 'ERROR SUMMARY' "$out/sanitizer.log" | tail -1)"
fi
if has memserve; then
  for type in ${MEMSERVE_TYPES:-q4_0 q4_1 q8_0 q4_K q5_K q6_K}; do
    preset=${MEMSERVE_PRESET:-llama-3.2-1b}
    make_model "memserve-$preset-$type" --preset "$preset" --layers 2 --type "$type" --context 4096
    log=$out/memserve-$type.log
    timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/flashserve" \
      --model "$models/memserve-$preset-$type.gguf" --device cuda --weights native \
      --kv_cache_tokens 65536 --host 127.0.0.1 --port 50190 --metrics-port -1 --http-port 0 \
      > "$log" 2>&1 &
    sanitizer=$!
    for _ in $(seq 240); do
      "$bin/flashserve-cli" --target 127.0.0.1:50190 health > /dev/null 2>&1 && break
      kill -0 "$sanitizer" 2> /dev/null || break
      sleep 1
    done
    sent=0
    for load in "24 48 300" "2 2 700"; do
      read -r conc reqs prompt <<< "$load"
      sent=$((sent + reqs))
      "$bin/flashserve-cli" --target 127.0.0.1:50190 load --concurrency "$conc" \
        --requests "$reqs" --prompt-tokens "$prompt" --max-tokens 8 --ignore-eos \
        --temperature 0 >> "$out/memserve-$type.load.txt" 2>&1
    done
    pkill -TERM -x flashserve
    wait "$sanitizer"
    note "memserve $type: rc=$? $(grep 'ERROR SUMMARY' "$log" | tail -1)" \
      "ok $(grep -o 'succeeded [0-9]*' "$out/memserve-$type.load.txt" | awk '{n += $2} END {print n + 0}')/$sent"
  done
fi
if has quantbench; then
  timeout 300 "$bin/quant_gemv_bench" > "$out/quant_gemv_bench.md" 2> "$out/quant_gemv_bench.err"
  note "quant_gemv_bench: rc=$? ($(wc -l < "$out/quant_gemv_bench.md") lines)"
  timeout 400 "$bin/quant_gemm_bench" ${QUANT_GEMM_BENCH_ARGS:-} > "$out/quant_gemm_bench.md" 2> "$out/quant_gemm_bench.err"
  note "quant_gemm_bench: rc=$? ($(wc -l < "$out/quant_gemm_bench.md") lines)"
fi
if has gemmprofile; then
  # Where the quantized GEMM's time goes at 128 and 256 tokens (bench/gemm/NOTES.md, twentieth
  # session: stream-K and x-sharing pairs both failed to move the 8B's gate_up, so measure what
  # bounds it before the next schedule): L2 and DRAM throughput, the tensor pipe's share, the
  # warps' stall reasons, of one warm launch of the wgmma kernel per m.
  for m in ${GEMM_PROFILE_MS:-256 128}; do
    # The clocks as the server sees them (ncu would lock them at base otherwise), sampled
    # during a plain run of the same bench: is the power cap (700 W) what sets the pace?
    args=(--formats=Q4_K --ms="$m" "--shapes=${GEMM_PROFILE_SHAPE:-8B gate_up}")
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active \
      --format=csv -lms 20 > "$out/smi_gemm_m$m.csv" 2>&1 &
    smi=$!
    timeout 60 "$bin/quant_gemm_bench" "${args[@]}" > "$out/qgb_gemm_m$m.md" 2>&1
    kill $smi
    timeout 150 ncu --clock-control none --kernel-name regex:quant_gemm_wgmma_ws_kernel --launch-skip 4 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section LaunchStats --section Occupancy \
      --metrics lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,dram__bytes_read.sum.per_second,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
      "$bin/quant_gemm_bench" "${args[@]}" > "$out/ncu_gemm_m$m.txt" 2>&1
    note "gemmprofile m $m: rc=$? $(grep -E 'SM Frequency|Elapsed Cycles|SM Active Cycles|Duration|L2 Cache Throughput|Compute \(SM\) Throughput' "$out/ncu_gemm_m$m.txt" | tr -s ' ' | tr '\n' ';')"
    # The warps' stall reasons of the same launch, and cuBLASLt's kernel for the bf16 weight
    # (the bench's first timed GEMM) under the same unlocked clocks: its SM frequency and
    # cycles beside ours say whether the two differ in clock (power) or in cycles.
    timeout 150 ncu --clock-control none --kernel-name regex:quant_gemm_wgmma_ws_kernel --launch-skip 4 --launch-count 1 \
      --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
      "$bin/quant_gemm_bench" "${args[@]}" > "$out/ncu_stalls_m$m.txt" 2>&1
    timeout 150 ncu --clock-control none --kernel-name regex:nvjet --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section LaunchStats \
      "$bin/quant_gemm_bench" "${args[@]}" > "$out/ncu_cublas_m$m.txt" 2>&1
    note "gemmprofile cuBLASLt m $m: rc=$? $(grep -E 'nvjet|SM Frequency|Elapsed Cycles|SM Active Cycles|Duration|Grid Size' "$out/ncu_cublas_m$m.txt" | tr -s ' ' | cut -c1-120 | tr '\n' ';')"
  done
fi
if has decodestep; then
  for spec in ${DECODE_MODELS:-llama-3.2-1b:q4_k_m llama-3.1-8b:q4_k_m}; do
    preset=${spec%%:*} ftype=${spec##*:}
    make_model "$preset-$ftype" --preset "$preset" "$(type_flag "$ftype")" "$ftype" --context 8192
    timeout 300 "$bin/flashserve-bench-decode-step" --model "$models/$preset-$ftype.gguf" \
      --context 192 --batch-sizes 64,256 --weights native,bf16 --graphs on \
      --max-batch-tokens 2048 --steps 10 --trace-steps 2 --kernels-at 64 \
      > "$out/decode-step-$preset-$ftype.md" 2> "$out/decode-step-$preset-$ftype.err"
    note "decode step $preset $ftype: rc=$? p50 ms (native 64, 256, bf16 64, 256):" \
      "$(grep -E '^\| (64|256) \| [0-9]' "$out/decode-step-$preset-$ftype.md" | cut -d'|' -f3 | tr -d ' ' | tr '\n' ' ')"
  done
fi
if has serve; then
  bundle=$(dirname "$bin")
  for spec in ${SERVE_MODELS:-llama-3.2-1b:q4_k_m}; do
    preset=${spec%%:*} ftype=${spec##*:}
    make_model "$preset-$ftype" --preset "$preset" "$(type_flag "$ftype")" "$ftype" --context 8192
    for w in native bf16; do
      CONCURRENCY=${SERVE_CONCURRENCY:-"1 64"} REQUESTS_PER_STREAM=${REQUESTS_PER_STREAM:-8} \
        TTFT_REQUESTS=8 PEAK_HBM_GBPS=4800 LABEL="$preset $ftype --weights $w" \
        SERVER_ARGS="--max-num-seqs 256 --max-waiting 1024 --noprefix_caching --weights $w" \
        timeout 600 bench/serving/run.sh "$bundle" "$models/$preset-$ftype.gguf" "$out/serve-$preset-$ftype-$w" \
        > "$out/serve-$preset-$ftype-$w.log" 2>&1
      note "serve $preset $ftype $w: rc=$?"
      # The tables (titles, headers, data rows): OUT_DIR holds more files than a GPU call
      # brings back, so summary.txt carries the figures.
      grep -E '^(###|\| [0-9]|\| concurrency)' "$out/serve-$preset-$ftype-$w/results.md" 2>/dev/null | head -16 | tee -a "$summary"
      grep -m1 "model loaded\|cuda:" "$out/serve-$preset-$ftype-$w"/server*.log 2>/dev/null | cut -c1-300 | tee -a "$summary"
    done
  done
fi
note "done $(date -u +%FT%TZ)"
