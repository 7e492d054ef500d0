#!/usr/bin/env bash
# Session 49, call A (any Hopper GPU; carry .chunks/s49; ~400 s): v31, the stream-K walk of
# non-causal persistent calls (branch v31, prediction in NOTES.md "v31"), against the head.
#   head.txz = 2bc77db (GPU code 7192a6a, mainline's); v31.txz = branch v31m (c0e928e: v31
#   with its partials in the caller's workspace, which attention_bench gives).
# 1. gate: v31's persistent tests (its new StreamKPiecesMatchTheReference included) and the
#    pinned persistent PrefillTest cases at full lengths (a failure ends the call);
# 2. head / v31 alternating, 3 rounds of `attention_bench --prefill --dtype bf16`;
#    compare_runs.py --impl wgmma_ps --also wgmma (base / new: above 1 v31's persistent form is
#    faster than the head's; wgmma / new: v31's persistent form against the one-tile grid);
# 3. memcheck of the stream-K test with the time left.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
C=${CHUNKS:-.chunks/s49}
R=/tmp/a; rm -rf "$R"; mkdir -p "$R"
for b in head v31; do rm -rf "/tmp/b_$b" && mkdir -p "/tmp/b_$b" && tar -xJf "$C/$b.txz" -C "/tmp/b_$b"; done
( while sleep 30; do tar -czf "$OUT/a.tgz.part" -C /tmp a && mv "$OUT/a.tgz.part" "$OUT/a.tgz"; done ) &
saver=$!
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$R/gpu.txt"
N=/tmp/b_v31/.gpu; L=$N/lib:/usr/local/cuda/lib64
LD_LIBRARY_PATH=$L timeout ${GATE_TIMEOUT:-90} "$N/bin/attention_cuda_test" \
  --gtest_filter='PersistentPrefillTest.*:All/PrefillTest.*/wgmmaps_*' > "$R/gate.txt" 2>&1
rc=$?
echo "gate rc=$rc $(el) s $(grep -E '^\[  (PASSED|FAILED) ' "$R/gate.txt" | tr '\n' ' ')"
if [[ $rc -ne 0 ]]; then grep -E '^\[  FAILED|Failure|Expected|Which is|rel' "$R/gate.txt" | head -30; tail -5 "$R/gate.txt"
else
  BENCH_ARGS="--prefill --dtype bf16" BENCH_TIMEOUT=${RUN_TIMEOUT:-70} bench/attention/alternate_bench.sh "$R" ${ROUNDS:-3} \
    head=/tmp/b_head/.gpu v31=$N
  echo "bench done $(el) s"
  python3 bench/attention/results/session49/rule_v31.py "$R" | tee "$R/rule.md"
  python3 bench/attention/compare_runs.py --base "$R"/bench_head_*.csv --new "$R"/bench_v31_*.csv \
    --impl wgmma_ps --also wgmma > "$R/compare_ps.md" 2>&1
  cat "$R/compare_ps.md"
  left=$(( ${DEADLINE:-540} - $(el) ))
  if [[ $left -gt 40 ]]; then
    LD_LIBRARY_PATH=$L timeout $left compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$N/bin/attention_cuda_test" --gtest_filter='PersistentPrefillTest.StreamK*' > "$R/memcheck.txt" 2>&1
    echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$R/memcheck.txt" | tail -1) $(el) s"
  fi
fi
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/a.tgz" -C /tmp a
