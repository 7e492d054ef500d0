#!/usr/bin/env bash
# Session 39, call T5 (any Hopper GPU; carry .chunks/s39/m.txz = the bundle of 7990401, this
# script): where the one-tile wgmma kernel's time goes per instruction at s = 4096, d128 full
# (the row where the per-CTA fixed cost seems to cost ~10 %: NOTES.md, session 39): one launch
# under ncu's full set with source counters, exported per SASS instruction.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/m && mkdir -p /tmp/m && tar -xJf .chunks/s39/m.txz -C /tmp/m
export LD_LIBRARY_PATH=/tmp/m/.gpu/lib:/usr/local/cuda/lib64
R=$OUT/t5; mkdir -p $R
timeout 200 ncu --clock-control none --set full --import-source yes --kernel-name regex:sm90_ws \
  --launch-count 1 -o /tmp/t5 /tmp/m/.gpu/bin/attention_bench --profile=4096 > $R/ncu_run.txt 2>&1
echo "ncu rc=$? $(el) s"
ncu -i /tmp/t5.ncu-rep --page details > $R/details.txt 2>&1; echo "details rc=$?"
ncu -i /tmp/t5.ncu-rep --page source --csv --print-source sass > $R/source_sass.csv 2>&1; echo "source rc=$? $(wc -c < $R/source_sass.csv) bytes"
grep -E "Duration|long_scoreboard|Warp Cycles Per Issued|Issue Slots Busy|Stall" $R/details.txt | head -20
tar -czf $OUT/t5.tgz -C $OUT t5 && rm -rf $R
echo "end $(el) s"
