#!/usr/bin/env bash
# Session 43, call H (H200; ~500 s): RESULTS.md's run at this session's head (its kernels are
# 1ed22d7's, as call D's 72c0718) on the GPU, the H200 (session 42's tables were all
# H100's). .gpu = attention_cuda_test + attention_bench built at the head (carried).
set -u
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
bench/attention/results_run.sh /tmp/h "$1" 470
tar -czf $OUT/h.tgz -C /tmp h
