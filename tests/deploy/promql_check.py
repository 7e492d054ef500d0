"""What the live Prometheus test evaluates: every dashboard query and every rule expression,
made evaluable on their own (dashboard variables substituted, alert comparisons made `bool`
so that a quiet alert still returns its series)."""
import json
import pathlib
import re

# Values for the dashboard's variables when its queries are evaluated outside Grafana.
VARIABLES = {
    "$__rate_interval": "30s",
    "$instance": ".*",
    "$model": ".*",
    "$peak_bandwidth": "4.8e12",
    "$peak_flops": "9.89e14",
}


def substitute(expr):
    for name in sorted(VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, VARIABLES[name])
    if "$" in expr:
        raise ValueError(f"unknown dashboard variable in: {expr}")
    return expr


def dashboard_queries(path):
    """(where, PromQL) for every panel target and every query variable of the dashboard."""
    dashboard = json.loads(pathlib.Path(path).read_text())
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((f"panel '{panel['title']}' {target['refId']}", substitute(target["expr"])))
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", var["query"]["query"])
        if not match:
            raise ValueError(f"variable {var['name']}: not label_values(SELECTOR, LABEL)")
        out.append((f"variable {var['name']}", substitute(match.group(1))))
    return out


_COMPARISON = re.compile(r"(==|!=|>=|<=|>|<)(\s*)(?!\s*bool\b)")


def with_bool_comparisons(expr):
    """`a > 0.9` -> `a > bool 0.9`, outside label matchers and strings, so that the
    expression returns its series (0/1) whether or not the condition holds."""
    out, depth, quote, i = [], 0, None, 0
    while i < len(expr):
        c = expr[i]
        if quote:
            out.append(c)
            if c == "\\":
                out.append(expr[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
            out.append(c)
        elif c == "{":
            depth += 1
            out.append(c)
        elif c == "}":
            depth -= 1
            out.append(c)
        elif depth == 0 and (m := _COMPARISON.match(expr, i)):
            out.append(m.group(1) + " bool ")
            i = m.end()
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def rule_queries(rules):
    """(where, PromQL) for every rule of a loaded rules file."""
    out = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                out.append((f"record {rule['record']}", rule["expr"]))
            else:
                out.append((f"alert {rule['alert']}", with_bool_comparisons(rule["expr"])))
    return out
