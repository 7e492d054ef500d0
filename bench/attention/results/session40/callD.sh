#!/usr/bin/env bash
# Session 40, call D (any Hopper GPU; carry .chunks/s40/d.txz = attention_cuda_test +
# attention_bench of the candidate f10e313 (v15's one-tile part: the last P V in its own turn),
# .chunks/s39/m.txz = the head's kernels before it (7990401), this script):
# 1. attention_bench --prefill --serving bf16, head / candidate alternating, two rounds;
# 2. gpu-check info tests bench peers at the candidate (bench/attention/RESULTS.md's run);
# 3. gpu-check sanitize-full at the candidate with the time left.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf .gpu /tmp/m && tar -xJf .chunks/s40/d.txz && mkdir -p /tmp/m && tar -xJf .chunks/s39/m.txz -C /tmp/m
R=$OUT/d; mkdir -p $R
for r in 1 2; do
  for b in m d; do
    if [[ $b == m ]]; then dir=/tmp/m/.gpu; else dir=$PWD/.gpu; fi
    LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64 timeout 80 $dir/bin/attention_bench \
      --prefill --serving --dtype bf16 --csv $R/bench_${b}_$r.csv > $R/bench_${b}_$r.log 2>&1
    echo "bench $b round $r rc=$? $(el) s $(grep -ciE 'fail' $R/bench_${b}_$r.log) fail lines"
  done
done
C=$(cut -c1-7 .chunks/s40/d.commit)
GIT_COMMIT=$C TESTS_TIMEOUT=90 BENCH_TIMEOUT=200 PEERS_TIMEOUT=260 \
  scripts/gpu-check.sh $R/check info tests bench peers > $R/gpu_check_stdout.txt 2>&1
echo "gpu-check rc=$? $(el) s"
cat $R/check/summary.txt
left=$(( (575 - $(el)) / 2 ))
if [[ $left -gt 30 ]]; then
  SANITIZER_FULL_TIMEOUT=$left GIT_COMMIT=$C scripts/gpu-check.sh $R/san sanitize-full > $R/san_stdout.txt 2>&1
  echo "sanitize-full rc=$? $(el) s"; cat $R/san/summary.txt
fi
tar -czf $OUT/d.tgz -C $OUT d && rm -rf $R
echo "end $(el) s"
