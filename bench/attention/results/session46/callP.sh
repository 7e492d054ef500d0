#!/usr/bin/env bash
# Prepared in session 46 for the next (any Hopper GPU; carry .chunks/s47; ~250 s, ~560 s if
# adopted): v27's re-test (NOTES.md "v27 re-test": prediction and rule written before it).
#   head.txz = mainline 4f34939 (kAuto: v25's static walk at <= 512 keys)
#   v27.txz  = branch v27 43f2b69 (v26's counter walk, kAuto's class at <= 1,024 keys;
#              v27_class1024.patch on v26_dynamic_on_b749df7.patch, both beside this script)
# Five rounds of the 11 rows of at most 1,024 keys (attention_bench --max-keys=1024) with the
# one-tile `wgmma` as the control; if adopted, RESULTS.md's run of v27 in the same call (its
# summary's musts lines read mainline's musts.py, whose persistent class is 512 keys: re-read
# p/r/check/table.md with v27's musts.py once the branch is merged).
# Rebuild a bundle: cmake -S . -B build -DFLASHSERVE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo;
#   cmake --build build -j2 --target attention_cuda_test attention_bench;
#   scripts/gpu-bundle.sh /tmp/b/.gpu build/bin/attention_{cuda_test,bench};
#   tar -cJf .chunks/s47/NAME.txz -C /tmp/b .gpu; git rev-parse --short HEAD > .chunks/s47/NAME.commit
BENCH_ARGS="--prefill --serving --dtype bf16 --max-keys=1024" BENCH_TIMEOUT=60 RESULTS_IF_ADOPTED=1 \
  exec bench/attention/variant_call.sh p head v27 5 bench/attention/results/session46/rule_v27_retest.py \
  'PersistentPrefillTest*:AttentionConfigTest*:All/PrefillTest.*/wgmmaps_bf16_d128_causal_gqa8_varlen' \
  'All/PrefillTest.*/wgmmaps_bf16_d128_causal_gqa8_varlen' "${1:-560}"
