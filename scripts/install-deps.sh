#!/usr/bin/env bash
# Installs every build and test dependency of flashserve from Debian/Ubuntu packages
# (and the Python test tooling from PyPI). Used by the README, .ci/run and the Dockerfile.
# Idempotent: packages already present are skipped by apt.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev
  prometheus-cpp-dev
  libopenblas-dev
  libpcre2-dev
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  python3 python3-pip python3-venv
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# Python test tooling (e2e tests drive the server from Python through grpcio-tools stubs).
# Installed into a project-local venv so the system Python stays untouched.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/scripts/requirements-test.txt"
