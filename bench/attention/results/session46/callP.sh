#!/usr/bin/env bash
# Prepared in session 46 for the next (any Hopper GPU; carry .chunks/s47 with head.txz and
# v27.txz; ~250 s, ~560 s if v27 is adopted): v27's re-test (NOTES.md "v27 re-test", rule
# written before this call).
#   head.txz = mainline 4f34939 (kAuto: v25's static walk at <= 512 keys)
#   v27.txz  = branch v27 43f2b69 (v26's counter walk, kAuto's class at <= 1,024 keys;
#              results/session46/v27_class1024.patch on v26_dynamic_on_b749df7.patch)
# 1. a 20-s gate on v27's persistent and choice tests; 2. head / v27 alternating, FIVE rounds
# of the rows of at most 1,024 keys only (attention_bench --max-keys=1024: the s512 and s1k
# grid rows, the varlen batch), the RULE line; 3. only if the rule adopts v27 and >= 230 s
# are left before $1 (default 560): bench/attention/results_run.sh of v27 (RESULTS.md's run).
# /tmp/p -> $OUT/p.tgz as it goes.
# Rebuild a bundle: cmake -S . -B build -DFLASHSERVE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo;
#   cmake --build build -j2 --target attention_cuda_test attention_bench;
#   scripts/gpu-bundle.sh /tmp/b/.gpu build/bin/attention_{cuda_test,bench};
#   tar -cJf .chunks/s47/NAME.txz -C /tmp/b .gpu
set -u
deadline=${1:-560}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
C=${CHUNKS:-.chunks/s47}
R=/tmp/p; rm -rf $R; mkdir -p $R
( while sleep 30; do tar -czf $OUT/p.tgz.part -C /tmp p && mv $OUT/p.tgz.part $OUT/p.tgz; done ) > /dev/null 2>&1 &
saver=$!
for b in head v27; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf $C/$b.txz -C /tmp/$b; done
LD_LIBRARY_PATH=/tmp/v27/.gpu/lib:/usr/local/cuda/lib64 timeout 20 /tmp/v27/.gpu/bin/attention_cuda_test \
  --gtest_filter='PersistentPrefillTest*:AttentionConfigTest*:All/PrefillTest.*/wgmmaps_bf16_d128_causal_gqa8_varlen' \
  > $R/gate.txt 2>&1
rc=$?
echo "gate rc=$rc $(el) s $(grep -E '^\[  (PASSED|FAILED) ' $R/gate.txt | tr '\n' ' ')"
if [[ $rc -ne 0 ]]; then kill $saver; tail -20 $R/gate.txt; tar -czf $OUT/p.tgz -C /tmp p; exit 1; fi
BENCH_ARGS="--prefill --serving --dtype bf16 --max-keys=1024" BENCH_TIMEOUT=60 \
  bench/attention/alternate_bench.sh $R 5 head=/tmp/head/.gpu v27=/tmp/v27/.gpu
echo "bench done $(el) s"
python3 bench/attention/results/session46/rule_v27_retest.py $R | tee $R/ratios.md
if [[ -f $R/adopt && $(( deadline - $(el) )) -ge 230 ]]; then
  rm -rf .gpu && cp -r /tmp/v27/.gpu .gpu
  bench/attention/results_run.sh $R/r "$(cat $C/v27.commit)" $(( deadline - $(el) ))
fi
kill $saver 2>/dev/null; wait $saver 2>/dev/null
tar -czf $OUT/p.tgz -C /tmp p
echo "end $(el) s"
