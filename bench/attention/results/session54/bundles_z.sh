#!/usr/bin/env bash
# Calls Z, Z2 and Z3's bundles (session 54), rebuilt from the patches: v42 (the checkout's HEAD
# as committed; its kernels are f98d5be's, its attention_bench has --head-dim), and v48, v49,
# v50 and v51, each HEAD + its own patch. Run at the repository root.
#
#   bench/attention/results/session54/bundles_z.sh [OUT_DIR]     (default .chunks/s54z)
here=bench/attention/results/session54
exec bench/attention/bundles_from_patches.sh "${1:-.chunks/s54z}" v42 \
  v48=$here/v48_d64_three_stages.patch v49=$here/v49_d64_four_stages.patch \
  v50=$here/v50_d128_producer_80_registers.patch v51=$here/v51_rows_aligned_to_the_end.patch
