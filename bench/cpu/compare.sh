#!/usr/bin/env bash
# Runs flashserve's CPU backend against llama.cpp's llama-bench on the same GGUF file, in
# alternating rounds on the same machine (so that a drift of the machine's speed hits both):
#   bench/cpu/compare.sh [MODEL] [THREADS] [ROUNDS]
# defaults: models/SmolLM2-135M-Instruct.Q4_1.gguf, 2 threads, 3 rounds. Each round runs
#   llama-bench -m MODEL -t THREADS -p 512 -n 128 -r 3        (the peer, bench/cpu/build_llama_cpp.sh)
#   flashserve-cpu-bench --model MODEL --threads THREADS       (quantized products, the default)
#   flashserve-cpu-bench ... --weights bf16 --gen-tokens 32    (the fp32 reference = the old default)
# and prints their tokens/s lines; bench/cpu/RESULTS.md has the figures of one run. Builds
# what it needs first (the peer under /tmp, flashserve's bench in build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${2:-2}
ROUNDS=${3:-3}
PEER=$(bench/cpu/build_llama_cpp.sh)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA=OFF >/dev/null
cmake --build build -j2 --target flashserve-cpu-bench >/dev/null
OURS=build/bin/flashserve-cpu-bench
echo "date: $(date -u +%F\ %T) UTC; commit: $(git rev-parse --short HEAD)"
lscpu | grep -E '^(Model name|CPU\(s\)|Flags):' | sed 's/^/cpu: /'
for round in $(seq "$ROUNDS"); do
  echo "--- round $round"
  "$PEER" -m "$MODEL" -t "$THREADS" -p 512 -n 128 -r 3 | grep -E 'pp512|tg128'
  "$OURS" --model "$MODEL" --threads "$THREADS" --repetitions 3 | sed 's/^/native: /'
  "$OURS" --model "$MODEL" --threads "$THREADS" --repetitions 3 --weights bf16 --gen-tokens 32 |
    sed 's/^/fp32 reference: /'
done
