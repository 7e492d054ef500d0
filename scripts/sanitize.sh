#!/usr/bin/env bash
# Sanitizer builds of the test suite (CUDA off), each in its own build dir:
#   scripts/sanitize.sh asan       ASan + UBSan (any report fails), the whole suite incl. e2e
#                                  (the server binary is instrumented too)   -> build-asan
#   scripts/sanitize.sh asan-unit  ASan + UBSan, only the unit tests of the parsers (GGUF,
#                                  tokenizers, chat templates), sampling, the engine, the api,
#                                  the HTTP API and metrics: what CI runs (scripts/test.sh), because the
#                                  whole suite under ASan does not fit CI's time -> build-asan
#   scripts/sanitize.sh tsan       TSan, the engine, api, HTTP API and metrics tests (threads:
#                                  engine loop, gRPC reactors, health watcher, libmicrohttpd's
#                                  event loop and suspended connections, HTTP endpoint)
#                                                                            -> build-tsan
# TSan: our threads synchronize through std::mutex/std::condition_variable/std::atomic, which
# TSan sees. engine_test, engine_scheduler_test, api_validation_test and metrics_test run with
# no suppressions at all; api_service_test (a real gRPC server and client in the process) and
# http_server_test (links the gRPC api library) run with scripts/sanitizers/tsan.supp, which suppresses reports whose stacks pass through
# Debian's uninstrumented gRPC/Abseil, each with its reason (see there for what that hides).
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
  asan-unit)
    build=build-asan
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA=OFF \
      -DFLASHSERVE_SANITIZE=ON >/dev/null
    tests=(gguf_test tokenizer_test chat_template_test sampling_test engine_scheduler_test
           engine_test api_validation_test api_service_test http_openai_test http_server_test
           metrics_test)
    nice cmake --build "$build" -j "$jobs" --target "${tests[@]}"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    # The test binaries directly (a partial build leaves ctest's discovery of the others empty).
    for t in "${tests[@]}"; do
      echo "== $t (ASan + UBSan)"
      "$build/bin/$t" --gtest_brief=1
    done
    ;;
  tsan)
    build=build-tsan
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA=OFF \
      -DFLASHSERVE_SANITIZE=thread >/dev/null
    tests=(engine_test engine_scheduler_test api_validation_test http_openai_test metrics_test)
    nice cmake --build "$build" -j "$jobs" --target "${tests[@]}" api_service_test \
      http_server_test
    # The test binaries directly (a partial build leaves ctest's discovery of the others empty).
    for t in "${tests[@]}"; do
      echo "== $t (TSan, no suppressions)"
      TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" "$build/bin/$t" --gtest_brief=1
    done
    for t in api_service_test http_server_test; do
      echo "== $t (TSan, gRPC/Abseil suppressions: scripts/sanitizers/tsan.supp)"
      TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/sanitizers/tsan.supp" \
        "$build/bin/$t" --gtest_brief=1
    done
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|asan-unit|tsan" >&2
    exit 2
    ;;
esac
