#!/usr/bin/env bash
# Session 41, call K (carry .chunks/s41/i.txz, .chunks/s41/j.txz, this script; ~160 s): two
# more alternating rounds head f21b99e / v19 (attention_bench --prefill --serving bf16), to
# tell whether v19's one-split rows lost ~1 % (call J: median 0.985-0.992) or that was noise.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
for b in i j; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s41/$b.txz -C /tmp/$b; done
R=$OUT/k; mkdir -p $R
bench/attention/alternate_bench.sh $R 2 i=/tmp/i/.gpu j=/tmp/j/.gpu
tar -czf $OUT/k.tgz -C $OUT k && rm -rf $R
echo "end $(el) s"
