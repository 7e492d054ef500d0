#!/bin/bash
# ttft_diag.sh BIN MODEL WEIGHTS OUTDIR: one server, three rounds of load at 64 streams x 2
# requests (128 -> 128), as run.sh's concurrency-64 row, after run.sh's warm-up.
set -u
bin=$1 model=$2 w=$3 o=$4; mkdir -p $o
$bin/flashserve --model $model --device auto --host 127.0.0.1 --port 50071 --metrics-port -1 --http-port 0 \
  --max-num-seqs 256 --max-waiting 1024 --noprefix_caching --weights $w > $o/server-$w.log 2>&1 &
pid=$!
for i in $(seq 120); do $bin/flashserve-cli --target 127.0.0.1:50071 health >/dev/null 2>&1 && break; sleep 1; done
$bin/flashserve-cli --target 127.0.0.1:50071 load --concurrency 1 --requests 2 --prompt-tokens 128 --max-tokens 128 --ignore-eos --temperature 0 > $o/warm-$w.txt 2>&1
for r in 1 2 3; do
  $bin/flashserve-cli --target 127.0.0.1:50071 load --concurrency 64 --requests 128 --prompt-tokens 128 --max-tokens 128 --ignore-eos --temperature 0 > $o/load64-$w-$r.txt 2>&1
done
kill -TERM $pid; wait $pid
