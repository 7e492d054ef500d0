#!/usr/bin/env bash
# The whole GPU check of the CUDA kernels in one go, for the GPU machine (see docs/design.md,
# "Running on a GPU machine"): unit tests, compute-sanitizer memcheck + racecheck on small
# sizes, the attention benchmark and the PyTorch SDPA peers, with results under OUT_DIR.
#
#   scripts/gpu-check.sh OUT_DIR [stage...]     stages: info sass tests sanitize sanitize-full
#                                               bench peers ncu (default: all but ncu)
# `sanitize` runs every test at lengths <= 97; `sanitize-full` runs memcheck and racecheck over
# one test of each kernel the automatic choice can pick (mma.sync and wgmma prefill at d64 and
# d128, varlen and chunked, the split prefill, a window, split and unsplit decode, the rounded
# outputs) at the tests' full lengths (1,025-4,000 keys; issue 20: "include one length past
# 1k per variant").
# GIT_COMMIT names the commit in the summary (the GPU machine has no .git).
# Binaries come from BIN_DIR (default .gpu/bin, made here with
#   scripts/gpu-bundle.sh .gpu build-cuda/bin/attention_cuda_test build-cuda/bin/attention_bench)
# and run with LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64. BENCH_ARGS (e.g. --quick)
# goes to both benchmark programs; NCU_KERNEL / NCU_COUNT narrow the ncu stage (default: every
# prefill kernel, 4 launches) and NCU_PROFILE the bench's profile flag (default --profile:
# s8k full; --profile=512: the s512 rows, full and causal, 12 launches on Hopper: mma.sync,
# wgmma, wgmma_ps a row); with
# NCU_PEER_SEQ=S the stage also profiles cuDNN's kernel at the length-S rows
# (bench/attention/peers_profile.py, 12 launches: warm-ups included). TESTS_TIMEOUT /
# BENCH_TIMEOUT / PEERS_TIMEOUT (s, default 240 / 300 / 400) bound the tests, bench and peers
# stages; both programs write their CSV row by row, so a stage cut short keeps its rows, and
# the table is then merged from what is there. Files written in OUT_DIR: summary.txt,
# tests.log, sanitizer.log, bench.log, ours.csv, peers.csv, ncu.txt (and ncu_peer.txt with
# NCU_PEER_SEQ) and the merged markdown table OUT_DIR/table.md; the peers stage also puts
# issue 20's musts, read off that table by bench/attention/musts.py, in summary.txt.
set -uo pipefail
out=${1:?usage: $0 OUT_DIR [stage...]}
shift
stages=${*:-info sass tests sanitize sanitize-full bench peers}
bin=${BIN_DIR:-.gpu/bin}
export LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
mkdir -p "$out"
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }
has() { [[ " $stages " == *" $1 "* ]]; }
note "gpu-check $(date -u +%FT%TZ) stages: $stages commit: ${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"

if has info; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$summary"
fi
if has sass; then  # are the matrix instructions we meant there? (HGMMA = wgmma, HMMA = mma.sync)
  cuobjdump -sass "$bin/attention_bench" | awk '/Function :/ {f = $3} {print f "\t" $0}' > /tmp/sass.txt
  for k in attention_prefill_sm90_ws_kernel attention_prefill_kernel attention_decode_kernel; do
    sass=$(grep "$k" /tmp/sass.txt)
    note "sass $k (all archs, all instantiations): HGMMA $(grep -c HGMMA <<<"$sass") HMMA $(grep -c HMMA <<<"$sass") LDSM $(grep -c LDSM <<<"$sass") LDL/STL $(grep -cE 'LDL|STL' <<<"$sass")"
  done
fi
if has tests; then
  timeout ${TESTS_TIMEOUT:-240} "$bin/attention_cuda_test" > "$out/tests.log" 2>&1
  note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/tests.log" | sort | uniq -c | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$out/tests.log" | head -20 | tee -a "$summary"
fi
if has sanitize; then
  : > "$out/sanitizer.log"
  for tool in memcheck racecheck; do
    filter='*'
    [[ $tool == racecheck ]] && filter='*bf16_d64_causal*:*bf16_d128_full*:*fp16_d128_gqa3*'
    # SANITIZER_TIMEOUT: 400 s since the window suites (124 more tests) joined the filter '*'.
    FLASHSERVE_TEST_MAX_LEN=97 timeout ${SANITIZER_TIMEOUT:-400} compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bin/attention_cuda_test" --gtest_filter="$filter" >> "$out/sanitizer.log" 2>&1
    rc=$?
    note "sanitizer $tool (filter $filter, lengths <= 97): rc=$rc $(grep -E 'ERROR SUMMARY' "$out/sanitizer.log" | tail -1)"
  done
fi
if has sanitize-full; then
  : > "$out/sanitizer_full.log"
  full='*/mmasync_bf16_d64_causal_gqa3_varlen:*/mmasync_bf16_d128_causal_gqa8_chunked'
  full+=':*/wgmma_bf16_d64_causal_gqa3_chunked:*/wgmma_bf16_d128_full_gqa8_varlen'
  full+=':*WindowPrefillTest*/auto_bf16_d64_w1100_chunked:*WindowPrefillTest*/auto_bf16_d128_w300_varlen'
  full+=':*/bf16_d64_gqa3_splitsauto_w1025:*DecodeTest*/bf16_d128_gqa8_splits1:*RoundQ8Test*'
  full+=':*SplitPrefillTest*/wgmma_bf16_d64_causal_gqa3_chunked_s7:*/wgmmaps_bf16_d128_causal_gqa8_varlen'
  full+=':*/wgmmaps_bf16_d128_full_gqa3_varlen'  # the stream-K walk (v32: d128, non-causal, > 512 keys)
  full+=':*/wgmmaps_bf16_d64_causal_gqa3_varlen'  # the d64 counter walk (1,025 keys)
  for tool in memcheck racecheck; do
    timeout ${SANITIZER_FULL_TIMEOUT:-500} compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bin/attention_cuda_test" --gtest_filter="$full" >> "$out/sanitizer_full.log" 2>&1
    rc=$?
    note "sanitizer $tool full lengths ($(grep -cE '^\[ +OK +\]' "$out/sanitizer_full.log") tests so far): rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_full.log" | tail -1)"
  done
fi
if has bench; then
  timeout ${BENCH_TIMEOUT:-300} "$bin/attention_bench" ${BENCH_ARGS:-} --csv "$out/ours.csv" > "$out/bench.log" 2>&1
  note "bench: rc=$?"
  tail -n +1 "$out/bench.log" | grep -E 'FAILED|device' | tee -a "$summary"
fi
if has peers; then
  # PEERS_TIMEOUT: 400 s since the fp16 and serving-shaped rows (issue 20) joined (was 300).
  timeout ${PEERS_TIMEOUT:-400} python3 bench/attention/peers_sdpa.py ${BENCH_ARGS:-} --ours "$out/ours.csv" \
    --csv "$out/peers.csv" --table "$out/table.md" >> "$out/bench.log" 2>&1
  note "peers: rc=$?"
  [[ -s $out/table.md ]] || python3 bench/attention/peers_sdpa.py --merge-only --ours "$out/ours.csv" \
    --csv "$out/peers.csv" --table "$out/table.md" >> "$out/bench.log" 2>&1
  cat "$out/table.md" 2>/dev/null
  # Issue 20's musts read off the table (bench/attention/musts.py), into the summary.
  [[ -s $out/table.md ]] && python3 bench/attention/musts.py "$out/table.md" | tee -a "$summary"
fi
if has ncu; then
  # The same sections and metrics for our kernels and for the peer's (one profile to compare).
  ncu_args=(--clock-control none
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
    --section ComputeWorkloadAnalysis --section SchedulerStats
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active')
  timeout 240 ncu "${ncu_args[@]}" --kernel-name regex:${NCU_KERNEL:-attention_prefill} \
    --launch-count ${NCU_COUNT:-4} "$bin/attention_bench" ${NCU_PROFILE:---profile} > "$out/ncu.txt" 2>&1
  note "ncu: rc=$?"
  if [[ -n ${NCU_PEER_SEQ:-} ]]; then  # cuDNN's kernel at the same rows (peers_profile.py)
    timeout 240 ncu "${ncu_args[@]}" --kernel-name regex:cudnn --launch-count 12 \
      python3 bench/attention/peers_profile.py --seq "$NCU_PEER_SEQ" > "$out/ncu_peer.txt" 2>&1
    note "ncu peer (cuDNN, s=$NCU_PEER_SEQ): rc=$?"
  fi
fi
