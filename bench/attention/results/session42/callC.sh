#!/usr/bin/env bash
# Session 42, call C (any Hopper GPU; carry .chunks/s42/b.txz = attention_cuda_test +
# attention_bench at 1ed22d7, .chunks/s42/b.commit, this script; ~450 s):
# 1. gpu-check bench peers again at the same commit: call B's table had decode b1 ctx1024
#    h32/8 d128 bf16 at 0.035 ms (call J: 0.011 ms; the fp16 row beside it 0.014 ms; the
#    decode kernel is untouched since), and the s512 rows' cuDNN figures moved again: a repeat
#    of the whole table, to say which rows of the musts flip between two runs of one build.
# 2. session 41's call N: ncu of ours and cuDNN's kernel at the b16 s1024 rows, then the full
#    set with source counters of the one-tile d128 kernel at s512 and s16384 (one launch each).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf .gpu && tar -xJf .chunks/s42/b.txz
R=$OUT/c; mkdir -p $R
C=$(cut -c1-7 .chunks/s42/b.commit)
GIT_COMMIT=$C BENCH_TIMEOUT=200 PEERS_TIMEOUT=260 scripts/gpu-check.sh $R/check2 bench peers \
  > $R/gpu_check_stdout.txt 2>&1
echo "gpu-check rc=$? $(el) s"
grep -E "^- |decode" $R/check2/summary.txt
grep -E "b1 ctx1024 h32/8 d128" $R/check2/table.md
NCU_PROFILE=--profile=1024 NCU_COUNT=8 NCU_PEER_SEQ=1024 GIT_COMMIT=$C \
  scripts/gpu-check.sh $R/n ncu > $R/n_stdout.txt 2>&1
echo "ncu rc=$? $(el) s"; cat $R/n/summary.txt
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64
for S in 512 16384; do
  [[ $(el) -lt 480 ]] || break
  timeout 80 ncu --clock-control none --set full --import-source yes --kernel-name regex:sm90_ws \
    --launch-count 1 -o /tmp/n$S .gpu/bin/attention_bench --profile=$S > $R/ncu_full_$S.txt 2>&1
  echo "ncu full s$S rc=$? $(el) s"
  ncu -i /tmp/n$S.ncu-rep --page details > $R/details_$S.txt 2>&1
  ncu -i /tmp/n$S.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $R/source_sass_$S.csv.gz
  grep -E "Duration|Issue Slots Busy|Elapsed Cycles" $R/details_$S.txt | head -4
done
tar -czf $OUT/c.tgz -C $OUT c && rm -rf $R
echo "end $(el) s"
