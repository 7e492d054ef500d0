#!/usr/bin/env bash
# Session 43, call H (H200; ~450 s; NOT RUN: no H200 came in three tries): RESULTS.md's run at this session's head (its kernels are
# 1ed22d7's, as call D's 72c0718) on the GPU, the H200 (session 42's tables were all
# H100's). .gpu = attention_cuda_test + attention_bench built at the head (carried).
# $1 = commit, $2 = results_run.sh's deadline (s). A safety tar at $2 + 10 s in case the call's
# limit cuts the run.
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
( sleep $(( $2 + 10 )); tar -czf $OUT/h_partial.tgz -C /tmp h ) > /dev/null 2>&1 &
safety=$!
bench/attention/results_run.sh /tmp/h "$1" "$2"
tar -czf $OUT/h.tgz -C /tmp h
kill $safety 2>/dev/null; pkill -P $safety sleep 2>/dev/null; true
