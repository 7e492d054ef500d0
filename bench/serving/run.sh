#!/usr/bin/env bash
# The serving load matrix on one machine, with the bundled binaries only (nothing is built):
#
#   bench/serving/run.sh BUNDLE_DIR MODEL_PATH OUT_DIR
#
# BUNDLE_DIR holds bin/flashserve and bin/flashserve-cli (and bin/flashserve-canned-server
# for CANNED=1) and lib/ (scripts/gpu-bundle.sh makes it). Starts `flashserve --model
# MODEL_PATH --device auto` on localhost, waits until it is SERVING, then for each concurrency
# runs `flashserve-cli load` closed-loop: exactly PROMPT_TOKENS prompt token ids -> exactly
# NEW_TOKENS new tokens (EOS ignored, greedy), REQUESTS_PER_STREAM requests per stream. Around
# each load it scrapes /metrics and reads the server's CPU time (/proc/PID/stat). Writes to
# OUT_DIR: results.md (the tables), load_c<N>.txt (raw client output + "server cpu: S s"),
# load_c<N>.{before,after}.prom, load_c<N>.smi.csv (the GPU's SM clock, power and clock-event
# reasons every 100 ms during the load, where nvidia-smi runs), server*.log, server*.info.txt (flashserve-cli info) and
# env.txt (binaries' sha256, model, GPU, flags).
#
# Environment (defaults): CONCURRENCY="1 16 64 256" PROMPT_TOKENS=128 NEW_TOKENS=128
#   REQUESTS_PER_STREAM=4 DEVICE=auto PORT=50151 METRICS_PORT=50152 HEALTH_TIMEOUT=900
#   SERVER_ARGS="--max-num-seqs 256 --max-waiting 1024 --noprefix_caching" (appended to the
#   server's flags; the prefix cache is off because every request sends the same prompt ids)
#   LABEL (the table's title; default: the model's file name)
#   PEAK_HBM_GBPS: the GPU's peak HBM bandwidth in GB/s (H200: 4800); when set, every table of
#     a CUDA server gets the HBM bandwidth fraction of its engine steps (summarize.py says how)
#   TTFT_PROMPT_TOKENS=512 TTFT_REQUESTS=32 TTFT_NEW_TOKENS=8: the TTFT row, concurrency 1
#     (TTFT_PROMPT_TOKENS=0: none)
#   METRICS_OFF_CHECK=1: the loads at METRICS_CHECK_CONCURRENCY ("1 256") with metrics on and
#     off (--metrics-port -1), METRICS_CHECK_ROUNDS (2) rounds of each, alternating server
#     starts, METRICS_CHECK_REQUESTS_PER_STREAM (8: ~3 s a round at 256 streams; 2 gave
#     rounds of 0.6 s whose +-15 % spread hid the effect) requests per stream and
#     METRICS_CHECK_MIN_REQUESTS (32) at least; the throughput lost to metrics
#   EXTRA_MODELS="PATH:LABEL ...": each served alone and loaded at EXTRA_CONCURRENCY (64)
#   CANNED=1: flashserve-canned-server (the serving path over a runner that answers at once,
#     or after each CANNED_STEP_US ("0 2000") microseconds per step) on MODEL_PATH's tokenizer,
#     loaded at CANNED_CONCURRENCY ("1 64 256"): what client, gRPC and engine sustain alone;
#     its flags CANNED_SERVER_ARGS (default: SERVER_ARGS' default)
#   HF_PEER=1: then run peer_hf.py (HF transformers) on the same model, batch sizes
#   HF_BATCH_SIZES (default 1,256), into hf_peer.md / hf_peer.txt (needs torch, transformers, gguf)
# Exit status: 0 when every load run succeeded with every token, 1 otherwise, 2 bad usage.
set -euo pipefail

usage() { echo "usage: $0 BUNDLE_DIR MODEL_PATH OUT_DIR" >&2; exit 2; }
[[ $# -eq 3 ]] || usage
bundle=$(cd "$1" && pwd) || usage
model=$2
out=$3
here=$(cd "$(dirname "$0")" && pwd)
server="$bundle/bin/flashserve"
cli="$bundle/bin/flashserve-cli"
canned_server="$bundle/bin/flashserve-canned-server"
exes=("$server" "$cli")
[[ ${CANNED:-0} == 1 ]] && exes+=("$canned_server")
for exe in "${exes[@]}"; do
  [[ -x $exe ]] || { echo "$0: not an executable: $exe (BUNDLE_DIR must hold bin/$(basename "$exe"))" >&2; exit 2; }
done
[[ -f $model ]] || { echo "$0: model file not found: $model" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

CONCURRENCY=${CONCURRENCY:-"1 16 64 256"}
PROMPT_TOKENS=${PROMPT_TOKENS:-128}
NEW_TOKENS=${NEW_TOKENS:-128}
REQUESTS_PER_STREAM=${REQUESTS_PER_STREAM:-4}
DEVICE=${DEVICE:-auto}
PORT=${PORT:-50151}
METRICS_PORT=${METRICS_PORT:-50152}
HEALTH_TIMEOUT=${HEALTH_TIMEOUT:-900}
SERVER_ARGS=${SERVER_ARGS:-"--max-num-seqs 256 --max-waiting 1024 --noprefix_caching"}
LABEL=${LABEL:-$(basename "$model")}
PEAK_HBM_GBPS=${PEAK_HBM_GBPS:-}
TTFT_PROMPT_TOKENS=${TTFT_PROMPT_TOKENS:-512}
TTFT_REQUESTS=${TTFT_REQUESTS:-32}
TTFT_NEW_TOKENS=${TTFT_NEW_TOKENS:-8}
METRICS_CHECK_CONCURRENCY=${METRICS_CHECK_CONCURRENCY:-"1 256"}
METRICS_CHECK_ROUNDS=${METRICS_CHECK_ROUNDS:-2}
METRICS_CHECK_MIN_REQUESTS=${METRICS_CHECK_MIN_REQUESTS:-32}
METRICS_CHECK_REQUESTS_PER_STREAM=${METRICS_CHECK_REQUESTS_PER_STREAM:-8}
EXTRA_MODELS=${EXTRA_MODELS:-}
EXTRA_CONCURRENCY=${EXTRA_CONCURRENCY:-64}
CANNED_CONCURRENCY=${CANNED_CONCURRENCY:-"1 64 256"}
CANNED_STEP_US=${CANNED_STEP_US:-"0 2000"}
CANNED_SERVER_ARGS=${CANNED_SERVER_ARGS:-"--max-num-seqs 256 --max-waiting 1024 --noprefix_caching"}
HF_BATCH_SIZES=${HF_BATCH_SIZES:-1,256}
target=127.0.0.1:$PORT
metrics_port=$METRICS_PORT  # of the server running now; -1 when its metrics are off
clk_tck=$(getconf CLK_TCK)
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname), $(nproc) CPUs"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
  echo "model: $model ($(stat -c %s "$model") bytes)"
  echo "server: $server $SERVER_ARGS --device $DEVICE"
  sha256sum "${exes[@]}"
  echo "matrix: concurrency $CONCURRENCY; $PROMPT_TOKENS prompt tokens -> $NEW_TOKENS new tokens, ignore EOS, greedy, $REQUESTS_PER_STREAM requests per stream"
  echo "options: TTFT_PROMPT_TOKENS=$TTFT_PROMPT_TOKENS METRICS_OFF_CHECK=${METRICS_OFF_CHECK:-0} EXTRA_MODELS='$EXTRA_MODELS' CANNED=${CANNED:-0} CANNED_STEP_US='$CANNED_STEP_US' PEAK_HBM_GBPS=$PEAK_HBM_GBPS HF_PEER=${HF_PEER:-0}"
} > "$out/env.txt"

server_pid=
stop_server() {
  [[ -n $server_pid ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}
trap stop_server EXIT

# start_server EXE MODEL LOG METRICS_PORT [FLAGS...]: starts it and waits until SERVING.
start_server() {
  local exe=$1 model_path=$2 log=$3
  metrics_port=$4
  shift 4
  local device_flag=(--device "$DEVICE")
  [[ $exe == "$canned_server" ]] && device_flag=()
  "$exe" --model "$model_path" "${device_flag[@]}" --host 127.0.0.1 --port "$PORT" \
    --metrics-port "$metrics_port" --http-port 0 "$@" > "$log" 2>&1 &
  server_pid=$!
  echo "waiting for $target to be SERVING (server log: $log)"
  local deadline=$((SECONDS + HEALTH_TIMEOUT))
  until "$cli" --target "$target" health > /dev/null 2>&1; do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "$0: the server exited before serving; its log:" >&2
      tail -n 30 "$log" >&2
      exit 1
    fi
    (( SECONDS < deadline )) || { echo "$0: not SERVING after ${HEALTH_TIMEOUT}s" >&2; exit 1; }
    sleep 1
  done
  "$cli" --target "$target" info > "${log%.log}.info.txt" 2>&1 || true
}

scrape() {  # GET /metrics of the running server -> $1 (nothing when its metrics are off)
  (( metrics_port > 0 )) || return 0
  if command -v curl > /dev/null; then
    curl -sf "http://127.0.0.1:$metrics_port/metrics" > "$1" || echo "# scrape failed" > "$1"
  else
    python3 -c "import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())" \
      "http://127.0.0.1:$metrics_port/metrics" > "$1" 2>/dev/null || echo "# scrape failed" > "$1"
  fi
}

# Whether a GPU's clock and power are sampled during each load (summarize.py's "SM MHz",
# "GPU W", "power-capped"): with nvidia-smi and a device other than the CPU.
gpu_samples=0
[[ $DEVICE != cpu ]] && nvidia-smi -L > /dev/null 2>&1 && gpu_samples=1

server_cpu_ticks() {  # user + system clock ticks of the running server (/proc/PID/stat)
  awk '{ print $14 + $15 }' "/proc/$server_pid/stat"
}

# load CONCURRENCY REQUESTS PROMPT_TOKENS NEW_TOKENS OUTPUT.txt: one load run, with the
# server's CPU time appended to the output and /metrics scraped before and after it.
load() {
  local stem=${5%.txt} status=0
  scrape "$stem.before.prom"
  local ticks_before smi_pid=
  ticks_before=$(server_cpu_ticks)
  if (( gpu_samples )); then
    nvidia-smi -i 0 --query-gpu=clocks.sm,power.draw,clocks_event_reasons.active \
      --format=csv,noheader,nounits -lms 100 > "$stem.smi.csv" 2>&1 &
    smi_pid=$!
  fi
  "$cli" --target "$target" load --concurrency "$1" --requests "$2" --prompt-tokens "$3" \
    --max-tokens "$4" --ignore-eos --temperature 0 > "$5" 2>&1 || status=1
  if [[ -n $smi_pid ]]; then
    kill "$smi_pid" 2>/dev/null || true
    wait "$smi_pid" 2>/dev/null || true
  fi
  local ticks_after
  ticks_after=$(server_cpu_ticks)
  awk -v t=$((ticks_after - ticks_before)) -v hz="$clk_tck" \
    'BEGIN { printf "server cpu: %.3f s\n", t / hz }' >> "$5"
  scrape "$stem.after.prom"
  return "$status"
}

warm_up() {
  "$cli" --target "$target" load --concurrency 1 --requests 2 --prompt-tokens "$PROMPT_TOKENS" \
    --max-tokens "$NEW_TOKENS" --ignore-eos --temperature 0 > "$out/warmup.txt" 2>&1 \
    || { echo "$0: the warm-up failed:" >&2; cat "$out/warmup.txt" >&2; exit 1; }
}

# summarize MARKDOWN_OUT LOG LABEL NEW_TOKENS LOAD_OUTPUT...: one table (status 1 on problems).
summarize() {
  local md=$1 log=$2 label=$3 new_tokens=$4
  shift 4
  local hbm=()
  [[ -n $PEAK_HBM_GBPS ]] && hbm=(--peak-hbm-gbps "$PEAK_HBM_GBPS")
  python3 "$here/summarize.py" --label "$label" --new-tokens "$new_tokens" --server-log "$log" \
    --info "${log%.log}.info.txt" "${hbm[@]}" --out "$md" "$@"
}

status=0
tables=()

# shellcheck disable=SC2086  # SERVER_ARGS is a list of flags
start_server "$server" "$model" "$out/server.log" "$METRICS_PORT" $SERVER_ARGS
echo "warm-up"
warm_up
outputs=()
for c in $CONCURRENCY; do
  n=$((c * REQUESTS_PER_STREAM))
  echo "concurrency $c: $n requests"
  outputs+=("$out/load_c$c.txt")
  load "$c" "$n" "$PROMPT_TOKENS" "$NEW_TOKENS" "$out/load_c$c.txt" || status=1
done
summarize "$out/matrix.md" "$out/server.log" "$LABEL" "$NEW_TOKENS" "${outputs[@]}" || status=1
tables+=("$out/matrix.md")

if (( TTFT_PROMPT_TOKENS > 0 )); then
  echo "TTFT: $TTFT_REQUESTS requests of $TTFT_PROMPT_TOKENS prompt tokens, one at a time"
  load 1 "$TTFT_REQUESTS" "$TTFT_PROMPT_TOKENS" "$TTFT_NEW_TOKENS" "$out/ttft.txt" || status=1
  summarize "$out/ttft.md" "$out/server.log" \
    "$LABEL: TTFT with $TTFT_PROMPT_TOKENS-token prompts -> $TTFT_NEW_TOKENS new tokens, light load" \
    "$TTFT_NEW_TOKENS" "$out/ttft.txt" || status=1
  tables+=("$out/ttft.md")
fi
stop_server

if [[ ${METRICS_OFF_CHECK:-0} == 1 ]]; then
  on=() off=()
  for round in $(seq 1 "$METRICS_CHECK_ROUNDS"); do
    for setting in on off; do
      port=$METRICS_PORT
      [[ $setting == off ]] && port=-1
      # shellcheck disable=SC2086
      start_server "$server" "$model" "$out/server_metrics_${setting}_r$round.log" "$port" $SERVER_ARGS
      warm_up
      for c in $METRICS_CHECK_CONCURRENCY; do
        n=$((c * METRICS_CHECK_REQUESTS_PER_STREAM > METRICS_CHECK_MIN_REQUESTS ? c * METRICS_CHECK_REQUESTS_PER_STREAM : METRICS_CHECK_MIN_REQUESTS))
        f="$out/metrics_${setting}_r${round}_c$c.txt"
        echo "metrics $setting, round $round, concurrency $c: $n requests"
        load "$c" "$n" "$PROMPT_TOKENS" "$NEW_TOKENS" "$f" || status=1
        if [[ $setting == on ]]; then on+=("$f"); else off+=("$f"); fi
      done
      stop_server
    done
  done
  python3 "$here/summarize.py" --label "$LABEL: throughput with metrics on vs off (--metrics-port -1), $METRICS_CHECK_ROUNDS rounds each, alternating" \
    --out "$out/metrics_check.md" --metrics-on "${on[@]}" --metrics-off "${off[@]}" || status=1
  tables+=("$out/metrics_check.md")
fi

for entry in $EXTRA_MODELS; do
  extra_model=${entry%%:*}
  extra_label=${entry#*:}
  [[ $extra_label != "$entry" ]] || extra_label=$(basename "$extra_model")
  slug=$(printf '%s' "$extra_label" | tr -c 'A-Za-z0-9._-' '_')
  echo "extra model $extra_label ($extra_model) at concurrency $EXTRA_CONCURRENCY"
  # shellcheck disable=SC2086
  start_server "$server" "$extra_model" "$out/server_$slug.log" "$METRICS_PORT" $SERVER_ARGS
  warm_up
  f="$out/extra_${slug}_c$EXTRA_CONCURRENCY.txt"
  load "$EXTRA_CONCURRENCY" $((EXTRA_CONCURRENCY * REQUESTS_PER_STREAM)) "$PROMPT_TOKENS" \
    "$NEW_TOKENS" "$f" || status=1
  stop_server
  summarize "$out/extra_$slug.md" "$out/server_$slug.log" "$extra_label" "$NEW_TOKENS" "$f" || status=1
  tables+=("$out/extra_$slug.md")
done

if [[ ${CANNED:-0} == 1 ]]; then
  for step_us in $CANNED_STEP_US; do
    canned_outputs=()
    # shellcheck disable=SC2086
    start_server "$canned_server" "$model" "$out/server_canned_$step_us.log" "$METRICS_PORT" \
      $CANNED_SERVER_ARGS --step-us "$step_us"
    warm_up
    for c in $CANNED_CONCURRENCY; do
      f="$out/canned_s${step_us}_c$c.txt"
      echo "canned runner, step $step_us us, concurrency $c"
      load "$c" $((c * REQUESTS_PER_STREAM)) "$PROMPT_TOKENS" "$NEW_TOKENS" "$f" || status=1
      canned_outputs+=("$f")
    done
    stop_server
    summarize "$out/canned_$step_us.md" "$out/server_canned_$step_us.log" \
      "Canned runner (no model; every step answered $( ((step_us > 0)) && echo "after $step_us us" || echo "at once")): flashserve-cli + gRPC + engine" \
      "$NEW_TOKENS" "${canned_outputs[@]}" || status=1
    tables+=("$out/canned_$step_us.md")
  done
fi

if [[ ${HF_PEER:-0} == 1 ]]; then  # after every server has given the GPU back
  echo "HF transformers peer (batch sizes $HF_BATCH_SIZES)"
  python3 "$here/peer_hf.py" --model "$model" --batch-sizes "$HF_BATCH_SIZES" \
    --prompt-tokens "$PROMPT_TOKENS" --new-tokens "$NEW_TOKENS" --out "$out/hf_peer.md" \
    > "$out/hf_peer.txt" 2>&1 || { status=1; tail -n 20 "$out/hf_peer.txt" >&2; }
  [[ -f $out/hf_peer.md ]] && tables+=("$out/hf_peer.md")
fi

{
  for t in "${tables[@]}"; do cat "$t"; echo; done
  echo '```'
  cat "$out/env.txt"
  echo '```'
} > "$out/results.md"
cat "$out/results.md"
exit "$status"
