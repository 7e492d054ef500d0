#!/usr/bin/env bash
# The OpenAI HTTP API beside gRPC on one server, with the bundled binaries only (issue 22):
#
#   bench/serving/http_load.sh BUNDLE_DIR MODEL_PATH OUT_DIR
#
# Starts `flashserve --model MODEL_PATH --device auto` from BUNDLE_DIR (bin/flashserve,
# bin/flashserve-cli, lib/: scripts/gpu-bundle.sh) with its HTTP port, waits until it is
# SERVING, warms it up, then at each concurrency, closed-loop, PROMPT_TOKENS -> NEW_TOKENS
# (EOS ignored, greedy), REQUESTS_PER_STREAM requests per stream (at least MIN_REQUESTS):
#   grpc      flashserve-cli load (our gRPC client: C++, one callback reactor per stream)
#   guidellm  guidellm (PyPI, the third-party OpenAI-API load generator; NOTES.md says why
#             this one) against /v1/completions, streaming, synthetic text of PROMPT_TOKENS
#             tokens by the model's own tokenizer (read from MODEL_PATH: no hub)
#   aiperf    with HTTP_CLIENT=aiperf or both: NVIDIA's aiperf (PyPI, the second third-party
#             generator; NOTES.md "aiperf (prepared, 2026-12-02)"), `aiperf profile` against
#             /v1/completions, streaming, its synthetic prompts of PROMPT_TOKENS tokens by the
#             same tokenizer, max_tokens NEW_TOKENS with ignore_eos (--extra-inputs)
#   raw       with RAW=1 (default), bench/serving/openai_sse_load.py: our thin asyncio SSE
#             client sending PROMPT_TOKENS token ids, to tell the HTTP server's cost from
#             guidellm's own (a Python client at 100k tokens/s may be the limit)
# and writes OUT_DIR/results.md: output tokens/s and TTFT p50 of each, HTTP/gRPC ratios and
# the issue's musts (HTTP >= 80 % of gRPC tokens/s at 64 and 256 streams; TTFT p50 within
# 1 ms of gRPC at 1 stream), PASS or FAIL. Raw outputs (cli, guidellm JSON and log, aiperf
# artifact folders and logs) beside it.
# Then, on the same server, with E2E=1 (default): tests/e2e/python/test_openai_http.py --url
# (the `openai` client suite); with IDLE=1 (default): tests/e2e/python/
# test_http_idle_streams.py (1000 idle SSE streams, its own server from the bundle).
#
# HTTP_CLIENT=guidellm (default) | aiperf | both: the third-party generator(s) run at each
# concurrency (both: guidellm, then aiperf, each alone against the server).
# Python: PYTHON (default python3) must import transformers and gguf (the tokenizer), the
# generator(s) and, with E2E=1, openai. WHEELS (default .whl: scripts/fetch-httpload-wheels.sh,
# SET=aiperf or both for aiperf's) are installed into SITE_DIR (default
# /tmp/flashserve-httpload-site) first when one of them is not importable (the GPU machine
# reaches no registry). The tokenizer folder goes to TOKENIZER_DIR (default
# /tmp/flashserve-httpload-tokenizer): neither is worth bringing back with OUT_DIR.
# Environment (defaults): CONCURRENCY="1 16 64 256" PROMPT_TOKENS=128 NEW_TOKENS=128
#   REQUESTS_PER_STREAM=4 MIN_REQUESTS=16 DEVICE=auto PORT=50161 HTTP_PORT=50162
#   METRICS_PORT=50163 HEALTH_TIMEOUT=600 LOAD_TIMEOUT=150 (each client run) RAW=1 E2E=1 IDLE=1
#   SERVER_ARGS="--max-num-seqs 256 --max-waiting 1024 --noprefix_caching"
# GUIDELLM_STREAMS_PER_PROCESS=16: guidellm is one Python client whose per-token work caps
# what one process (with its worker processes) keeps in flight — 56 of 64 streams, 117-181 of
# 256 on the H200 (NOTES.md) — so a concurrency past 16 runs as several guidellm processes
# side by side, as one would scale any client, counted together over their whole span.
# guidellm's own settings pass through the environment, e.g. GUIDELLM__MAX_WORKER_PROCESSES
# (each process's worker processes, default 10).
# aiperf: one `aiperf profile` process per run that spawns its own services (ZMQ between
# them): AIPERF_WORKERS (its --workers-max: the worker processes that send the requests and
# parse the SSE streams; default aiperf's own min(concurrency, 0.75 x CPUs - 1, 32), i.e. 11
# on 16 CPUs), AIPERF_RECORD_PROCESSORS (its --record-processors: the processes that turn
# responses into metrics; default aiperf's, 1-2 per 8 workers), AIPERF_SERVER_TOKEN_COUNT=1
# (default: --use-server-token-count, output tokens counted from the server's usage chunk,
# not by re-tokenizing every response: ~3x less client CPU a token here; 0 tokenizes),
# AIPERF_ARGS (more flags, appended). aiperf reads the tokenizer in offline mode from a
# Hugging Face cache only, so the tokenizer folder is also laid out as a cache of the repo
# id flashserve/tokenizer under TOKENIZER_DIR-hfcache (HF_HUB_CACHE for aiperf alone).
# AIPERF_SERVICE_REGISTRATION_TIMEOUT / _MAX_ATTEMPTS (default 120 / 120 here; aiperf's
# own 30 / 10 fail on a loaded 2-core machine) pass through to aiperf.
# SERVER_CPUS / CLIENT_CPUS (taskset lists, e.g. 0-5 / 6-15; default unpinned): the server on
# its own cores and every client (gRPC, guidellm, raw) on the others, so that a client's
# Python processes do not take the server's engine thread's core (the usual separation of
# system under test and load generator; both APIs are measured under the same split).
# Exit status: 0 when every run and test succeeded (musts are reported, not the status), 1
# otherwise, 2 bad usage.
set -euo pipefail

usage() { echo "usage: $0 BUNDLE_DIR MODEL_PATH OUT_DIR" >&2; exit 2; }
[[ $# -eq 3 ]] || usage
bundle=$(cd "$1" && pwd) || usage
model=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
mkdir -p "$3"
out=$(cd "$3" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
server="$bundle/bin/flashserve"
cli="$bundle/bin/flashserve-cli"
for exe in "$server" "$cli"; do
  [[ -x $exe ]] || { echo "$0: not an executable: $exe" >&2; exit 2; }
done
[[ -f $model ]] || { echo "$0: model file not found: $model" >&2; exit 2; }

CONCURRENCY=${CONCURRENCY:-"1 16 64 256"}
PROMPT_TOKENS=${PROMPT_TOKENS:-128}
NEW_TOKENS=${NEW_TOKENS:-128}
REQUESTS_PER_STREAM=${REQUESTS_PER_STREAM:-4}
MIN_REQUESTS=${MIN_REQUESTS:-16}
DEVICE=${DEVICE:-auto}
PORT=${PORT:-50161}
HTTP_PORT=${HTTP_PORT:-50162}
METRICS_PORT=${METRICS_PORT:-50163}
HEALTH_TIMEOUT=${HEALTH_TIMEOUT:-600}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-150}
GUIDELLM_STREAMS_PER_PROCESS=${GUIDELLM_STREAMS_PER_PROCESS:-16}
HTTP_CLIENT=${HTTP_CLIENT:-guidellm}
case $HTTP_CLIENT in
  guidellm) modules="guidellm" ;;
  aiperf) modules="aiperf" ;;
  both) modules="guidellm, aiperf" ;;
  *) echo "$0: HTTP_CLIENT must be guidellm, aiperf or both, not '$HTTP_CLIENT'" >&2; exit 2 ;;
esac
[[ ${E2E:-1} != 1 ]] || modules+=", openai"
AIPERF_SERVER_TOKEN_COUNT=${AIPERF_SERVER_TOKEN_COUNT:-1}
export AIPERF_SERVICE_REGISTRATION_TIMEOUT=${AIPERF_SERVICE_REGISTRATION_TIMEOUT:-120}
export AIPERF_SERVICE_REGISTRATION_MAX_ATTEMPTS=${AIPERF_SERVICE_REGISTRATION_MAX_ATTEMPTS:-120}
SERVER_ARGS=${SERVER_ARGS:-"--max-num-seqs 256 --max-waiting 1024 --noprefix_caching"}
PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-$root/.whl}
site=${SITE_DIR:-/tmp/flashserve-httpload-site}
tokenizer=${TOKENIZER_DIR:-/tmp/flashserve-httpload-tokenizer}
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Nothing below may reach a hub (the GPU machine reaches nothing; here it must not either).
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
status=0
server_pin=() client_pin=()
[[ -z ${SERVER_CPUS:-} ]] || server_pin=(taskset -c "$SERVER_CPUS")
[[ -z ${CLIENT_CPUS:-} ]] || client_pin=(taskset -c "$CLIENT_CPUS")

if ! "$PYTHON" -c "import $modules, gguf" > /dev/null 2>&1; then
  ls "$WHEELS"/*.whl > /dev/null 2>&1 || { echo "$0: one of $modules, gguf is not importable and $WHEELS has no wheels (scripts/fetch-httpload-wheels.sh)" >&2; exit 2; }
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$WHEELS"/*.whl > "$out/pip.log" 2>&1 || { cat "$out/pip.log" >&2; exit 1; }
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PYTHON" - > "$out/python.txt" 2>&1 <<'PY' || { cat "$out/python.txt" >&2; exit 1; }
import importlib.metadata as m, sys
print("python", sys.version.split()[0])
for name in ("guidellm", "aiperf", "openai", "transformers", "gguf", "datasets", "pydantic", "httpx", "torch"):
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        print(name, "missing")
PY
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname), $(nproc) CPUs"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo none)"
  echo "model: $model ($(stat -c %s "$model") bytes)"
  echo "server: $server $SERVER_ARGS --device $DEVICE; cpus: server ${SERVER_CPUS:-any}, clients ${CLIENT_CPUS:-any}"
  sha256sum "$server" "$cli"
  echo "matrix: concurrency $CONCURRENCY; $PROMPT_TOKENS prompt tokens -> $NEW_TOKENS new tokens, ignore EOS, greedy, $REQUESTS_PER_STREAM requests per stream (at least $MIN_REQUESTS)"
  tr '\n' ' ' < "$out/python.txt"; echo
} > "$out/env.txt"

# The model's tokenizer as a local folder for guidellm's synthetic prompts (transformers
# reads it from the GGUF file: the same vocabulary the server tokenizes with).
"$PYTHON" - "$model" "$tokenizer" > "$out/tokenizer.log" 2>&1 <<'PY' || { cat "$out/tokenizer.log" >&2; exit 1; }
import os, sys
from transformers import AutoTokenizer
path, dest = sys.argv[1:3]
tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
tok.save_pretrained(dest)
print(type(tok).__name__, len(tok), "tokens ->", dest)
PY

server_pid=
stop_server() {
  [[ -n $server_pid ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}
trap stop_server EXIT
# shellcheck disable=SC2086  # SERVER_ARGS is a list of flags
"${server_pin[@]}" "$server" --model "$model" --device "$DEVICE" --host 127.0.0.1 --port "$PORT" \
  --http-port "$HTTP_PORT" --metrics-port "$METRICS_PORT" $SERVER_ARGS > "$out/server.log" 2>&1 &
server_pid=$!
deadline=$((SECONDS + HEALTH_TIMEOUT))
until "$cli" --target "127.0.0.1:$PORT" health > /dev/null 2>&1; do
  kill -0 "$server_pid" 2>/dev/null || { echo "$0: the server exited:" >&2; tail -n 30 "$out/server.log" >&2; exit 1; }
  (( SECONDS < deadline )) || { echo "$0: not SERVING after ${HEALTH_TIMEOUT}s" >&2; exit 1; }
  sleep 1
done
model_name=$("$PYTHON" -c "import json, sys, urllib.request
print(json.load(urllib.request.urlopen(sys.argv[1], timeout=30))['data'][0]['id'])" \
  "http://127.0.0.1:$HTTP_PORT/v1/models")
if [[ $HTTP_CLIENT != guidellm ]]; then
  # aiperf (0.13.0) loads a tokenizer in offline mode through snapshot_download(
  # local_files_only=True) only, a folder path fails: the same files as the Hugging Face
  # cache of a repo id (refs/main -> the snapshot's name; the snapshot holds the files).
  hf_repo="${tokenizer}-hfcache/hub/models--flashserve--tokenizer"
  snapshot=0000000000000000000000000000000000000000
  rm -rf "${tokenizer}-hfcache"
  mkdir -p "$hf_repo/refs" "$hf_repo/snapshots/$snapshot"
  printf %s "$snapshot" > "$hf_repo/refs/main"
  cp "$tokenizer"/* "$hf_repo/snapshots/$snapshot/"
fi
echo "serving $model_name: gRPC 127.0.0.1:$PORT, HTTP 127.0.0.1:$HTTP_PORT"

grpc_load() {  # grpc_load CONCURRENCY REQUESTS OUTPUT
  "${client_pin[@]}" timeout "$LOAD_TIMEOUT" "$cli" --target "127.0.0.1:$PORT" load --concurrency "$1" \
    --requests "$2" --prompt-tokens "$PROMPT_TOKENS" --max-tokens "$NEW_TOKENS" --ignore-eos \
    --temperature 0 > "$3" 2>&1
}
guidellm_one() {  # guidellm_one STREAMS REQUESTS STEM: one guidellm process
  "${client_pin[@]}" timeout "$LOAD_TIMEOUT" "$PYTHON" -m guidellm run \
    --backend "kind=openai_http,target=http://127.0.0.1:$HTTP_PORT,model=$model_name,request_format=/v1/completions" \
    --profile "kind=concurrent,streams=$1" \
    --data "kind=synthetic_text,prompt_tokens=$PROMPT_TOKENS,output_tokens=$NEW_TOKENS" \
    --tokenizer "kind=hf_auto,model=$tokenizer" \
    --constraint "kind=max_requests,count=$2" \
    --output "kind=json,path=$3.json" --disable-progress > "$3.log" 2>&1
}
# guidellm_load CONCURRENCY REQUESTS STEM: ceil(CONCURRENCY / GUIDELLM_STREAMS_PER_PROCESS)
# guidellm processes side by side, the streams and requests split evenly, writing
# STEM_s<i>.json and .log; prints the comma-separated JSON list for http_load_summary.py,
# which counts their output tokens over the window in which all of them ran (each starts its
# benchmark after its own start-up, up to ~7 s apart under load: runs must be long enough
# for a common window of some seconds, REQUESTS_PER_STREAM >= 32 at 64-256 streams).
guidellm_load() {
  local c=$1 n=$2 stem=$3 per=$GUIDELLM_STREAMS_PER_PROCESS
  local shards=$(( (c + per - 1) / per )) i pids=() files=() rc=0
  for ((i = 0; i < shards; i++)); do
    # Shard i gets an even share of the streams and requests (the first ones one more).
    local streams=$(( c / shards + (i < c % shards ? 1 : 0) ))
    local requests=$(( n / shards + (i < n % shards ? 1 : 0) ))
    guidellm_one "$streams" "$requests" "${stem}_s$i" &
    pids+=($!)
    files+=("${stem}_s$i.json")
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { rc=1; tail -n 20 "${stem}_s$i.log" >&2; }
  done
  (IFS=,; echo "${files[*]}")
  return $rc
}
aiperf_load() {  # aiperf_load CONCURRENCY REQUESTS STEM: writes STEM/ (its artifacts), STEM.log
  local extra=()
  [[ -z ${AIPERF_WORKERS:-} ]] || extra+=(--workers-max "$AIPERF_WORKERS")
  [[ -z ${AIPERF_RECORD_PROCESSORS:-} ]] || extra+=(--record-processors "$AIPERF_RECORD_PROCESSORS")
  [[ $AIPERF_SERVER_TOKEN_COUNT != 1 ]] || extra+=(--use-server-token-count)
  rm -rf "$3"
  # shellcheck disable=SC2086  # AIPERF_ARGS is a list of flags
  HF_HUB_CACHE="${tokenizer}-hfcache/hub" "${client_pin[@]}" timeout "$LOAD_TIMEOUT" \
    "$PYTHON" -m aiperf profile --model "$model_name" --url "http://127.0.0.1:$HTTP_PORT" \
    --endpoint-type completions --streaming --tokenizer flashserve/tokenizer \
    --isl "$PROMPT_TOKENS" --isl-stddev 0 --osl "$NEW_TOKENS" --extra-inputs ignore_eos:true \
    --concurrency "$1" --request-count "$2" --random-seed 1 --ui none --no-server-metrics \
    --no-gpu-telemetry --artifact-dir "$3" "${extra[@]}" ${AIPERF_ARGS:-} > "$3.log" 2>&1
}
raw_load() {  # raw_load CONCURRENCY REQUESTS OUTPUT
  "${client_pin[@]}" timeout "$LOAD_TIMEOUT" "$PYTHON" "$here/openai_sse_load.py" "$HTTP_PORT" "$1" "$2" \
    "$NEW_TOKENS" "$PROMPT_TOKENS" > "$3" 2>&1
}

: > "$out/log_ranges.txt"  # CLIENT CONCURRENCY FIRST LAST: each run's server.log lines
echo "warm-up (gRPC and HTTP)"
grpc_load 1 2 "$out/warmup_grpc.txt" || { cat "$out/warmup_grpc.txt" >&2; exit 1; }
# guidellm failing here (its wheels against the machine's packages) still leaves the rest.
if [[ $HTTP_CLIENT != aiperf ]]; then
  guidellm_one 1 2 "$out/warmup_guidellm" || { status=1; tail -n 30 "$out/warmup_guidellm.log" >&2; }
fi
if [[ $HTTP_CLIENT != guidellm ]]; then
  aiperf_load 1 2 "$out/warmup_aiperf" || { status=1; tail -n 30 "$out/warmup_aiperf.log" >&2; }
fi
args=()
summary_status=1  # until a table is written
for c in $CONCURRENCY; do
  n=$((c * REQUESTS_PER_STREAM > MIN_REQUESTS ? c * REQUESTS_PER_STREAM : MIN_REQUESTS))
  echo "concurrency $c: $n requests each: gRPC, ${HTTP_CLIENT/both/guidellm, aiperf}$([[ ${RAW:-1} == 1 ]] && echo ", raw SSE")"
  mark=$(wc -l < "$out/server.log")
  grpc_load "$c" "$n" "$out/grpc_c$c.txt" || { status=1; tail -n 5 "$out/grpc_c$c.txt"; }
  sleep 0.2; echo "grpc $c $mark $(wc -l < "$out/server.log")" >> "$out/log_ranges.txt"
  guidellm_files=
  if [[ $HTTP_CLIENT != aiperf ]]; then
    mark=$(wc -l < "$out/server.log")
    guidellm_files=$(guidellm_load "$c" "$n" "$out/guidellm_c$c") || status=1
    sleep 0.2; echo "http $c $mark $(wc -l < "$out/server.log")" >> "$out/log_ranges.txt"
  fi
  if [[ $HTTP_CLIENT != guidellm ]]; then
    mark=$(wc -l < "$out/server.log")
    aiperf_load "$c" "$n" "$out/aiperf_c$c" || { status=1; tail -n 20 "$out/aiperf_c$c.log"; }
    sleep 0.2; echo "aiperf $c $mark $(wc -l < "$out/server.log")" >> "$out/log_ranges.txt"
    args+=(--aiperf "$c:$out/aiperf_c$c/profile_export_aiperf.json")
  fi
  args+=(--run "$c:$out/grpc_c$c.txt:$guidellm_files")
  if [[ ${RAW:-1} == 1 ]]; then
    mark=$(wc -l < "$out/server.log")
    raw_load "$c" "$n" "$out/raw_c$c.txt" || { status=1; tail -n 5 "$out/raw_c$c.txt"; }
    sleep 0.2; echo "raw $c $mark $(wc -l < "$out/server.log")" >> "$out/log_ranges.txt"
    args[-1]+=":$out/raw_c$c.txt"
  fi
  summary_status=0  # results.md after every concurrency: a run cut short still leaves a table
  "$PYTHON" "$here/http_load_summary.py" --prompt-tokens "$PROMPT_TOKENS" \
    --new-tokens "$NEW_TOKENS" --env "$out/env.txt" --server-log "$out/server.log" \
    --log-ranges "$out/log_ranges.txt" "${args[@]}" > "$out/results.md" || summary_status=1
done
(( summary_status == 0 )) || status=1
cat "$out/results.md"

if [[ ${E2E:-1} == 1 ]]; then
  echo "e2e: tests/e2e/python/test_openai_http.py against this server"
  timeout 300 "$PYTHON" "$root/tests/e2e/python/test_openai_http.py" \
    --url "http://127.0.0.1:$HTTP_PORT" --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics" \
    --server-log "$out/server.log" > "$out/e2e_openai_http.log" 2>&1 || status=1
  grep -E '^(Ran|OK|FAILED)' "$out/e2e_openai_http.log" | sed 's/^/e2e openai_http: /' | tee -a "$out/results.md"
fi
stop_server

if [[ ${IDLE:-1} == 1 ]]; then
  echo "idle streams: tests/e2e/python/test_http_idle_streams.py (its own server)"
  timeout 300 "$PYTHON" "$root/tests/e2e/python/test_http_idle_streams.py" --server "$server" \
    --model "$model" --device "$DEVICE" > "$out/idle_streams.log" 2>&1 || status=1
  grep -E '^(idle|OK|FAILED|skipped)' "$out/idle_streams.log" | sed -E 's/^(OK|FAILED|skipped)/idle streams: \1/' | tee -a "$out/results.md"
fi
exit "$status"
