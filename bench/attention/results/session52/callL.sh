#!/usr/bin/env bash
# Session 52's call L (any Hopper GPU; carry .chunks/s52; ~100 s, ~380 s if v37 is adopted):
# v37's re-test (NOTES.md "v37 re-test": rule_v37b.py, written before this call) on the s512
# rows, 7 alternating rounds of `attention_bench --prefill --max-keys=512 --dtype both`
# against the head; if adopted, gpu-check's sanitize-full list on v37's bundle (v37 changes
# the machine code of every Hopper kernel). Bundles: head.txz (c4f61fa) and v37c.txz (the
# branch cand/v37, 89498d1), `bench/attention/make_bundle.sh .chunks/s52 NAME` in each tree.
C=${CHUNKS:-.chunks/s52}
rm -rf .gpu /tmp/b_l /tmp/l && mkdir -p /tmp/b_l/head /tmp/b_l/v37 /tmp/l
tar -xJf "$C/head.txz" -C /tmp/b_l/head && tar -xJf "$C/v37c.txz" -C /tmp/b_l/v37
( while sleep 30; do tar -czf "$OUT/l.tgz.part" -C /tmp l && mv "$OUT/l.tgz.part" "$OUT/l.tgz"; done ) &
saver=$!
BENCH_ARGS="--prefill --max-keys=512 --dtype both" BENCH_TIMEOUT=60 \
  bench/attention/alternate_bench.sh /tmp/l 7 head=/tmp/b_l/head/.gpu v37=/tmp/b_l/v37/.gpu
python3 bench/attention/results/session52/rule_v37b.py /tmp/l | tee /tmp/l/rule_v37b.md | grep -E "RULE|bf16 rows|controls"
if [[ -e /tmp/l/adopt ]]; then
  cp -r /tmp/b_l/v37/.gpu .gpu
  GIT_COMMIT=89498d1 SANITIZER_FULL_TIMEOUT=${SAN_S:-170} scripts/gpu-check.sh /tmp/l/san sanitize-full
  cat /tmp/l/san/summary.txt 2>/dev/null | tail -3
fi
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/l.tgz" -C /tmp l
