#!/usr/bin/env bash
# Session 40, call E (any Hopper GPU; carry .chunks/s40/h.txz = attention_bench with --host):
# the host time of one attention_prefill call (mma, wgmma) and of one tensor-map encode,
# three times.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/h && mkdir -p /tmp/h && tar -xJf .chunks/s40/h.txz -C /tmp/h
export LD_LIBRARY_PATH=/tmp/h/.gpu/lib:/usr/local/cuda/lib64
for r in 1 2 3; do timeout 60 /tmp/h/.gpu/bin/attention_bench --host; done
