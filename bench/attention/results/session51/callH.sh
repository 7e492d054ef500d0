#!/usr/bin/env bash
# Session 51's call H (any Hopper GPU; carry .chunks/s51; ~300 s). Bundle v34.txz
# (`bench/attention/make_bundle.sh .chunks/s51 v34` at the v34 commit):
#   1. the whole attention_cuda_test (v34 moves kAuto's d64 causal and d128 full calls past
#      4,096 keys to the persistent form);
#   2. memcheck + racecheck of the d64 persistent form past 1k keys (the counter walk; the
#      sanitize-full list had it only at <= 97 keys), 100 s a tool;
#   3. --host: the host time of one call a kernel;
#   4. ncu stall sampling by SASS instruction (SourceCounters) of the persistent kernel at three
#      s512 rows (launches 1, 5 and 7 of the sm90_ws kernels at --profile=512: d128 full, d128
#      causal, d64 causal), summarised by ncu_source_top.py: where the s512 tiles' time goes.
C=${CHUNKS:-.chunks/s51}
rm -rf .gpu /tmp/b_h /tmp/h && mkdir -p /tmp/b_h /tmp/h && tar -xJf "$C/v34.txz" -C /tmp/b_h && cp -r /tmp/b_h/.gpu .gpu
( while sleep 30; do tar -czf "$OUT/h.tgz.part" -C /tmp h && mv "$OUT/h.tgz.part" "$OUT/h.tgz"; done ) &
saver=$!
export LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64
timeout 60 .gpu/bin/attention_cuda_test > /tmp/h/tests.txt 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/h/tests.txt | tr '\n' ' ')"
bench/attention/sanitize_tests.sh /tmp/h d64ps .gpu 100 \
  '*/wgmmaps_bf16_d64_causal_gqa3_varlen:*/wgmmaps_bf16_d64_full_gqa8_chunked'
timeout 30 .gpu/bin/attention_bench --host > /tmp/h/host.txt 2>&1; grep host: /tmp/h/host.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for spec in 1:d128full 5:d128causal 7:d64causal; do
  skip=${spec%%:*} name=${spec##*:}
  timeout 90 ncu --clock-control none --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight --kernel-name regex:sm90_ws --launch-skip "$skip" --launch-count 1 \
    -f -o "/tmp/h/src_$name" .gpu/bin/attention_bench --profile=512 > "/tmp/h/ncu_$name.log" 2>&1
  echo "ncu $name rc=$?"
  ncu -i "/tmp/h/src_$name.ncu-rep" --page source --csv --print-source sass > "/tmp/h/src_$name.csv" 2>&1
  ncu -i "/tmp/h/src_$name.ncu-rep" --page details > "/tmp/h/details_$name.txt" 2>&1
  python3 bench/attention/ncu_source_top.py "/tmp/h/src_$name.csv" 70 > "/tmp/h/top_$name.md" 2>&1
  head -25 "/tmp/h/top_$name.md"; tail -2 "/tmp/h/top_$name.md"
  gzip -f "/tmp/h/src_$name.csv"; rm -f "/tmp/h/src_$name.ncu-rep"
done
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/h.tgz" -C /tmp h
