#!/usr/bin/env bash
# Session 45's form of session 44's callL.sh (same bundles, same measurement and rule; carry
# .chunks/s44/{h,ps}.txz): ordered by what the decision needs first, for a call that may run
# short of device time after this session's failed starts: 1. the 30-s gate; 2. h / ps
# alternating, two rounds, the ratios and v25's RULE lines; 3. ps's whole test binary; 4.
# memcheck + racecheck of the persistent tests. /tmp/l is tarred to $OUT/l.tgz after each
# stage and every 30 s in the background, so a call cut short still returns what it measured.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
R=/tmp/l; rm -rf $R; mkdir -p $R
( while sleep 30; do tar -czf $OUT/l.tgz.part -C /tmp l && mv $OUT/l.tgz.part $OUT/l.tgz; done ) > /dev/null 2>&1 &
saver=$!
for b in h ps; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf .chunks/s44/$b.txz -C /tmp/$b; done
L=/tmp/ps/.gpu/lib:/usr/local/cuda/lib64
LD_LIBRARY_PATH=$L timeout 30 /tmp/ps/.gpu/bin/attention_cuda_test \
  --gtest_filter='PersistentPrefillTest*:All/PrefillTest.*/wgmmaps_bf16_d128_causal_gqa8_varlen' \
  > $R/gate.txt 2>&1
rc=$?
echo "gate rc=$rc $(el) s $(grep -E '^\[  (PASSED|FAILED) ' $R/gate.txt | tr '\n' ' ')"
if [[ $rc -ne 0 ]]; then kill $saver; tail -20 $R/gate.txt; tar -czf $OUT/l.tgz -C /tmp l; exit 1; fi
BENCH_TIMEOUT=110 bench/attention/alternate_bench.sh $R 2 h=/tmp/h/.gpu ps=/tmp/ps/.gpu
echo "bench done $(el) s"
python3 - $R <<'PY' | tee $R/ratios.md
import csv, statistics, sys
d = sys.argv[1]
def load(f, impl):
    return {r['config']: float(r['ms']) for r in csv.DictReader(open(f))
            if r['impl'] == impl and r['kind'] in ('prefill', 'serving')}
pairs = {'head wgmma / ps wgmma_ps': ('h', 'wgmma', 'ps', 'wgmma_ps'),
         'ps wgmma / ps wgmma_ps': ('ps', 'wgmma', 'ps', 'wgmma_ps'),
         'head wgmma / ps wgmma': ('h', 'wgmma', 'ps', 'wgmma')}
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
# v25's rule (NOTES.md): a class the host can tell from the call's parameters goes to the
# persistent form only if every row of it is >= 1.02 in both rounds (head wgmma / ps wgmma_ps).
classes = {'max_seqlen_k <= 512 (the s512 grid rows)': lambda k: ' s512 ' in k,
           'max_seqlen_k <= 1024 (s512, s1k, the varlen batch)':
               lambda k: ' s512 ' in k or ' s1024 ' in k or 'varlen' in k,
           'chunks b8 (not a class alone; shown)': lambda k: k.startswith('b8 q512'),
           'chunks b1 (not a class alone; shown)': lambda k: k.startswith('b1 q512')}
r = tab['head wgmma / ps wgmma_ps']
for c, f in classes.items():
    v = [min(x) for k, x in r.items() if f(k) and len(x) == 2]
    print(f'class {c}: {len(v)} rows, lowest {min(v):.3f}: ' + ('RULE: to the persistent form' if v and min(v) >= 1.02 else 'RULE: stays'))
PY
tar -czf $OUT/l.tgz -C /tmp l
LD_LIBRARY_PATH=$L timeout 120 /tmp/ps/.gpu/bin/attention_cuda_test > $R/tests_ps.txt 2>&1
echo "tests ps rc=$? $(el) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/tests_ps.txt | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $R/tests_ps.txt | head
tar -czf $OUT/l.tgz -C /tmp l
P='PersistentPrefillTest*:All/WindowPrefillTest.*/wgmmaps_bf16_d64_w1100_chunked'
bench/attention/sanitize_tests.sh $R ps /tmp/ps/.gpu $(( (560 - $(el)) / 2 )) "$P"
tar -czf $OUT/l.tgz -C /tmp l
kill $saver 2>/dev/null; wait $saver 2>/dev/null
tar -czf $OUT/l.tgz -C /tmp l
echo "end $(el) s"
