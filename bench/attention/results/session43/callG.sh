#!/usr/bin/env bash
# Session 43, call G (any Hopper GPU; ~230 s): call F's v22 bench files did not come back (a
# call returns a limited number of files: tar them), so d / q alternating again, two rounds.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for b in d q; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s43/$b.txz -C /tmp/$b; done
R=$OUT/g; mkdir -p $R
BENCH_TIMEOUT=80 bench/attention/alternate_bench.sh $R 2 d=/tmp/d/.gpu q=/tmp/q/.gpu
echo "bench done $(el) s"
tar -czf $OUT/g.tgz -C $OUT g && rm -rf $R
echo "end $(el) s"
