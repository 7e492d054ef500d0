#!/usr/bin/env bash
# Installs flashserve's dependencies from Debian/Ubuntu packages, printing what it does.
#
#   scripts/install-deps.sh            build and run: compiler, CMake, gRPC, protobuf, Abseil,
#                                      prometheus-cpp, OpenBLAS, PCRE2, libmicrohttpd + GnuTLS
#                                      and nlohmann-json (the HTTP API) (scripts/run.sh)
#   scripts/install-deps.sh --test     also the test tools: GoogleTest, Google Benchmark,
#                                      Prometheus (promtool + the live dashboard test) and the
#                                      Python tooling in .venv/ from PyPI (scripts/test.sh)
#   scripts/install-deps.sh --runtime  only the shared libraries the built binaries load (the
#                                      Dockerfile's runtime stages)
#
# Tried on Debian 12 (bookworm). Ubuntu 24.04 (the GPU image's base) renamed the runtime
# libraries (the 64-bit time_t transition, suffix t64); those names are listed below but were
# not installed here (docs/deploy.md). Idempotent: packages already present are skipped.
set -euo pipefail
mode=build
case "${1:-}" in
  "") ;;
  --test) mode=test ;;
  --runtime) mode=runtime ;;
  *) echo "install-deps: unknown option '$1' (expected --test or --runtime)" >&2; exit 2 ;;
esac
. /etc/os-release
distro="${ID}-${VERSION_ID}"

build=(
  build-essential cmake pkg-config git ca-certificates python3 python3-pip
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libopenblas-dev libpcre2-dev
  libmicrohttpd-dev libgnutls28-dev nlohmann-json3-dev  # the OpenAI HTTP API (server/http)
)
test_tools=(
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  prometheus
  python3 python3-pip python3-venv
  openssl clang
)
case "$distro" in
  ubuntu-24.04)
    runtime=(ca-certificates libgrpc++1.51t64 libprotobuf32t64 libabsl20220623t64
             libprometheus-cpp-core1.0 libopenblas0-pthread libpcre2-8-0
             libmicrohttpd12t64 libgnutls30t64) ;;
  *)  # Debian 12
    runtime=(ca-certificates libgrpc++1.51 libprotobuf32 libabsl20220623
             libprometheus-cpp-core1.0 libopenblas0-pthread libpcre2-8-0
             libmicrohttpd12 libgnutls30) ;;
esac

case "$mode" in
  build) packages=("${build[@]}") ;;
  test) packages=("${build[@]}" "${test_tools[@]}") ;;
  runtime) packages=("${runtime[@]}") ;;
esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
echo "install-deps ($mode, $distro): ${#packages[@]} packages, ${#missing[@]} missing"
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get update"
  $SUDO apt-get update
  echo "install-deps: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

if [ "$mode" = test ]; then
  # Python test tooling (e2e clients, deployment checks) in a project-local venv.
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  venv="$root/.venv"
  if [ ! -x "$venv/bin/python" ]; then
    echo "install-deps: creating $venv"
    python3 -m venv "$venv"
  fi
  echo "install-deps: pip install -r scripts/requirements-test.txt into $venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
    -r "$root/scripts/requirements-test.txt"
fi
echo "install-deps: done"
