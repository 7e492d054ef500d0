#!/usr/bin/env bash
# The serving load matrix on one machine, with the bundled binaries only (nothing is built):
#
#   bench/serving/run.sh BUNDLE_DIR MODEL_PATH OUT_DIR
#
# BUNDLE_DIR holds bin/flashserve and bin/flashserve-cli and lib/ (../shared/tools/gpu-bundle
# makes it). Starts `flashserve --model MODEL_PATH --device auto` on localhost, waits until it
# is SERVING, then for each concurrency runs `flashserve-cli load` closed-loop: exactly
# PROMPT_TOKENS prompt token ids -> exactly NEW_TOKENS new tokens (EOS ignored, greedy),
# REQUESTS_PER_STREAM requests per stream. After each load it scrapes /metrics. Writes to
# OUT_DIR: results.md (the table), load_c<N>.txt (raw client output), metrics_c<N>.prom,
# server.log, and env.txt (commit-independent facts: binaries' sha256, model, GPU, flags).
#
# Environment (defaults): CONCURRENCY="1 16 64 256" PROMPT_TOKENS=128 NEW_TOKENS=128
#   REQUESTS_PER_STREAM=4 DEVICE=auto PORT=50151 METRICS_PORT=50152 HEALTH_TIMEOUT=900
#   SERVER_ARGS="--max-num-seqs 256 --max-waiting 1024 --noprefix_caching" (appended to the
#   server's flags; the prefix cache is off because every request sends the same prompt ids)
#   LABEL (the table's title; default: the model's file name)
#   HF_PEER=1: then run peer_hf.py (HF transformers) on the same model, batch sizes
#   HF_BATCH_SIZES (default 1,256), into hf_peer.md / hf_peer.txt (needs torch, transformers, gguf)
# Exit status: 0 when every load run succeeded with every token, 1 otherwise, 2 bad usage.
set -euo pipefail

usage() { echo "usage: $0 BUNDLE_DIR MODEL_PATH OUT_DIR" >&2; exit 2; }
[[ $# -eq 3 ]] || usage
bundle=$(cd "$1" && pwd) || usage
model=$2
out=$3
server="$bundle/bin/flashserve"
cli="$bundle/bin/flashserve-cli"
for exe in "$server" "$cli"; do
  [[ -x $exe ]] || { echo "$0: not an executable: $exe (BUNDLE_DIR must hold bin/flashserve and bin/flashserve-cli)" >&2; exit 2; }
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
HF_BATCH_SIZES=${HF_BATCH_SIZES:-1,256}
target=127.0.0.1:$PORT
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
  echo "model: $model ($(stat -c %s "$model") bytes)"
  echo "server: $server $SERVER_ARGS --device $DEVICE"
  sha256sum "$server" "$cli"
  echo "matrix: concurrency $CONCURRENCY; $PROMPT_TOKENS prompt tokens -> $NEW_TOKENS new tokens, ignore EOS, greedy, $REQUESTS_PER_STREAM requests per stream"
} > "$out/env.txt"

# shellcheck disable=SC2086  # SERVER_ARGS is a list of flags
"$server" --model "$model" --device "$DEVICE" --host 127.0.0.1 --port "$PORT" \
  --metrics-port "$METRICS_PORT" $SERVER_ARGS > "$out/server.log" 2>&1 &
server_pid=$!
stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
}
trap stop_server EXIT

echo "waiting for $target to be SERVING (server log: $out/server.log)"
deadline=$((SECONDS + HEALTH_TIMEOUT))
until "$cli" --target "$target" health > /dev/null 2>&1; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "$0: the server exited before serving; its log:" >&2
    tail -n 30 "$out/server.log" >&2
    exit 1
  fi
  (( SECONDS < deadline )) || { echo "$0: not SERVING after ${HEALTH_TIMEOUT}s" >&2; exit 1; }
  sleep 1
done
"$cli" --target "$target" info > "$out/info.txt" 2>&1 || true

scrape() {  # GET /metrics -> $1
  if command -v curl > /dev/null; then
    curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" > "$1" || echo "# scrape failed" > "$1"
  else
    python3 -c "import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())" \
      "http://127.0.0.1:$METRICS_PORT/metrics" > "$1" 2>/dev/null || echo "# scrape failed" > "$1"
  fi
}

load() {  # load CONCURRENCY REQUESTS OUTPUT
  "$cli" --target "$target" load --concurrency "$1" --requests "$2" --prompt-tokens "$PROMPT_TOKENS" \
    --max-tokens "$NEW_TOKENS" --ignore-eos --temperature 0 > "$3" 2>&1
}

echo "warm-up"
load 1 2 "$out/warmup.txt" || { echo "$0: the warm-up failed:" >&2; cat "$out/warmup.txt" >&2; exit 1; }

status=0
outputs=()
for c in $CONCURRENCY; do
  n=$((c * REQUESTS_PER_STREAM))
  echo "concurrency $c: $n requests"
  outputs+=("$out/load_c$c.txt")
  load "$c" "$n" "$out/load_c$c.txt" || status=1
  scrape "$out/metrics_c$c.prom"
done

if [[ ${HF_PEER:-0} == 1 ]]; then  # after the server has given the GPU back
  stop_server
  trap - EXIT
  echo "HF transformers peer (batch sizes $HF_BATCH_SIZES)"
  python3 "$(dirname "$0")/peer_hf.py" --model "$model" --batch-sizes "$HF_BATCH_SIZES" \
    --prompt-tokens "$PROMPT_TOKENS" --new-tokens "$NEW_TOKENS" --out "$out/hf_peer.md" \
    > "$out/hf_peer.txt" 2>&1 || { status=1; tail -n 20 "$out/hf_peer.txt" >&2; }
fi

python3 "$(dirname "$0")/summarize.py" --label "$LABEL" --new-tokens "$NEW_TOKENS" --env "$out/env.txt" \
  --out "$out/results.md" "${outputs[@]}" || status=1
[[ -f $out/hf_peer.md ]] && cat "$out/hf_peer.md" >> "$out/results.md"
cat "$out/results.md"
exit "$status"
