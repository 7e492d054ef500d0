#!/usr/bin/env bash
# Session 52's call K (any Hopper GPU; carry .chunks/s52; ~400 s): session 51's calls J1 and J2
# in one call (machines were scarce: one start for both). Bundles as in
# results/session51/callJ.sh's header (head, v36, v37; the candidates are the branches
# cand/v36 576a0eb and cand/v37 89498d1 here, each one commit on c4f61fa).
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
for n in v36 v37; do
  bash bench/attention/results/session51/callJ.sh $n
  echo "$n done at $(( $(date +%s) - t0 )) s"
done
