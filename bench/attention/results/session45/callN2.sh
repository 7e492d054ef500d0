#!/usr/bin/env bash
# Prepared in session 45 for the next (any Hopper GPU; carry .chunks/s45/{head,v26}.txz;
# ~430 s): v26's first measurement (NOTES.md v26: prediction and rule written before it).
#   head.txz = mainline (v25 routed: `wgmma` the one-tile grid, `wgmma_ps` v25's static walk)
#   v26.txz  = branch v26 (results/session45/v26_dynamic.patch on the head): `wgmma_ps` takes
#              its tiles from a device-wide counter
# callL2.sh's order: 1. a 30-s gate on the persistent tests (a never-run kernel); 2. head /
# v26 alternating, two rounds, the ratios and v26's RULE lines; 3. v26's whole test binary;
# 4. memcheck + racecheck of the persistent tests. /tmp/n2 -> $OUT/n2.tgz as it goes.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
R=/tmp/n2; rm -rf $R; mkdir -p $R
( while sleep 30; do tar -czf $OUT/n2.tgz.part -C /tmp n2 && mv $OUT/n2.tgz.part $OUT/n2.tgz; done ) > /dev/null 2>&1 &
saver=$!
for b in head v26; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf ${CHUNKS:-.chunks/s45}/$b.txz -C /tmp/$b; done
L=/tmp/v26/.gpu/lib:/usr/local/cuda/lib64
LD_LIBRARY_PATH=$L timeout 30 /tmp/v26/.gpu/bin/attention_cuda_test \
  --gtest_filter='PersistentPrefillTest*:All/PrefillTest.*/wgmmaps_bf16_d128_causal_gqa8_varlen' \
  > $R/gate.txt 2>&1
rc=$?
echo "gate rc=$rc $(el) s $(grep -E '^\[  (PASSED|FAILED) ' $R/gate.txt | tr '\n' ' ')"
if [[ $rc -ne 0 ]]; then kill $saver; tail -20 $R/gate.txt; tar -czf $OUT/n2.tgz -C /tmp n2; exit 1; fi
# The SM clock and power through the bench (v25's full rows at 8k-16k lost 3-6 % with the
# one-tile kernel's main-loop SASS: is it the clock under the power cap, the walk leaving no
# idle gaps between tiles?), every 100 ms; the bench logs' row order places the samples.
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw \
  --format=csv -lms 100 > $R/clocks.csv 2>&1 &
smi=$!
BENCH_TIMEOUT=110 bench/attention/alternate_bench.sh $R 2 head=/tmp/head/.gpu v26=/tmp/v26/.gpu
kill $smi 2>/dev/null
echo "bench done $(el) s"
python3 - $R <<'PY' | tee $R/ratios.md
import csv, re, statistics, sys
d = sys.argv[1]
def load(f, impl):
    return {r['config']: float(r['ms']) for r in csv.DictReader(open(f))
            if r['impl'] == impl and r['kind'] in ('prefill', 'serving')}
pairs = {'v25 / v26 (head wgmma_ps / v26 wgmma_ps)': ('head', 'wgmma_ps', 'v26', 'wgmma_ps'),
         'one-tile / v26 (v26 wgmma / v26 wgmma_ps)': ('v26', 'wgmma', 'v26', 'wgmma_ps'),
         'one-tile / v25 (head wgmma / head wgmma_ps)': ('head', 'wgmma', 'head', 'wgmma_ps')}
tab = {}
for name, (b1, i1, b2, i2) in pairs.items():
    rounds = [(load(f'{d}/bench_{b1}_{r}.csv', i1), load(f'{d}/bench_{b2}_{r}.csv', i2)) for r in (1, 2)]
    tab[name] = {k: [a[k] / b[k] for a, b in rounds if k in a and k in b] for k in rounds[0][0]}
names = list(pairs)
print('| config | ' + ' | '.join(f'{n} (r1, r2)' for n in names) + ' |')
print('|---' * (len(names) + 1) + '|')
for k in tab[names[0]]:
    print(f'| {k} | ' + ' | '.join(' / '.join(f'{x:.3f}' for x in tab[n].get(k, [])) for n in names) + ' |')
for n in names:
    print(f'median {n}: ' + ' '.join(f'{statistics.median(v[i] for v in tab[n].values() if len(v) == 2):.3f}' for i in (0, 1)))
# v26's rule (NOTES.md v26, written before this call): (a) v26 replaces v25 if every s512 row
# of v25 / v26 is >= 0.98 in both rounds; (b) then kAuto's persistent class widens to
# max_seqlen_k <= L for the largest L of 1024, 2048, 4096 where every row of one-tile / v26
# with max_seqlen_k <= L is >= 1.02 in both rounds, leaving out the rows the one-tile grid
# splits (the b1 9-head chunk rows: calls under one wave keep the split).
split = set()
for r in (1, 2):
    for line in open(f'{d}/bench_v26_{r}.log'):
        m = re.match(r'\s+(.*) wgmma: \d+ key splits', line)
        if m: split.add(m.group(1))
def max_k(k):
    m = re.search(r' s(\d+) ', k)
    if m: return int(m.group(1))
    m = re.search(r'q512 ctx(\d+) ', k)
    if m: return int(m.group(1)) + 512
    return 1024 if 'varlen' in k else 1 << 30
a = tab[names[0]]
s512 = [min(v) for k, v in a.items() if ' s512 ' in k and len(v) == 2]
ok_a = bool(s512) and min(s512) >= 0.98
print(f'(a) s512 v25 / v26 lowest {min(s512) if s512 else float("nan"):.3f}: ' +
      ('RULE: v26 replaces v25' if ok_a else 'RULE: v25 stays'))
b = tab[names[1]]
for L in (1024, 2048, 4096):
    v = [(min(x), k) for k, x in b.items() if max_k(k) <= L and k not in split and len(x) == 2]
    lo = min(v) if v else (float('nan'), '')
    print(f'(b) max_seqlen_k <= {L}: {len(v)} rows, lowest {lo[0]:.3f} ({lo[1]}): ' +
          ('RULE: persistent' if ok_a and v and lo[0] >= 1.02 else 'RULE: not'))
print('split rows left out:', sorted(split))
PY
tar -czf $OUT/n2.tgz -C /tmp n2
LD_LIBRARY_PATH=$L timeout 120 /tmp/v26/.gpu/bin/attention_cuda_test > $R/tests_v26.txt 2>&1
echo "tests v26 rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_v26.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_v26.txt | head
tar -czf $OUT/n2.tgz -C /tmp n2
P='PersistentPrefillTest*:All/WindowPrefillTest.*/wgmmaps_bf16_d64_w1100_chunked'
# racecheck: the persistent PrefillTest cases (1-1,100 tokens) and the back-to-back test (the
# long-walk test ran past racecheck's time in session 45; memcheck takes it in ~20 s).
RP='All/PrefillTest.*/wgmmaps_bf16_d128_causal_gqa8_varlen:All/PrefillTest.*/wgmmaps_bf16_d64_full*'
RP+=':PersistentPrefillTest.CallsBackToBack*'
bench/attention/sanitize_tests.sh $R v26 /tmp/v26/.gpu $(( (560 - $(el)) / 2 )) "$P" "$RP"
tar -czf $OUT/n2.tgz -C /tmp n2
kill $saver 2>/dev/null; wait $saver 2>/dev/null
tar -czf $OUT/n2.tgz -C /tmp n2
echo "end $(el) s"
