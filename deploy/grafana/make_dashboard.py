#!/usr/bin/env python3
"""Writes flashserve.json, the Grafana dashboard, from the panel list below.

    python3 deploy/grafana/make_dashboard.py            # rewrite flashserve.json
    python3 deploy/grafana/make_dashboard.py --check    # exit 1 if flashserve.json differs

Edit the panels here, not the JSON. Every query uses the $instance and $model variables;
tests/deploy/prometheus_live_test.py evaluates each one against a real Prometheus.
"""
import json
import pathlib
import sys

SEL = 'instance=~"$instance", model=~"$model"'
RI = "$__rate_interval"


def rate(metric, extra="", by=""):
    sel = SEL + (", " + extra if extra else "")
    grouping = f"sum by ({by}) " if by else "sum "
    return f"{grouping}(rate({metric}{{{sel}}}[{RI}]))"


def quantiles(histogram, by=""):
    grouping = f"{by}, le" if by else "le"
    return [(f"histogram_quantile({q}, sum by ({grouping}) "
             f"(rate({histogram}_bucket{{{SEL}}}[{RI}])))",
             f"p{int(q * 100)}" + (f" {{{{{by}}}}}" if by else ""))
            for q in (0.5, 0.9, 0.99)]


def bandwidth(by="phase"):
    return (f"{rate('flashserve_attention_kernel_bytes_total', by=by)} / "
            f"{rate('flashserve_attention_kernel_seconds_sum', by=by)}")


def flops_per_second(by="phase"):
    return (f"{rate('flashserve_attention_kernel_flops_total', by=by)} / "
            f"{rate('flashserve_attention_kernel_seconds_sum', by=by)}")


def intensity(by="phase"):
    return (f"{rate('flashserve_attention_kernel_flops_total', by=by)} / "
            f"{rate('flashserve_attention_kernel_bytes_total', by=by)}")


# (title, unit, [(expr, legend)], kind, width, description)
ROWS = [
    ("Requests", [
        ("Request rate by API and final status", "reqps",
         [(rate("flashserve_requests_total", by="api, status"), "{{api}} {{status}}")],
         "timeseries", 12,
         "Requests per second by API (grpc, or http: the OpenAI-compatible API) and final "
         "status; invalid_argument is the client's error, capacity / unavailable / internal "
         "are the server's."),
        ("Server error ratio", "percentunit",
         [(rate("flashserve_requests_total", 'status=~"capacity|unavailable|internal"')
           + " / " + rate("flashserve_requests_total"), "errors")], "timeseries", 6,
         "Share of requests refused for capacity, while unavailable, or failed internally."),
        ("Build", "none",
         [(f"flashserve_build_info{{{SEL}}}", "{{instance}} {{version}} {{commit}} {{device}}")],
         "table", 6, "Version, commit, device and model of every instance."),
    ]),
    ("Latency", [
        ("Time to first token", "s", quantiles("flashserve_time_to_first_token_seconds"),
         "timeseries", 8, "Submission to the first generated token."),
        ("Inter-token latency", "s", quantiles("flashserve_inter_token_latency_seconds"),
         "timeseries", 8, "Time between consecutive tokens of a request."),
        ("End-to-end request duration", "s",
         quantiles("flashserve_request_duration_seconds"), "timeseries", 8,
         "Submission to the final event."),
    ]),
    ("Engine", [
        ("Queue", "short",
         [(f"sum(flashserve_requests_running{{{SEL}}})", "running"),
          (f"sum(flashserve_requests_waiting{{{SEL}}})", "waiting"),
          (f"sum(flashserve_requests_waiting_capacity{{{SEL}}})", "waiting capacity")],
         "timeseries", 6, "Requests being computed, waiting, and the waiting bound."),
        ("Batch size (mean per step)", "short",
         [(f"{rate('flashserve_batch_sequences_sum')} / {rate('flashserve_batch_sequences_count')}",
           "sequences"),
          (f"{rate('flashserve_batch_tokens_sum')} / {rate('flashserve_batch_tokens_count')}",
           "tokens")], "timeseries", 6, "Sequences and tokens in one engine step."),
        ("KV cache usage", "percentunit",
         [(f"sum(flashserve_kv_cache_blocks_used{{{SEL}}}) / "
           f"sum(flashserve_kv_cache_blocks_capacity{{{SEL}}})", "used"),
          (rate("flashserve_engine_preemptions_total"), "preemptions/s")],
         "timeseries", 6, "Share of KV blocks allocated; preemptions start near 100 %."),
        ("Tokens per second", "short",
         [(rate("flashserve_generated_tokens_total"), "generated"),
          (rate("flashserve_prompt_tokens_total"), "prompt")], "timeseries", 6,
         "Generated and prompt tokens per second."),
    ]),
    ("Forward pass and attention kernels", [
        ("Forward time by part", "percentunit",
         [(f"{rate('flashserve_forward_seconds_total', by='part')} / ignoring(part) "
           f"group_left {rate('flashserve_forward_seconds_total')}", "{{part}}")],
         "timeseries", 8,
         "Share of forward-pass time in attention kernels, GEMMs and everything else."),
        ("Attention kernel latency by phase", "s",
         [(f"{rate('flashserve_attention_kernel_seconds_sum', by='phase')} / "
           f"{rate('flashserve_attention_kernel_seconds_count', by='phase')}", "mean {{phase}}")]
         + quantiles("flashserve_attention_kernel_seconds", by="phase")[2:],
         "timeseries", 8, "One launch (one layer): mean and p99 per phase."),
        ("Engine step time", "s", quantiles("flashserve_engine_step_seconds") +
         [(expr, f"decode-only {legend}") for expr, legend in
          quantiles("flashserve_engine_decode_step_seconds")[:2]], "timeseries", 8,
         "Wall time of one engine step, and of the steps that are decodes only (the floor of "
         "the inter-token latency)."),
        ("Attention bandwidth vs the device ceiling", "Bps",
         [(bandwidth(), "achieved {{phase}}"), ("vector($peak_bandwidth)", "ceiling")],
         "timeseries", 8,
         "Achieved bytes/s (minimum traffic / kernel time) per phase against $peak_bandwidth."),
        ("Attention FLOP/s vs the device ceiling", "flops",
         [(flops_per_second(), "achieved {{phase}}"), ("vector($peak_flops)", "ceiling")],
         "timeseries", 8, "Achieved FLOP/s per phase against $peak_flops."),
        ("Roofline: achieved / attainable per phase", "percentunit",
         [(f"({flops_per_second()}) / clamp_max(({intensity()}) * $peak_bandwidth, "
           f"$peak_flops)", "{{phase}}"),
          (intensity(), "intensity {{phase}} (FLOP/byte)")],
         "timeseries", 8,
         "Attainable = min(peak FLOP/s, arithmetic intensity x peak bandwidth); decode sits "
         "under the bandwidth roof, prefill under the compute roof."),
    ]),
]


def panel(panel_id, x, y, title, unit, targets, kind, width, description):
    refs = "ABCDEFGH"
    p = {
        "id": panel_id, "type": kind, "title": title, "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [{"refId": refs[i], "expr": expr, "legendFormat": legend,
                     "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                    for i, (expr, legend) in enumerate(targets)],
    }
    if kind == "table":
        p["targets"][0]["instant"] = True
        p["targets"][0]["format"] = "table"
        p["options"] = {"showHeader": True}
    return p


def custom_variable(name, label, options, description):
    return {"name": name, "label": label, "type": "custom", "description": description,
            "query": ",".join(options), "current": {"text": options[0], "value": options[0]},
            "options": [{"text": o, "value": o, "selected": i == 0} for i, o in enumerate(options)]}


def query_variable(name, query, include_all=True):
    return {"name": name, "label": name, "type": "query", "refresh": 2, "includeAll": include_all,
            "multi": True, "allValue": ".*", "sort": 1,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "definition": query, "query": {"query": query, "refId": "var"},
            "current": {"text": "All", "value": "$__all"}}


def dashboard():
    panels, panel_id, y = [], 1, 0
    for row_title, row_panels in ROWS:
        panels.append({"id": panel_id, "type": "row", "title": row_title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        panel_id, y, x = panel_id + 1, y + 1, 0
        for spec in row_panels:
            if x + spec[4] > 24:
                x, y = 0, y + 8
            panels.append(panel(panel_id, x, y, *spec))
            panel_id, x = panel_id + 1, x + spec[4]
        y += 8
    return {
        "uid": "flashserve", "title": "flashserve", "tags": ["flashserve", "llm"],
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"}, "timezone": "utc",
        "description": "flashserve: requests, latency, queue, KV cache, tokens/s, and the "
                       "attention kernels against the device's roofline.",
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource",
             "query": "prometheus", "current": {}},
            query_variable("instance", "label_values(flashserve_build_info, instance)"),
            query_variable("model",
                           'label_values(flashserve_build_info{instance=~"$instance"}, model)'),
            custom_variable("peak_bandwidth", "Peak memory bandwidth (B/s)",
                            ["4.8e12", "3.35e12", "2.0e12", "1.0e11"],
                            "H200 4.8 TB/s, H100 SXM 3.35 TB/s, A100 80GB 2.0 TB/s, a CPU "
                            "socket ~100 GB/s"),
            custom_variable("peak_flops", "Peak FLOP/s",
                            ["9.89e14", "3.12e14", "2.0e12"],
                            "dense bf16 tensor core: H100/H200 989 TFLOP/s, A100 312 TFLOP/s; "
                            "a CPU ~2 TFLOP/s fp32"),
        ]},
        "annotations": {"list": []},
        "panels": panels,
    }


def main():
    out = pathlib.Path(__file__).with_name("flashserve.json")
    text = json.dumps(dashboard(), indent=2) + "\n"
    if "--check" in sys.argv[1:]:
        if out.read_text() != text:
            print(f"{out} is stale: run python3 {pathlib.Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
