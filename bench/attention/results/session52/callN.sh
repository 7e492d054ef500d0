#!/usr/bin/env bash
# Session 52's call N (any Hopper GPU with torch; carry .chunks/s52; ~150 s): what cuDNN's
# s512 causal kernels do that ours do not (NOTES.md "Session 52 call N"). For d64 causal and
# d128 causal at s512 (the issue's furthest rows), ncu's source page (every SASS instruction
# with its executed count and stall samples) and the pipes' utilisation, of ours (the head,
# c4f61fa: launches 7 and 5 of the sm90_ws kernels at --profile=512) and of cuDNN's
# (peers_profile.py --seq 512: launches 11 and 8 of the cudnn kernels). Summarised here with
# ncu_source_top.py and opcode counts (results/session52/opcode_mix.py).
C=${CHUNKS:-.chunks/s52}
rm -rf .gpu /tmp/b_n /tmp/n && mkdir -p /tmp/b_n /tmp/n && tar -xJf "$C/head.txz" -C /tmp/b_n && cp -r /tmp/b_n/.gpu .gpu
( while sleep 30; do tar -czf "$OUT/n.tgz.part" -C /tmp n && mv "$OUT/n.tgz.part" "$OUT/n.tgz"; done ) &
saver=$!
export LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
args=(--clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight
  --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy
  --metrics 'regex:^sm__inst_executed_pipe_[a-z_]+\.avg\.pct_of_peak_sustained_active$,regex:^sm__pipe_[a-z_]+_cycles_active\.avg\.pct_of_peak_sustained_active$')
for spec in ours:7:d64causal ours:5:d128causal cudnn:11:d64causal cudnn:8:d128causal; do
  IFS=: read -r who skip name <<<"$spec"
  if [[ $who == ours ]]; then
    timeout 90 ncu "${args[@]}" --kernel-name regex:sm90_ws --launch-skip "$skip" --launch-count 1 \
      -f -o "/tmp/n/${who}_$name" .gpu/bin/attention_bench --profile=512 > "/tmp/n/ncu_${who}_$name.log" 2>&1
  else
    timeout 120 ncu "${args[@]}" --kernel-name regex:cudnn --launch-skip "$skip" --launch-count 1 \
      -f -o "/tmp/n/${who}_$name" python3 bench/attention/peers_profile.py --seq 512 > "/tmp/n/ncu_${who}_$name.log" 2>&1
  fi
  echo "ncu $who $name rc=$?"
  ncu -i "/tmp/n/${who}_$name.ncu-rep" --page source --csv --print-source sass > "/tmp/n/src_${who}_$name.csv" 2>&1
  ncu -i "/tmp/n/${who}_$name.ncu-rep" --page details > "/tmp/n/details_${who}_$name.txt" 2>&1
  ncu -i "/tmp/n/${who}_$name.ncu-rep" --page raw --csv > "/tmp/n/raw_${who}_$name.csv" 2>&1
  grep -E "Duration|Elapsed Cycles|Executed Ipc A" "/tmp/n/details_${who}_$name.txt" | head -5
  gzip -f "/tmp/n/src_${who}_$name.csv" "/tmp/n/raw_${who}_$name.csv"; rm -f "/tmp/n/${who}_$name.ncu-rep"
done
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/n.tgz" -C /tmp n
# Here: python3 bench/attention/opcode_mix.py ours=n/src_ours_d64causal.csv.gz cudnn=n/src_cudnn_d64causal.csv.gz
