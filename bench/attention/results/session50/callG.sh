#!/usr/bin/env bash
# Next session's call G (any Hopper GPU; carry .chunks/s51; ~580 s): gpu-check's sanitize-full
# of the head to the end of its list (memcheck and racecheck, 280 s each; call E of session 50
# ran out of time in racecheck, and the stream-K case has had no racecheck).
C=${CHUNKS:-.chunks/s51}
rm -rf .gpu /tmp/b_g /tmp/g && mkdir -p /tmp/b_g /tmp/g && tar -xJf "$C/head.txz" -C /tmp/b_g && cp -r /tmp/b_g/.gpu .gpu
( while sleep 30; do tar -czf "$OUT/g.tgz.part" -C /tmp g && mv "$OUT/g.tgz.part" "$OUT/g.tgz"; done ) &
saver=$!
SANITIZER_FULL_TIMEOUT=280 GIT_COMMIT=$(cat "$C/head.commit") scripts/gpu-check.sh /tmp/g/san sanitize-full \
  > /tmp/g/stdout.txt 2>&1
echo "sanitize-full rc=$?"; cat /tmp/g/san/summary.txt
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/g.tgz" -C /tmp g
