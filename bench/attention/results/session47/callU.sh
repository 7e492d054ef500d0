#!/usr/bin/env bash
# Prepared in session 47 for the next (any Hopper GPU; carry .chunks/s48; ~400 s): RESULTS.md's
# run at mainline's kernels when call S does not adopt v30 (S runs it for v30 when it does).
#   head.txz = mainline 15606a4 (v28 merged)
# Everything under /tmp/u, tarred to $OUT/u.tgz as it goes. Then here: musts.py on
# u/r/check/table.md and RESULTS.md = header + table.md.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
R=/tmp/u; rm -rf $R; mkdir -p $R
( while sleep 30; do tar -czf $OUT/u.tgz.part -C /tmp u && mv $OUT/u.tgz.part $OUT/u.tgz; done ) > /dev/null 2>&1 &
saver=$!
C=${CHUNKS:-.chunks/s48}
rm -rf .gpu /tmp/hd && mkdir -p /tmp/hd && tar -xJf $C/head.txz -C /tmp/hd && cp -r /tmp/hd/.gpu .gpu
bench/attention/results_run.sh $R/r "$(cat $C/head.commit)" "${1:-565}"
kill $saver 2>/dev/null; wait $saver 2>/dev/null
tar -czf $OUT/u.tgz -C /tmp u
echo "end $(el) s"
