#!/usr/bin/env python3
"""Checked against the real thing: a real Prometheus (Debian's `prometheus`) on loopback scrapes
a real flashserve (CPU backend, the default model) while a bounded load runs, loads
deploy/prometheus/rules.yml, and then every dashboard query and every rule expression is
evaluated through Prometheus' HTTP API. Fails if any query errors or returns no series, if a
rule group reports an error, if the deadline expiries of the load are not counted as
status="deadline_exceeded", or if flashserve_build_info lacks the default model label.

    prometheus_live_test.py --server build/bin/flashserve --cli build/bin/flashserve-cli

Exit 77 (skipped) only when the model file is absent; a missing prometheus is a failure
(scripts/install-deps.sh --test installs it). Bounded: about 40 s, at most 110 s.
"""
import argparse
import json
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.error
import urllib.request

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import promql_check  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "flashserve.json"
DEADLINE = time.monotonic() + 110


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def wait_for(what, predicate, timeout):
    end = min(time.monotonic() + timeout, DEADLINE)
    while time.monotonic() < end:
        try:
            if predicate():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


def query(prom, expr):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        body = http_json(url)
    except urllib.error.HTTPError as e:  # 400/422: the query is invalid
        return f"error: {json.loads(e.read()).get('error', e)}", []
    if body.get("status") != "success":
        return f"error: {body.get('error')}", []
    return None, body["data"]["result"]


def start_server(args, tmp, grpc_port, metrics_port):
    log = open(tmp / "flashserve.log", "w")
    return subprocess.Popen(
        [args.server, "--model", str(MODEL), "--device", "cpu", "--host", "127.0.0.1",
         "--port", str(grpc_port),
         "--metrics-port", str(metrics_port), "--http-port", "0", "--max-waiting", "64",
         "--threads", "1"],
        stdout=log, stderr=subprocess.STDOUT)


def start_prometheus(prometheus, tmp, metrics_port, prom_port):
    # The rules as shipped, evaluated every second instead of every 15 s.
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        group["interval"] = "1s"
    (tmp / "rules.yml").write_text(yaml.safe_dump(rules))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp / "rules.yml")],
        "scrape_configs": [{"job_name": "flashserve",
                            "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = open(tmp / "prometheus.log", "w")
    return subprocess.Popen(
        [prometheus, f"--config.file={tmp / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=log, stderr=subprocess.STDOUT)


def run_load(args, grpc_port):
    """A bounded load: 24 requests at concurrency 4, then requests whose deadline expires."""
    target = ["--target", f"127.0.0.1:{grpc_port}"]
    load = subprocess.run([args.cli, *target, "load", "--concurrency", "4", "--requests", "24",
                           "--prompt-tokens", "40", "--max-tokens", "8"],
                          capture_output=True, text=True, timeout=60)
    if load.returncode != 0:
        raise RuntimeError(f"flashserve-cli load failed:\n{load.stdout}{load.stderr}")
    for _ in range(2):  # 200 tokens cannot be generated in 50 ms: the deadline expires
        subprocess.run([args.cli, *target, "generate", "--prompt", "Count to one hundred:",
                        "--max-tokens", "200", "--timeout", "0.05"],
                       capture_output=True, text=True, timeout=30)


def check_everything(prom):
    failures = []
    queries = (promql_check.dashboard_queries(DASHBOARD) +
               promql_check.rule_queries(yaml.safe_load(RULES.read_text())))
    for where, expr in queries:
        error, result = query(prom, expr)
        if error or not result:
            failures.append(f"{where}: {error or 'no series'}\n    {expr}")
    groups = http_json(f"{prom}/api/v1/rules")["data"]["groups"]
    for group in groups:
        for rule in group["rules"]:
            if rule.get("health") != "ok":
                failures.append(f"rule {rule['name']}: health {rule.get('health')} "
                                f"{rule.get('lastError', '')}")
    error, result = query(prom, 'sum(flashserve_requests_total{status="deadline_exceeded"})')
    if error or not result or float(result[0]["value"][1]) < 1:
        failures.append(f"deadline expiries not counted as deadline_exceeded: {error or result}")
    # The default model label is the file name without .gguf; the device is the CPU.
    error, result = query(prom, f'flashserve_build_info{{model="{MODEL.stem}", device="cpu"}}')
    if error or len(result) != 1:
        failures.append(f"flashserve_build_info with model={MODEL.stem}: {error or result}")
    return len(queries), failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--cli", required=True)
    args = parser.parse_args()
    if not MODEL.exists():
        print(f"SKIPPED: {MODEL} is missing (scripts/fetch-model.sh)")
        return 77
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        print("FAILED: prometheus is not installed (scripts/install-deps.sh --test)")
        return 1
    grpc_port, metrics_port, prom_port = free_port(), free_port(), free_port()
    prom = f"http://127.0.0.1:{prom_port}"
    with tempfile.TemporaryDirectory(prefix="flashserve-prom-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        server = start_server(args, tmp, grpc_port, metrics_port)
        prom_proc = start_prometheus(prometheus, tmp, metrics_port, prom_port)
        try:
            started = time.monotonic()
            wait_for("the server to serve", lambda: subprocess.run(
                [args.cli, "--target", f"127.0.0.1:{grpc_port}", "health"],
                capture_output=True, timeout=5).returncode == 0, 60)
            wait_for("prometheus to be ready",
                     lambda: urllib.request.urlopen(f"{prom}/-/ready", timeout=2).status == 200,
                     30)
            run_load(args, grpc_port)
            # Prometheus has scraped the load (its first scrape of a target may come up to a
            # scrape interval late, and a fast CPU backend ends the load in ~3 s), then two
            # more scrapes and rule evaluations, so rates see all of it.
            wait_for("prometheus to scrape the load's requests", lambda: query(
                prom, "rate(flashserve_requests_total[30s])")[1] != [], 30)
            time.sleep(3)
            num_queries, failures = check_everything(prom)
            print(f"{num_queries} queries evaluated in {time.monotonic() - started:.1f} s")
        except Exception as e:  # report with the logs below
            failures = [f"{type(e).__name__}: {e}"]
        finally:
            for proc in (prom_proc, server):
                proc.terminate()
            for proc in (prom_proc, server):
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if failures:
            for name in ("flashserve.log", "prometheus.log"):
                print(f"---- {name} (tail)\n" + "".join(
                    (tmp / name).read_text(errors="replace").splitlines(True)[-15:]))
            print("FAILED:\n  " + "\n  ".join(failures))
            return 1
    print("PASSED: every dashboard query and rule expression returned series")
    return 0


if __name__ == "__main__":
    sys.exit(main())
