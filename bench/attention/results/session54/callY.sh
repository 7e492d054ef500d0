#!/usr/bin/env bash
# Call Y (session 54; any Hopper GPU; carry .chunks/s54z; ~60 s): is the fp16 d128 full s512
# row power-capped? Across calls R and U (14 rounds), f98d5be's persistent kernel ran that row
# at 330-393 TFLOP/s (bf16: 384-418), while the one-tile kernel's fp16 is 2 % below its bf16
# and cuDNN's fp16 8 % below its bf16 (RESULTS.md). Prediction (NOTES.md, "Call Y"): the SM
# clock drops below the boost clock, with the software power cap active, during the fastest
# rows (d128 full wgmma_ps most, fp16 more than bf16), and that row's TFLOP/s follows the
# clock from run to run. Six runs of `attention_bench --prefill --max-keys=512 --dtype both`
# of v42.txz (the head's kernels) with nvidia-smi sampling every 10 ms; then clocks_by_row.py.
set -u
H=bench/attention/results/session54 R=/tmp/y B=/tmp/b_y
rm -rf "$R" "$B" && mkdir -p "$R" "$B" && tar -xJf "${CHUNKS:-.chunks/s54z}/v42.txz" -C "$B"
export LD_LIBRARY_PATH=$B/.gpu/lib:/usr/local/cuda/lib64
stamp() { python3 -u -c 'import sys, time
for l in sys.stdin: print(f"{time.time():.4f} {l}", end="", flush=True)'; }
nvidia-smi -q -d POWER,CLOCK > "$R/smi_q.txt" 2>&1
q=clocks.sm,power.draw,clocks_event_reasons.active
nvidia-smi --query-gpu=$q --format=csv,noheader -c 1 > /dev/null 2>&1 || q=clocks.sm,power.draw,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$q --format=csv,noheader -lms 10 | stamp > "$R/smi.txt" &
smi=$!
sleep 1
for n in 1 2 3 4 5 6; do
  timeout 60 "$B/.gpu/bin/attention_bench" --prefill --max-keys=512 --dtype both | stamp > "$R/bench_$n.txt"
done
kill $smi; pkill -f "nvidia-smi --query-gpu" ; sleep 0.5
python3 $H/clocks_by_row.py "$R" | tee "$R/clocks_by_row.md"
grep -iE "power limit|max clocks|sm  " "$R/smi_q.txt" | head -12
tar -czf "$OUT/y.tgz" -C /tmp y
