#!/usr/bin/env bash
# Session 52's call J (any Hopper GPU; carry .chunks/s52; ~500 s): two builds against the head,
# each a patch in results/session51/ (NOTES.md v36p, v37): the d64 shape probe v36p (d64 at 2
# consumer warpgroups, 128-row tiles, cuDNN's d64 shape) and v37 (wgmma descriptors advanced by
# constant adds). Bundles, here (the checkout is fresh; each worktree builds in its own
# build dir, minutes):
#   bench/attention/make_bundle.sh .chunks/s52 head
#   for v in v36p_d64_two_warpgroups v37_descriptor_advance; do n=${v%%_*}
#     git worktree add /tmp/$n HEAD && (cd /tmp/$n && git apply bench/attention/results/session51/$v.patch &&
#       bench/attention/make_bundle.sh /work/main/.chunks/s52 $n); done
#   1. each build's attention_cuda_test (v36p: AttentionConfigTest.PrefillSplits... is expected
#      to fail, its split counts assume 192-row d64 blocks; every other test must pass);
#   2. 5 alternating rounds of `attention_bench --prefill --serving --dtype bf16
#      --max-keys=4096`, head, v36p and v37, then rule_v36p.py and rule_v37.py (written in
#      session 51).
C=${CHUNKS:-.chunks/s52}
rm -rf .gpu /tmp/b_j /tmp/j && mkdir -p /tmp/b_j/head /tmp/b_j/v36p /tmp/j
mkdir -p /tmp/b_j/v37
tar -xJf "$C/head.txz" -C /tmp/b_j/head && tar -xJf "$C/v36p.txz" -C /tmp/b_j/v36p && tar -xJf "$C/v37.txz" -C /tmp/b_j/v37
( while sleep 30; do tar -czf "$OUT/j.tgz.part" -C /tmp j && mv "$OUT/j.tgz.part" "$OUT/j.tgz"; done ) &
saver=$!
for n in v36p v37; do
  V=/tmp/b_j/$n/.gpu
  LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/j/tests_$n.txt 2>&1
  echo "$n tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/j/tests_$n.txt | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' /tmp/j/tests_$n.txt | head
done
BENCH_ARGS="--prefill --serving --dtype bf16 --max-keys=4096" BENCH_TIMEOUT=60 \
  bench/attention/alternate_bench.sh /tmp/j 5 head=/tmp/b_j/head/.gpu v36p=/tmp/b_j/v36p/.gpu v37=/tmp/b_j/v37/.gpu
python3 bench/attention/results/session51/rule_v36p.py /tmp/j | tee /tmp/j/rule_v36p.md | grep -E "RULE|control|d64 s512"
python3 bench/attention/results/session51/rule_v37.py /tmp/j | tee /tmp/j/rule_v37.md | grep -E "RULE|rows:|controls"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/j.tgz" -C /tmp j
