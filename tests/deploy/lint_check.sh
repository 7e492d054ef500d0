#!/usr/bin/env bash
# Lint of the deployment files: hadolint (Dockerfile), yamllint (every YAML under deploy/),
# the compose file against the Compose Specification schema (check-jsonschema's vendored copy),
# the Grafana provisioning files parse, and the dashboard is what make_dashboard.py writes.
set -euo pipefail
venv=${1:?usage: $0 VENV}
for tool in hadolint yamllint check-jsonschema; do
  [[ -x $venv/bin/$tool ]] || { echo "FAILED: $tool missing (scripts/install-deps.sh --test)"; exit 1; }
done
"$venv/bin/hadolint" Dockerfile
"$venv/bin/yamllint" --strict -c deploy/.yamllint.yaml deploy
"$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec deploy/compose/compose.yaml
"$venv/bin/python" deploy/grafana/make_dashboard.py --check
"$venv/bin/python" - <<'PY'
import json, yaml
d = json.load(open("deploy/grafana/flashserve.json"))
names = {v["name"] for v in d["templating"]["list"]}
assert {"instance", "model", "datasource"} <= names, names
ids = [p["id"] for p in d["panels"]]
assert len(ids) == len(set(ids)), "duplicate panel ids"
for f in ("datasources/prometheus.yaml", "dashboards/flashserve.yaml"):
    assert yaml.safe_load(open("deploy/grafana/provisioning/" + f))["apiVersion"] == 1, f
PY
echo "PASSED: hadolint, yamllint, compose schema, dashboard"
