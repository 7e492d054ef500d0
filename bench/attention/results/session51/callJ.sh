#!/usr/bin/env bash
# Session 52's calls J1 and J2 (any Hopper GPU; carry .chunks/s52; ~330 s each): v36 (d64's
# narrow shape at <= 512 keys) and v37 (wgmma descriptors advanced by constant adds), each a
# patch in results/session51/ with its prediction and rule in NOTES.md, against the head.
# Bundles, here (the checkout is fresh; each worktree builds in its own build dir, minutes):
#   bench/attention/make_bundle.sh .chunks/s52 head
#   for v in v36_d64_narrow_shape v37_descriptor_advance; do n=${v%%_*}
#     git worktree add /tmp/$n HEAD && (cd /tmp/$n && git apply "$OLDPWD/bench/attention/results/session51/$v.patch" &&
#       bench/attention/make_bundle.sh "$OLDPWD/.chunks/s52" $n); done
#   callJ.sh v36: its attention_cuda_test; memcheck + racecheck of the d64 Hopper tests at
#     lengths <= 512 (the narrow shape), 60 s a tool; 7 alternating rounds of
#     `attention_bench --prefill --dtype both --max-keys=1024`; rule_v36.py.
#   callJ.sh v37: its attention_cuda_test; 5 alternating rounds of `attention_bench --prefill
#     --serving --dtype bf16 --max-keys=4096`; rule_v37.py.
# (results/session51/v36p_d64_two_warpgroups.patch, the probe with every d64 call narrow, with
# rule_v36p.py, says whether the narrow shape's class should reach past 512 keys: a later call.)
n=${1:?usage: callJ.sh v36|v37}
C=${CHUNKS:-.chunks/s52}
rm -rf .gpu /tmp/b_$n /tmp/$n && mkdir -p /tmp/b_$n/head /tmp/b_$n/new /tmp/$n
tar -xJf "$C/head.txz" -C /tmp/b_$n/head && tar -xJf "$C/$n.txz" -C /tmp/b_$n/new
( while sleep 30; do tar -czf "$OUT/$n.tgz.part" -C /tmp $n && mv "$OUT/$n.tgz.part" "$OUT/$n.tgz"; done ) &
saver=$!
V=/tmp/b_$n/new/.gpu
LD_LIBRARY_PATH=$V/lib:/usr/local/cuda/lib64 timeout 60 $V/bin/attention_cuda_test > /tmp/$n/tests.txt 2>&1
echo "$n tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$n/tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' /tmp/$n/tests.txt | head
if [[ $n == v36 ]]; then
  FLASHSERVE_TEST_MAX_LEN=512 bench/attention/sanitize_tests.sh /tmp/$n narrow $V 60 \
    '*/wgmma_bf16_d64_causal_gqa3_varlen:*/wgmmaps_bf16_d64_full_gqa3_chunked:*/wgmmaps_bf16_d64_causal_gqa8_varlen'
  BENCH_ARGS="--prefill --dtype both --max-keys=1024" BENCH_TIMEOUT=60 rounds=7
else
  BENCH_ARGS="--prefill --serving --dtype bf16 --max-keys=4096" BENCH_TIMEOUT=60 rounds=5
fi
BENCH_ARGS=$BENCH_ARGS BENCH_TIMEOUT=60 bench/attention/alternate_bench.sh /tmp/$n $rounds \
  head=/tmp/b_$n/head/.gpu $n=$V
python3 bench/attention/results/session51/rule_$n.py /tmp/$n | tee /tmp/$n/rule_$n.md | grep -E "RULE|changed|control|rows:"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/$n.tgz" -C /tmp $n
