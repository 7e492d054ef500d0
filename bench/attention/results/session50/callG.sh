#!/usr/bin/env bash
# Next session's call G (any Hopper GPU; carry .chunks/s51; ~590 s): the head's whole
# attention_cuda_test (f16b74a moved the stream-K hand-over into helpers: its machine code
# differs from the measured 1dfd526's), then gpu-check's sanitize-full to the end of its list
# (memcheck and racecheck, 270 s each; call E of session 50 ran out of time in racecheck, and
# the stream-K case has had no racecheck).
C=${CHUNKS:-.chunks/s51}
rm -rf .gpu /tmp/b_g /tmp/g && mkdir -p /tmp/b_g /tmp/g && tar -xJf "$C/head.txz" -C /tmp/b_g && cp -r /tmp/b_g/.gpu .gpu
( while sleep 30; do tar -czf "$OUT/g.tgz.part" -C /tmp g && mv "$OUT/g.tgz.part" "$OUT/g.tgz"; done ) &
saver=$!
LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64 timeout 60 .gpu/bin/attention_cuda_test > /tmp/g/tests.txt 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/g/tests.txt | tr '\n' ' ')"
SANITIZER_FULL_TIMEOUT=270 GIT_COMMIT=$(cat "$C/head.commit") scripts/gpu-check.sh /tmp/g/san sanitize-full \
  > /tmp/g/stdout.txt 2>&1
echo "sanitize-full rc=$?"; cat /tmp/g/san/summary.txt
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/g.tgz" -C /tmp g
