#!/usr/bin/env bash
# Sanitizer builds of the test suite (CUDA off), each in its own build dir:
#   scripts/sanitize.sh asan   ASan + UBSan (any report fails), the whole suite incl. e2e
#                              (the server binary is instrumented too)       -> build-asan
#   scripts/sanitize.sh tsan   TSan, the engine and api tests (threads: engine loop, gRPC
#                              reactors, health watcher, HTTP endpoint)      -> build-tsan
# Suppressions: scripts/sanitizers/tsan.supp, only for uninstrumented system libraries (gRPC,
# Abseil, protobuf from Debian), each with its reason; it also states the known limit (Debian's
# Abseil Mutex is invisible to TSan, so engine/api reports there are not trustworthy).
# FLASHSERVE_JOBS sets build/test jobs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-asan}"
jobs="${FLASHSERVE_JOBS:-2}"
case "$mode" in
  asan)
    build=build-asan
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA=OFF \
      -DFLASHSERVE_SANITIZE=ON >/dev/null
    nice cmake --build "$build" -j "$jobs"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 1800
    ;;
  tsan)
    build=build-tsan
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA=OFF \
      -DFLASHSERVE_SANITIZE=thread >/dev/null
    tests=(engine_test engine_scheduler_test api_service_test api_validation_test metrics_test)
    nice cmake --build "$build" -j "$jobs" --target "${tests[@]}"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/sanitizers/tsan.supp"
    # The test binaries directly (a partial build leaves ctest's discovery of the others empty).
    for t in "${tests[@]}"; do
      echo "== $t"
      "$build/bin/$t" --gtest_brief=1
    done
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan" >&2
    exit 2
    ;;
esac
