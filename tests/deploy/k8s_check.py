#!/usr/bin/env python3
"""Checks deploy/k8s: `kubectl kustomize` renders every overlay; kubernetes-validate (strict,
its default Kubernetes version) accepts every built-in object; custom resources (ServiceMonitor,
PrometheusRule, GRPCRoute) validate against their CRD schemas (tests/deploy/crds); the
PrometheusRule carries exactly deploy/prometheus/rules.yml; the Deployment's probes and ports
are the ones the server serves.

    k8s_check.py --venv .venv          # check
    k8s_check.py --venv .venv --write  # regenerate deploy/k8s/base/prometheusrule.yaml
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
PROMETHEUS_RULE = K8S / "base" / "prometheusrule.yaml"
CRDS = pathlib.Path(__file__).resolve().parent / "crds"
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com_servicemonitor_v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "monitoring.coreos.com_prometheusrule_v1.json",
    ("gateway.networking.k8s.io/v1", "GRPCRoute"): "gateway.networking.k8s.io_grpcroute_v1.json",
}
EXPECTED_DEVICE = {"cpu": "cpu", "gpu": "cuda"}
HEADER = ("# Generated from deploy/prometheus/rules.yml by tests/deploy/k8s_check.py --write;\n"
          "# tests/deploy checks that the two agree. Edit rules.yml, not this file.\n")


def prometheus_rule_text():
    doc = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
           "metadata": {"name": "flashserve"}, "spec": yaml.safe_load(RULES.read_text())}
    return HEADER + yaml.safe_dump(doc, sort_keys=False, width=100)


def render(kubectl, overlay):
    out = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {overlay}: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def validate(venv, where, docs):
    failures, builtin = [], []
    for doc in docs:
        key = (doc.get("apiVersion"), doc.get("kind"))
        name = f"{where}: {key[1]}/{doc.get('metadata', {}).get('name')}"
        if key in CRD_SCHEMAS:
            schema = json.loads((CRDS / CRD_SCHEMAS[key]).read_text())
            errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=str)
            failures += [f"{name}: {'/'.join(map(str, e.path))}: {e.message}" for e in errors]
        elif key[0] and (key[0].endswith(".coreos.com/v1") or "gateway" in key[0]):
            failures.append(f"{name}: no CRD schema for {key}")
        else:
            builtin.append(doc)
    if builtin:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            yaml.safe_dump_all(builtin, f)
            f.flush()
            out = subprocess.run([str(venv / "bin" / "kubernetes-validate"), "--strict",
                                  "--quiet", f.name], capture_output=True, text=True)
        if out.returncode != 0:
            failures.append(f"{where}: kubernetes-validate:\n{out.stdout}{out.stderr}")
    return failures


def check_deployment(where, docs):
    """The probes ask the server for names/paths it answers; ports match the flags and the
    Services."""
    failures = []
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    probes = {p: container[p].get("grpc", {}) for p in ("startupProbe", "livenessProbe")}
    expected = {"startupProbe": "flashserve.v1.Generation", "livenessProbe": "liveness"}
    for probe, service in expected.items():
        if probes[probe].get("service") != service or probes[probe].get("port") != 50051:
            failures.append(f"{where}: {probe} asks {probes[probe]}, expected {service} on 50051")
    # Readiness through the HTTP API's /ready, on the port --http-port opens.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    ready = container["readinessProbe"].get("httpGet", {})
    if ready.get("path") != "/ready" or ready.get("port") != "http":
        failures.append(f"{where}: readinessProbe is {container['readinessProbe']}, expected "
                        "httpGet /ready on port http")
    if f"--http-port={ports.get('http')}" not in container["args"]:
        failures.append(f"{where}: container port http {ports.get('http')} is not --http-port")
    for service in (d for d in docs if d["kind"] == "Service" and "clusterIP" not in d["spec"]):
        targets = {p.get("targetPort") for p in service["spec"]["ports"]}
        if "http" not in targets:
            failures.append(f"{where}: Service {service['metadata']['name']} has no http port")
    args = container["args"]
    devices = [a for a in args if a.startswith("--device=")]
    if devices != [f"--device={EXPECTED_DEVICE[where]}"]:
        failures.append(f"{where}: device flags {devices}, expected --device="
                        f"{EXPECTED_DEVICE[where]} once")
    drain = next(float(a.split("=")[1]) for a in args if a.startswith("--drain-timeout="))
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    if grace < drain + pre_stop:
        failures.append(f"{where}: terminationGracePeriodSeconds {grace} < preStop {pre_stop} "
                        f"+ --drain-timeout {drain}")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", required=True, type=pathlib.Path)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if args.write:
        PROMETHEUS_RULE.write_text(prometheus_rule_text())
        return 0
    kubectl = str(args.venv / "bin" / "kubectl")
    failures = []
    if PROMETHEUS_RULE.read_text() != prometheus_rule_text():
        failures.append(f"{PROMETHEUS_RULE} differs from rules.yml: run k8s_check.py --write")
    num_objects = 0
    for overlay in sorted((K8S / "overlays").iterdir()):
        docs = render(kubectl, overlay)
        num_objects += len(docs)
        failures += validate(args.venv, overlay.name, docs)
        failures += check_deployment(overlay.name, docs)
    examples = [d for f in sorted((K8S / "examples").glob("*.yaml"))
                for d in yaml.safe_load_all(f.read_text()) if d and "kind" in d]
    num_objects += len(examples)
    failures += validate(args.venv, "examples", examples)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"PASSED: {num_objects} objects rendered and validated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
