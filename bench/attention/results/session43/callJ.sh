#!/usr/bin/env bash
# Prepared in session 43 for the next session (any Hopper GPU; ~420 s): v24's second
# measurement under the rule written in NOTES.md (v24's outcome) before it: mainline if each
# of the four s512 rows is >= 1.02 in both rounds and no row is below 0.98 in both rounds.
# Bundles (git-ignored; rebuild: a worktree at the head for h, the same plus
#   `git apply bench/attention/results/session43/v24_l2_next.patch` for p; in each
#   cmake -S . -B build -DFLASHSERVE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   cmake --build build -j2 --target attention_cuda_test attention_bench
#   scripts/gpu-bundle.sh /tmp/bX/.gpu build/bin/attention_{cuda_test,bench}
#   tar -cJf .chunks/s44/X.txz -C /tmp/bX .gpu):
#   .chunks/s44/h.txz  the head;  .chunks/s44/p.txz  the head + v24
# 1. v24's tests at full lengths; 2. h / p alternating, two rounds, and the rule's verdict;
# 3. memcheck + racecheck of two v24 tests past 1k queries (many CTAs: the prefetch runs).
# Then, with the build the rule picks: bench/attention/results_run.sh (RESULTS.md's run). For
# v24: `git apply` the patch and commit it, `rm -rf .gpu && tar -xJf .chunks/s44/p.txz` (its
# binaries are that commit's kernels), and a call `bench/attention/results_run.sh $OUT/r
# COMMIT 560; tar -czf $OUT/r.tgz -C $OUT r` carrying .gpu; for the head, h.txz likewise.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for b in h p; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s44/$b.txz -C /tmp/$b; done
R=/tmp/j; rm -rf $R; mkdir -p $R
LD_LIBRARY_PATH=/tmp/p/.gpu/lib:/usr/local/cuda/lib64 timeout 100 /tmp/p/.gpu/bin/attention_cuda_test > $R/tests_p.txt 2>&1
echo "tests p rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_p.txt | tr '\n' ' ')"
BENCH_TIMEOUT=80 bench/attention/alternate_bench.sh $R 2 h=/tmp/h/.gpu p=/tmp/p/.gpu
echo "bench done $(el) s"
python3 - $R <<'PY'
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
tar -czf $OUT/j.tgz -C /tmp j
P='All/PrefillTest.MatchesReferenceWithinNaiveError'
bench/attention/sanitize_tests.sh $R p /tmp/p/.gpu $(( (560 - $(el)) / 2 )) \
  "$P/wgmma_bf16_d128_causal_gqa8_varlen:$P/wgmma_bf16_d64_full_gqa3_varlen"
tar -czf $OUT/j.tgz -C /tmp j
echo "end $(el) s"
