#!/usr/bin/env bash
# Prepared in session 45 for the next (any Hopper GPU; carry .chunks/s45/head.txz (or $CHUNKS/head.txz); ~570 s):
# RESULTS.md's run at the head, the first with v25's routing (kAuto's persistent form at
# <= 512 keys, `wgmma_ps` column): bench/attention/results_run.sh (gpu-check info, tests,
# bench, peers, then sanitize-full with the time left, the persistent kernel's varlen test at
# 1-1,100 tokens among them). $1 = the commit head.txz was built from (.chunks/s45/head.commit).
# Everything under /tmp/n1, tarred to $OUT/n1.tgz as it goes (every 30 s and at the end).
# Then here: `bench/attention/musts.py results/session45/n1/r/check/table.md` (its default
# reads wgmma_ps on the s512 rows) and RESULTS.md = header + table.md.
# Rebuild head.txz: cmake -S . -B build -DFLASHSERVE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo;
#   cmake --build build -j2 --target attention_cuda_test attention_bench;
#   scripts/gpu-bundle.sh /tmp/bh/.gpu build/bin/attention_{cuda_test,bench};
#   tar -cJf .chunks/s45/head.txz -C /tmp/bh .gpu
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
R=/tmp/n1; rm -rf $R; mkdir -p $R
( while sleep 30; do tar -czf $OUT/n1.tgz.part -C /tmp n1 && mv $OUT/n1.tgz.part $OUT/n1.tgz; done ) > /dev/null 2>&1 &
saver=$!
rm -rf .gpu && mkdir -p /tmp/hd && tar -xJf ${CHUNKS:-.chunks/s45}/head.txz -C /tmp/hd && cp -r /tmp/hd/.gpu .gpu
bench/attention/results_run.sh $R/r "${1:?commit}" 565
kill $saver 2>/dev/null; wait $saver 2>/dev/null
tar -czf $OUT/n1.tgz -C /tmp n1
echo "end $(el) s"
