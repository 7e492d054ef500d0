#!/usr/bin/env bash
# compute-sanitizer memcheck, then racecheck, over some attention_cuda_test cases of one bundle
# (scripts/gpu-bundle.sh folder), each bounded in time: the sanitizer step of a device call
# that checks a kernel variant past 1k keys (racecheck takes seconds to minutes a test).
# Writes OUT_DIR/san_NAME_memcheck.txt and _racecheck.txt; prints one line a tool.
#
#   bench/attention/sanitize_tests.sh OUT_DIR NAME BUNDLE_DIR SECONDS MEMCHECK_FILTER [RACECHECK_FILTER]
#
# RACECHECK_FILTER defaults to MEMCHECK_FILTER (gtest filters, ':'-separated). TOOLS (default
# "memcheck racecheck") picks the tools; SECONDS bounds each.
set -u
[[ $# -ge 5 ]] || { echo "usage: $0 OUT_DIR NAME BUNDLE_DIR SECONDS MEMCHECK_FILTER [RACECHECK_FILTER]" >&2; exit 2; }
out=$1 name=$2 dir=$3 limit=$4 mem=$5 race=${6:-$5}
mkdir -p "$out"
for tool in ${TOOLS:-memcheck racecheck}; do
  filter=$mem
  [[ $tool == racecheck ]] && filter=$race
  log=$out/san_${name}_$tool.txt
  LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64 timeout "$limit" compute-sanitizer --tool $tool \
    --error-exitcode 9 "$dir/bin/attention_cuda_test" --gtest_filter="$filter" > "$log" 2>&1
  echo "$name $tool rc=$? $(grep -cE '^\[ +OK +\]' "$log") ok $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
done
