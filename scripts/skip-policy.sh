#!/usr/bin/env bash
# The one place that says which tests may be skipped, read by scripts/test.sh after ctest:
#   - a test labelled `gpu` may be skipped when no GPU is visible (nvidia-smi lists none);
#   - a test labelled `cpu_isa` may be skipped: it checks one instruction-set path of the CPU
#     kernels (AVX2, AVX-512) and skips, saying so, only where the CPU or OS lacks it;
#   - nothing else may be skipped: the model tests and the e2e suites need the default model,
#     which scripts/test.sh fetches, and the Python suite needs .venv, which it installs.
# Prints the counts (passed, skipped by reason) and exits 1 on any other skip.
#
#   scripts/skip-policy.sh BUILD_DIR CTEST_LOG
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR CTEST_LOG}
log=${2:?usage: $0 BUILD_DIR CTEST_LOG}

gpu_visible=0
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  gpu_visible=1
fi
gpu_tests=$(ctest --test-dir "$build" -N -L gpu | sed -nE 's/^ *Test +#[0-9]+: ([^ ]+).*/\1/p' | sort -u)
isa_tests=$(ctest --test-dir "$build" -N -L cpu_isa | sed -nE 's/^ *Test +#[0-9]+: ([^ ]+).*/\1/p' | sort -u)
skipped=$(sed -n '/The following tests did not run:/,/^$/p' "$log" \
  | sed -nE 's/^[[:space:]]+[0-9]+ - ([^ ]+) .*/\1/p' | sort -u)
passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$log" || true)

allowed=0
allowed_isa=0
unexpected=()
for t in $skipped; do
  if [ "$gpu_visible" = 0 ] && grep -qxF "$t" <<<"$gpu_tests"; then
    allowed=$((allowed + 1))
  elif grep -qxF "$t" <<<"$isa_tests"; then
    allowed_isa=$((allowed_isa + 1))
  else
    unexpected+=("$t")
  fi
done
echo "tests: $passed passed; skipped: $allowed (gpu label, no GPU visible)," \
  "$allowed_isa (cpu_isa label, instruction set absent), ${#unexpected[@]} unexpected"
if [ ${#unexpected[@]} -gt 0 ]; then
  printf 'unexpected skip: %s\n' "${unexpected[@]}"
  echo "skip policy (scripts/skip-policy.sh): only tests labelled gpu may skip (only without a" \
    "GPU) and tests labelled cpu_isa (only where the CPU lacks the instruction set)"
  exit 1
fi
