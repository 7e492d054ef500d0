#!/usr/bin/env bash
# The full soak of issue 10 against the real server on the default model: REQUESTS (default
# 10000) generation requests at CONCURRENCY (default 64), ~15 % cancelled by the client and ~15 %
# with short deadlines, then checks that no request runs or waits, no KV block is in use, the
# gauges are 0 and RSS grew < 5 % after warm-up. ctest runs the same test with 240 requests.
#   scripts/soak.sh [REQUESTS] [CONCURRENCY]      (needs a built tree: FLASHSERVE_BUILD_DIR)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${FLASHSERVE_BUILD_DIR:-build}"
FLASHSERVE_SOAK_REQUESTS="${1:-10000}" FLASHSERVE_SOAK_CONCURRENCY="${2:-64}" \
  exec "$build/bin/e2e_server_test" --gtest_filter='SoakE2E.CancellationsAndDeadlinesLeakNothing'
