#!/usr/bin/env bash
# Session 40, call B (any Hopper GPU; carry .chunks/s39/p.txz = attention_bench of branch ps-tma,
# v13: the one-tile TMA kernel and the persistent walk over it in one binary): where the
# persistent kernel's time goes at s = 512 per instruction. ncu full set with source counters
# over `attention_bench --profile=512`'s first four sm90_ws launches: d128 full one-tile,
# d128 full persistent, d64 full one-tile, d64 full persistent (b32 s512).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
rm -rf /tmp/p && mkdir -p /tmp/p && tar -xJf .chunks/s39/p.txz -C /tmp/p
export LD_LIBRARY_PATH=/tmp/p/.gpu/lib:/usr/local/cuda/lib64
R=$OUT/b; mkdir -p $R
timeout 240 ncu --clock-control none --set full --import-source yes --kernel-name regex:sm90_ws \
  --launch-count 4 -o /tmp/b /tmp/p/.gpu/bin/attention_bench --profile=512 > $R/ncu_run.txt 2>&1
echo "ncu rc=$? $(el) s"
ncu -i /tmp/b.ncu-rep --page details > $R/details.txt 2>&1; echo "details rc=$?"
ncu -i /tmp/b.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $R/source_sass.csv.gz
grep -E "attention_prefill|Duration|Issue Slots Busy" $R/details.txt | head -16
tar -czf $OUT/b.tgz -C $OUT b && rm -rf $R
echo "end $(el) s"
