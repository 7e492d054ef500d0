#!/usr/bin/env bash
# Session 46, call O (any Hopper GPU; carry .chunks/s46 with head.txz and v27.txz; ~470 s):
#   head.txz = mainline b749df7 (kAuto: v25's static persistent walk at <= 512 keys)
#   v27.txz  = branch v27 (v26's counter walk, kAuto's persistent class widened to
#              max_seqlen_k <= 1,024; v27.commit names it)
# 1. a 20-s gate on v27's persistent and choice tests; 2. head / v27 alternating, two rounds,
# the kernel kAuto runs on each row of each build, and the RULE line (NOTES.md v27, written
# before this call); 3. only if the rule adopts v27: bench/attention/results_run.sh of v27
# (RESULTS.md's run) with the time left to $1 (default 460 s), if >= 230 s are left. /tmp/o -> $OUT/o.tgz as it goes.
# Rebuild a bundle: cmake -S . -B build -DFLASHSERVE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo;
#   cmake --build build -j2 --target attention_cuda_test attention_bench;
#   scripts/gpu-bundle.sh /tmp/b/.gpu build/bin/attention_{cuda_test,bench};
#   tar -cJf .chunks/s46/NAME.txz -C /tmp/b .gpu
set -u
deadline=${1:-460}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
C=${CHUNKS:-.chunks/s46}
R=/tmp/o; rm -rf $R; mkdir -p $R
( while sleep 30; do tar -czf $OUT/o.tgz.part -C /tmp o && mv $OUT/o.tgz.part $OUT/o.tgz; done ) > /dev/null 2>&1 &
saver=$!
for b in head v27; do rm -rf /tmp/$b && mkdir -p /tmp/$b && tar -xJf $C/$b.txz -C /tmp/$b; done
# GATE=0 skips the gate (the bench validates every row against the naive kernel before timing).
if [[ ${GATE:-1} == 1 ]]; then
LD_LIBRARY_PATH=/tmp/v27/.gpu/lib:/usr/local/cuda/lib64 timeout 20 /tmp/v27/.gpu/bin/attention_cuda_test \
  --gtest_filter='PersistentPrefillTest*:AttentionConfigTest*:All/PrefillTest.*/wgmmaps_bf16_d128_causal_gqa8_varlen' \
  > $R/gate.txt 2>&1
rc=$?
echo "gate rc=$rc $(el) s $(grep -E '^\[  (PASSED|FAILED) ' $R/gate.txt | tr '\n' ' ')"
if [[ $rc -ne 0 ]]; then kill $saver; tail -20 $R/gate.txt; tar -czf $OUT/o.tgz -C /tmp o; exit 1; fi
fi
BENCH_TIMEOUT=110 bench/attention/alternate_bench.sh $R 2 head=/tmp/head/.gpu v27=/tmp/v27/.gpu
echo "bench done $(el) s"
python3 - $R <<'PY' | tee $R/ratios.md
import csv, re, statistics, sys
d = sys.argv[1]
def load(f):
    return {(r['config'], r['impl']): float(r['ms']) for r in csv.DictReader(open(f))
            if r['kind'] in ('prefill', 'serving')}
def max_k(k):
    for pat, f in ((r' s(\d+) ', lambda m: int(m[1])), (r' q(\d+) ctx(\d+) ', lambda m: int(m[1]) + int(m[2])),
                   (r' varlen\d+-(\d+) ', lambda m: int(m[1]))):
        m = re.search(pat, k)
        if m: return f(m)
    return 1 << 30
# kAuto's kernel on each row: the persistent form `wgmma_ps` up to the build's class (head:
# 512 keys, v27: 1,024), else the one-tile `wgmma` (the bench's wgmma rows split where the
# runner does; no row of <= 1,024 keys splits here).
pick = {'head': 512, 'v27': 1024}
def auto(b, r):
    t = load(f'{d}/bench_{b}_{r}.csv')
    return {k: t[(k, 'wgmma_ps' if max_k(k) <= pick[b] else 'wgmma')] for k, i in t if i == 'wgmma'}
rat = {}
for r in (1, 2):
    h, v = auto('head', r), auto('v27', r)
    for k in h:
        if k in v: rat.setdefault(k, []).append(h[k] / v[k])
print('| config | max keys | head kAuto / v27 kAuto (r1, r2) |\n|---|---|---|')
for k, v in rat.items():
    print(f'| {k} | {max_k(k)} | ' + ' / '.join(f'{x:.3f}' for x in v) + ' |')
both = {k: v for k, v in rat.items() if len(v) == 2}
cls = {k: statistics.mean(v) for k, v in both.items() if max_k(k) <= 1024}
rest = [statistics.mean(v) for k, v in both.items() if max_k(k) > 1024]
print(f'rows > 1,024 keys (the same one-tile kernel in both): median {statistics.median(rest):.3f}, '
      f'{min(rest):.3f}-{max(rest):.3f}')
lo = min(cls, key=cls.get)
med = statistics.median(cls.values())
# v27's rule (NOTES.md v27, written before this call): adopt if every row of <= 1,024 keys
# has the mean of its two rounds >= 0.98 and the median of those means is >= 1.03.
ok = cls[lo] >= 0.98 and med >= 1.03
print(f'class <= 1,024 keys: {len(cls)} rows, lowest mean {cls[lo]:.3f} ({lo}), median {med:.3f}: '
      f'RULE: {"v27 adopted" if ok else "v27 not adopted"}')
if ok: open(f'{d}/adopt', 'w').write('1')
PY
if [[ -f $R/adopt && $(( deadline - $(el) )) -ge 230 ]]; then
  rm -rf .gpu && cp -r /tmp/v27/.gpu .gpu
  bench/attention/results_run.sh $R/r "$(cat $C/v27.commit)" $(( deadline - $(el) ))
fi
kill $saver 2>/dev/null; wait $saver 2>/dev/null
tar -czf $OUT/o.tgz -C /tmp o
echo "end $(el) s"
