#!/usr/bin/env bash
# The README's test command: checks file and function sizes (scripts/check-size.py) and that
# the paths comments and documents name exist (scripts/check-paths.py), installs
# dependencies, fetches the default model, builds everything (CUDA kernels too when nvcc is
# present) and runs the whole suite with ctest, then the parsers', sampling's, engine's, api's
# and metrics' unit tests under ASan + UBSan and a short fuzz run.
# GPU tests are reported by ctest as skipped ("Not Run") on machines without a GPU; any other
# skip fails the run (scripts/skip-policy.sh, which also prints the counts).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python3 scripts/check-size.py  # files over 800 lines, host functions over 80
python3 scripts/check-paths.py  # repository paths named in comments and documents exist
build="${FLASHSERVE_BUILD_DIR:-build}"
jobs="${FLASHSERVE_JOBS:-$(nproc)}"

bash scripts/install-deps.sh --test
bash scripts/fetch-model.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA="${FLASHSERVE_CUDA:-AUTO}"
cmake --build "$build" -j "$jobs"
# llama.cpp's vocabulary GGUFs, tokenizer test pairs and chat templates (tokenizer_test and
# chat_template_test read them from build/test-data/vocab, whatever the build dir, and fail
# without them).
bash scripts/fetch-test-vocab.sh
ctest_log="$build/ctest.log"
ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 600 | tee "$ctest_log"
bash scripts/skip-policy.sh "$build" "$ctest_log"
# ASan + UBSan over the unit tests of the parsers, sampling, the engine, the api and metrics
# (scripts/sanitize.sh asan-unit, its own build in build-asan). The whole suite under the
# sanitizers (scripts/sanitize.sh asan, e2e included) does not fit CI's time; run it by hand.
# FLASHSERVE_ASAN=0 skips this step.
if [ "${FLASHSERVE_ASAN:-1}" != 0 ]; then
  FLASHSERVE_JOBS="$jobs" bash scripts/sanitize.sh asan-unit
fi
# A short fuzz run of every parser (tests/fuzz; clang + ASan + UBSan). 0 skips it.
fuzz_seconds="${FLASHSERVE_FUZZ_SECONDS:-15}"
if [ "$fuzz_seconds" -gt 0 ]; then
  FLASHSERVE_FUZZ_JOBS="$jobs" bash scripts/fuzz.sh "$fuzz_seconds"
fi
