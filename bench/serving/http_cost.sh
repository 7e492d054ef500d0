#!/usr/bin/env bash
# What the HTTP/SSE path costs per token beside gRPC, without the model: the canned server
# (flashserve-canned-server: the real serving path over a runner that answers each step after
# STEP_US) loaded through gRPC (flashserve-cli load) and through HTTP (openai_sse_load.py),
# alternating, ROUNDS rounds, at each of CONCURRENCY. Prints per run the tokens/s, TTFT p50
# and the server's CPU time per generated token (/proc/PID/stat, user + system).
#
#   bench/serving/http_cost.sh BUNDLE_DIR MODEL_PATH OUT_DIR
#
# BUNDLE_DIR: bin/flashserve-canned-server, bin/flashserve-cli (a build's bin/ works: pass its
# parent). Environment (defaults): CONCURRENCY="1 4 16" NEW_TOKENS=128 PROMPT_TOKENS=128
#   REQUESTS_PER_STREAM=8 STEP_US=2000 ROUNDS=2 PORT=50171 HTTP_PORT=50172
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 BUNDLE_DIR MODEL_PATH OUT_DIR" >&2; exit 2; }
bundle=$(cd "$1" && pwd)
model=$2
mkdir -p "$3"
out=$(cd "$3" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
CONCURRENCY=${CONCURRENCY:-"1 4 16"}
NEW_TOKENS=${NEW_TOKENS:-128}
PROMPT_TOKENS=${PROMPT_TOKENS:-128}
REQUESTS_PER_STREAM=${REQUESTS_PER_STREAM:-8}
STEP_US=${STEP_US:-2000}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-50171}
HTTP_PORT=${HTTP_PORT:-50172}
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cli="$bundle/bin/flashserve-cli"
"$bundle/bin/flashserve-canned-server" --model "$model" --step-us "$STEP_US" --host 127.0.0.1 \
  --port "$PORT" --http-port "$HTTP_PORT" --metrics-port -1 --max-num-seqs 256 \
  --noprefix_caching > "$out/server.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
until "$cli" --target "127.0.0.1:$PORT" health > /dev/null 2>&1; do
  kill -0 $pid 2>/dev/null || { tail "$out/server.log" >&2; exit 1; }
  sleep 0.5
done
hz=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
# run NAME COMMAND...: prints "NAME tokens/s TTFT-p50-ms server-us-per-token"
run() {
  local name=$1; shift
  local before after
  before=$(ticks)
  "$@" > "$out/$name.txt" 2>&1
  after=$(ticks)
  python3 - "$out/$name.txt" "$((after - before))" "$hz" "$name" <<'PY'
import re, sys
text, ticks, hz, name = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
grpc = re.search(r"([\d.]+) generated tokens/s", text)
if grpc:
    rate = float(grpc.group(1))
    tokens = int(re.search(r"tokens: \d+ prompt, (\d+) generated", text).group(1))
    ttft = float(re.search(r"time to first token\s+p50\s+([\d.]+) ms", text).group(1))
else:
    m = re.search(r"(\d+) tokens in [\d.]+ s = (\d+) tok/s; TTFT p50 ([\d.]+) ms; failed 0", text)
    tokens, rate, ttft = int(m.group(1)), float(m.group(2)), float(m.group(3))
print(f"| {name} | {rate:,.0f} | {ttft:.2f} | {1e6 * ticks / hz / tokens:.1f} |")
PY
}
"$cli" --target "127.0.0.1:$PORT" load --concurrency 1 --requests 4 --prompt-tokens "$PROMPT_TOKENS" \
  --max-tokens "$NEW_TOKENS" --ignore-eos > /dev/null
echo "| run (canned server, step $STEP_US us) | tokens/s | TTFT p50 ms | server CPU us/token |"
echo "|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for c in $CONCURRENCY; do
    n=$((c * REQUESTS_PER_STREAM))
    run "grpc_c${c}_r$round" "$cli" --target "127.0.0.1:$PORT" load --concurrency "$c" \
      --requests "$n" --prompt-tokens "$PROMPT_TOKENS" --max-tokens "$NEW_TOKENS" --ignore-eos --temperature 0
    run "http_c${c}_r$round" python3 "$here/openai_sse_load.py" "$HTTP_PORT" "$c" "$n" \
      "$NEW_TOKENS" "$PROMPT_TOKENS"
  done
done
