#!/usr/bin/env bash
# Session 44, call K (any Hopper GPU; carry .chunks/s44/{h,p}.txz; ~560 s): session 43's
# call J and RESULTS.md's run in one call, since each machine start costs ~1-3 min of a
# 30-min budget and this session lost 9 min to starts that failed before its first call.
#   $1 = the commit whose kernels h.txz holds (the head), $2 = the commit of head + v24
#   (results/session43/v24_l2_next.patch), whose kernels p.txz holds; $3 = the deadline in
#   seconds from the call's start (default 575; the safety tar 10 s after it).
# 1. The head's new PrefillOutputTest (its unaligned-output path), then v24's tests at full
#    lengths (the new test included);
# 2. h / p alternating, two rounds, and the verdict of v24's rule, written before this
#    measurement (NOTES.md, v24): mainline if each of the four s512 rows is >= 1.02 in both
#    rounds and no row is below 0.98 in both rounds;
# 3. bench/attention/results_run.sh with the bundle the rule picks (gpu-check info tests
#    bench peers, then sanitize-full with the time left), labelled with its commit.
# Everything under /tmp/k, tarred to $OUT/k.tgz (a safety tar at 585 s in case the limit cuts).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
R=/tmp/k; rm -rf $R; mkdir -p $R
( sleep $(( ${3:-575} + 10 )); tar -czf $OUT/k_partial.tgz -C /tmp k ) > /dev/null 2>&1 &
safety=$!
for b in h p; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s44/$b.txz -C /tmp/$b; done
LD_LIBRARY_PATH=/tmp/h/.gpu/lib:/usr/local/cuda/lib64 timeout 60 /tmp/h/.gpu/bin/attention_cuda_test \
  --gtest_filter='PrefillOutputTest*' > $R/tests_h_output.txt 2>&1
echo "tests h PrefillOutputTest rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_h_output.txt | tr '\n' ' ')"
LD_LIBRARY_PATH=/tmp/p/.gpu/lib:/usr/local/cuda/lib64 timeout 100 /tmp/p/.gpu/bin/attention_cuda_test > $R/tests_p.txt 2>&1
echo "tests p rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_p.txt | tr '\n' ' ')"
BENCH_TIMEOUT=80 bench/attention/alternate_bench.sh $R 2 h=/tmp/h/.gpu p=/tmp/p/.gpu
echo "bench done $(el) s"
python3 - $R <<'PY' | tee $R/rule.txt
import csv, sys
d = sys.argv[1]
def load(f):
    return {r['config']: float(r['ms']) for r in csv.DictReader(open(f))
            if r['impl'] == 'wgmma' and r['kind'] in ('prefill', 'serving')}
rounds = [(load(f'{d}/bench_h_{i}.csv'), load(f'{d}/bench_p_{i}.csv')) for i in (1, 2)]
ratio = {k: [h[k] / p[k] for h, p in rounds] for k in rounds[0][0]}
s512 = {k: v for k, v in ratio.items() if ' s512 ' in k + ' '}
ok512 = len(s512) == 4 and all(min(v) >= 1.02 for v in s512.values())
losers = [k for k, v in ratio.items() if max(v) < 0.98]
for k, v in s512.items(): print(f'{k}: {v[0]:.3f} {v[1]:.3f}')
print('rows below 0.98 in both rounds:', losers or 'none')
print('RULE:', 'v24 to mainline' if ok512 and not losers else 'v24 stays out')
PY
if grep -q 'RULE: v24 to mainline' $R/rule.txt; then pick=p commit=$2; else pick=h commit=$1; fi
echo "results run: $pick ($commit) from $(el) s"
rm -rf .gpu && cp -r /tmp/$pick/.gpu .gpu
tar -czf $OUT/k.tgz -C /tmp k
bench/attention/results_run.sh $R/r "$commit" $(( ${3:-575} - $(el) ))
tar -czf $OUT/k.tgz -C /tmp k
kill $safety 2>/dev/null; pkill -P $safety sleep 2>/dev/null
echo "end $(el) s"
