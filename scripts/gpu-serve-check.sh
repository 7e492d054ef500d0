#!/usr/bin/env bash
# The GPU check of the served model, for the GPU machine (no build there: bundled binaries).
#
#   scripts/gpu-serve-check.sh OUT_DIR [stage...]
#     stages: info kernels runner e2e python serve load trace sanitize   (default: all)
#
# Needs BIN_DIR (default .gpu/bin) with flashserve, flashserve-cli, flashserve-canned-server
# (e2e_server_test's CannedLoadE2E runs the load client against it), flashserve-stall-server
# (SoakE2E's stalled-engine test: tests/e2e/server/stall_server.cc), layers_cuda_test,
# attention_cuda_test, cuda_runner_test and e2e_server_test, their libraries in .gpu/lib
# (made by scripts/gpu-bundle.sh), and MODEL (default
# models/SmolLM2-135M-Instruct.Q4_1.gguf). Every stage is bounded in time; results go to
# OUT_DIR/summary.txt plus one log per stage.
#   kernels   layer, sampling and attention kernel tests against the CPU references
#   runner    the CUDA runner against the CPU runner (logits layer by layer, greedy, batching)
#   e2e       the C++ e2e suites against a server that puts the model on the GPU (--device auto)
#   python    the Python client suite against the same (grpcio/grpcio-tools wheels in .whl/,
#             installed into /tmp/site: the GPU machine has no registry)
#   serve     a server on the GPU: a greedy generation, /metrics' attention and step figures
#   trace     the kernels one request runs (ncu kernel list)
#   sanitize  compute-sanitizer memcheck over a short serving run
#   load      flashserve-cli load at 1, 16, 64, 256 streams (128-token prompts -> 128 tokens)
set -uo pipefail
out=${1:?usage: $0 OUT_DIR [stage...]}
shift
stages=${*:-info kernels runner e2e python serve load trace sanitize}
bin=${BIN_DIR:-.gpu/bin}
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
export LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FLASHSERVE_TEST_MODEL=$model FLASHSERVE_E2E_MODEL=$model
export FLASHSERVE_E2E_SERVER_BIN=$bin/flashserve FLASHSERVE_E2E_CLI_BIN=$bin/flashserve-cli
export FLASHSERVE_E2E_CANNED_SERVER_BIN=$bin/flashserve-canned-server
export FLASHSERVE_E2E_STALL_SERVER_BIN=$bin/flashserve-stall-server
mkdir -p "$out"
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }
has() { [[ " $stages " == *" $1 "* ]]; }
gtest_counts() { grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$1" | sort | uniq -c | tr '\n' ' '; }
cli() { "$bin/flashserve-cli" --target "127.0.0.1:$port" "$@"; }
port=50150
metrics_port=50151

# Starts the server (optionally under a wrapper such as compute-sanitizer) on fresh ports and
# waits for SERVING; its log goes to $1.
start_server() {
  local log=$1; shift
  port=$((port + 2)); metrics_port=$((metrics_port + 2))
  # Its own process group, so that stop_server reaches a wrapper's child too.
  setsid "$@" "$bin/flashserve" --model "$model" --device auto --host 127.0.0.1 --port $port \
    --metrics-port $metrics_port --http-port 0 ${SERVER_ARGS:-} > "$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 ${START_WAIT:-120}); do
    cli health > /dev/null 2>&1 && return 0
    kill -0 $server_pid 2>/dev/null || return 1
    sleep 1
  done
  return 1
}
# SIGTERM to the server (a wrapper such as compute-sanitizer or ncu then finishes its report
# and exits), then waits up to 120 s until every process of the group is gone and has
# released the GPU.
stop_server() {
  pkill -TERM -g $server_pid -x flashserve 2>/dev/null || kill -TERM -- -$server_pid 2>/dev/null
  for _ in $(seq 1 240); do kill -0 -- -$server_pid 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- -$server_pid 2>/dev/null
  wait $server_pid 2>/dev/null
}
# Engine step time and count from the server's /metrics (the server-side view of a run).
# Samples carry labels (at least the constant model label): key them by the bare name.
step_metrics() {
  curl -s "127.0.0.1:$metrics_port/metrics" | awk '/^flashserve_engine_step_seconds_(sum|count)[{ ]/ {n=$1; sub(/\{.*/, "", n); v[n]=$NF}
    END {if (v["flashserve_engine_step_seconds_count"] > 0) printf "server: %d steps, %.2f ms per step\n",
      v["flashserve_engine_step_seconds_count"], 1e3 * v["flashserve_engine_step_seconds_sum"] / v["flashserve_engine_step_seconds_count"]}'
}

note "gpu-serve-check $(date -u +%FT%TZ) stages: $stages commit: ${GIT_COMMIT:-unknown} model: $model"
if has info; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee -a "$summary"
fi
if has kernels; then
  timeout 120 "$bin/layers_cuda_test" > "$out/kernels.log" 2>&1
  note "layers_cuda_test: rc=$? $(gtest_counts "$out/kernels.log")"
  timeout 300 "$bin/attention_cuda_test" >> "$out/kernels.log" 2>&1
  note "attention_cuda_test: rc=$? $(gtest_counts "$out/kernels.log")"
  grep -E '^\[  FAILED  \]|Failure' "$out/kernels.log" | head -20 | tee -a "$summary"
fi
if has runner; then
  timeout 300 "$bin/cuda_runner_test" > "$out/runner.log" 2>&1
  note "cuda_runner_test: rc=$? $(gtest_counts "$out/runner.log")"
  grep -E '^\[cuda runner\]|^\[  FAILED  \]|Failure' "$out/runner.log" | head -60 | tee -a "$summary"
fi
if has e2e; then
  timeout 400 "$bin/e2e_server_test" > "$out/e2e.log" 2>&1
  note "e2e_server_test: rc=$? $(gtest_counts "$out/e2e.log")"
  grep -E '^\[  FAILED  \]|Failure' "$out/e2e.log" | head -20 | tee -a "$summary"
fi
if has python; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > "$out/python.log" 2>&1
  PYTHONPATH=/tmp/site timeout 300 python3 tests/e2e/python/test_generation.py \
    --server "$bin/flashserve" >> "$out/python.log" 2>&1
  note "python e2e: rc=$? $(grep -E '^(Ran|OK|FAILED)' "$out/python.log" | tr '\n' ' ')"
fi
if has serve; then
  if start_server "$out/serve.log"; then
    grep -E 'model loaded|cuda|cpu' "$out/serve.log" | head -5 | tee -a "$summary"
    cli generate --prompt "The capital of France is" --max-tokens 8 --temperature 0 2>&1 | tee -a "$summary"
    cli generate --prompt "Write a haiku about the sea." --max-tokens 32 --temperature 0.8 \
      --top-p 0.95 --seed 7 2>&1 | tee -a "$summary"
    curl -s "127.0.0.1:$metrics_port/metrics" > "$out/metrics.txt"
    grep -E '^flashserve_(attention|forward|engine_step|build_info)' "$out/metrics.txt" | head -40 | tee -a "$summary"
    stop_server
  else
    note "serve: server did not start"; tail -20 "$out/serve.log" | tee -a "$summary"
  fi
fi
if has load; then
  if start_server "$out/load_server.log"; then
    for c in 1 16 64 256; do
      n=$(( c < 8 ? 8 : 2 * c ))
      note "== load: concurrency $c, $n requests, 128-token prompts -> 128 tokens, greedy, ignore EOS"
      timeout 120 "$bin/flashserve-cli" --target 127.0.0.1:$port load --concurrency $c \
        --requests $n --prompt-tokens 128 --max-tokens 128 --ignore-eos --temperature 0 2>&1 \
        | tee -a "$summary"
      note "$(step_metrics) (cumulative)"
    done
    note "== load: concurrency 64, sampled (temperature 0.8, top-p 0.95, top-k 50)"
    timeout 120 "$bin/flashserve-cli" --target 127.0.0.1:$port load --concurrency 64 \
      --requests 128 --prompt-tokens 128 --max-tokens 128 --ignore-eos --temperature 0.8 \
      --top-p 0.95 --top-k 50 2>&1 | tee -a "$summary"
    curl -s "127.0.0.1:$metrics_port/metrics" > "$out/metrics_after_load.txt"
    stop_server
  else
    note "load: server did not start"
  fi
fi
if has trace; then
  # ncu lists every kernel launch of one short request (prefill + 3 decode steps). The server
  # runs them eagerly (--nocuda_graphs: the same kernels and padded shapes as the graphs):
  # ncu's per-kernel profiling of our decode graphs, whose kernels wait on each other
  # through programmatic dependent launch, failed with LaunchFailed (H200, ncu 2025.3).
  if SERVER_ARGS="${SERVER_ARGS:-} --nocuda_graphs" start_server "$out/trace_server.log" \
      timeout 300 ncu --clock-control none \
      --target-processes all --metrics gpu__time_duration.sum --csv --log-file "$out/ncu.csv"; then
    cli generate --prompt "The capital of France is" --max-tokens 4 --temperature 0 > /dev/null 2>&1
    stop_server
    python3 - "$out/ncu.csv" > "$out/kernels_seen.txt" <<'PY'
import csv, sys, collections
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
rows = list(csv.reader(lines[start:]))
name, value = rows[0].index("Kernel Name"), rows[0].index("Metric Value")
count, ns = collections.Counter(), collections.Counter()
for r in rows[1:]:
    k = r[name].split("(")[0]
    count[k] += 1
    ns[k] += float(r[value].replace(",", ""))
for k, n in count.most_common():
    print(f"{n:6d} launches {ns[k] / 1e3:9.1f} us  {k}")
PY
    note "kernels launched while serving one request (ncu):"; tee -a "$summary" < "$out/kernels_seen.txt"
  else
    note "trace: ncu run did not start"; tail -5 "$out/trace_server.log" | tee -a "$summary"
  fi
fi
if has sanitize; then
  if START_WAIT=300 start_server "$out/sanitize.log" compute-sanitizer --tool memcheck \
      --error-exitcode 9; then
    cli generate --prompt "The capital of France is" --max-tokens 8 --temperature 0 > /dev/null 2>&1
    cli generate --prompt "Tell me about the sea." --max-tokens 8 --temperature 0.7 --top-k 40 \
      --top-p 0.9 --repetition-penalty 1.2 --logprobs 3 > /dev/null 2>&1
    stop_server
    note "sanitize (memcheck, serving 2 requests): $(grep -E 'ERROR SUMMARY' "$out/sanitize.log" | tail -1)"
  else
    note "sanitize: server under compute-sanitizer did not start"; tail -5 "$out/sanitize.log" | tee -a "$summary"
  fi
fi
note "done $(date -u +%FT%TZ)"
tar czf "$out/logs.tgz" -C "$out" --exclude logs.tgz --exclude summary.txt . 2>/dev/null
find "$out" -mindepth 1 ! -name logs.tgz ! -name summary.txt -delete
