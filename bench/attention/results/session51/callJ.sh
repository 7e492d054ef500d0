#!/usr/bin/env bash
# Session 52's call J (any Hopper GPU; carry .chunks/s52; ~330 s): the d64 shape probe v36p
# (results/session51/v36p_d64_two_warpgroups.patch: d64 at 2 consumer warpgroups, 128-row
# tiles, cuDNN's d64 shape) against the head. Bundles, here (the checkout is fresh):
#   bench/attention/make_bundle.sh .chunks/s52 head
#   git worktree add /tmp/v36p HEAD && (cd /tmp/v36p && git apply bench/attention/results/session51/v36p_d64_two_warpgroups.patch \
#     && bench/attention/make_bundle.sh /work/main/.chunks/s52 v36p)   # (its own build dir: minutes)
#   1. v36p's attention_cuda_test (AttentionConfigTest.PrefillSplits... is expected to fail:
#      the split counts assume 192-row d64 blocks; every other test must pass);
#   2. 5 alternating rounds of `attention_bench --prefill --serving --dtype bf16
#      --max-keys=4096`, head and v36p, then rule_v36p.py (written in session 51).
C=${CHUNKS:-.chunks/s52}
rm -rf .gpu /tmp/b_j /tmp/j && mkdir -p /tmp/b_j/head /tmp/b_j/v36p /tmp/j
tar -xJf "$C/head.txz" -C /tmp/b_j/head && tar -xJf "$C/v36p.txz" -C /tmp/b_j/v36p
( while sleep 30; do tar -czf "$OUT/j.tgz.part" -C /tmp j && mv "$OUT/j.tgz.part" "$OUT/j.tgz"; done ) &
saver=$!
V=/tmp/b_j/v36p/.gpu
LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/j/tests.txt 2>&1
echo "v36p tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/j/tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' /tmp/j/tests.txt | head
BENCH_ARGS="--prefill --serving --dtype bf16 --max-keys=4096" BENCH_TIMEOUT=60 \
  bench/attention/alternate_bench.sh /tmp/j 5 head=/tmp/b_j/head/.gpu v36p=$V
python3 bench/attention/results/session51/rule_v36p.py /tmp/j | tee /tmp/j/rule_v36p.md | grep -E "RULE|control|d64 s512"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/j.tgz" -C /tmp j
