#!/usr/bin/env bash
# promtool: the rules parse, every alert's unit tests pass (firing and not firing), and the
# compose Prometheus config is valid (its rule path pointed at the repository's rules.yml).
set -euo pipefail
deploy=$(cd "${1:?usage: $0 DEPLOY_DIR}" && pwd)
command -v promtool >/dev/null || { echo "FAILED: promtool missing (scripts/install-deps.sh --test)"; exit 1; }
promtool check rules "$deploy/prometheus/rules.yml"
(cd "$deploy/prometheus" && promtool test rules rules_test.yml)
# Every alert of rules.yml has a test.
for alert in $(grep -oP '^\s+- alert: \K\w+' "$deploy/prometheus/rules.yml"); do
  grep -q "alertname: $alert\$" "$deploy/prometheus/rules_test.yml" \
    || { echo "FAILED: alert $alert has no test in rules_test.yml"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s#/etc/prometheus/rules.yml#$deploy/prometheus/rules.yml#" "$deploy/compose/prometheus.yml" \
  > "$tmp/prometheus.yml"
promtool check config "$tmp/prometheus.yml"
echo "PASSED: promtool check rules, test rules, check config"
