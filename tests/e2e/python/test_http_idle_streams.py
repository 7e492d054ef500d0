"""1,000 concurrent idle SSE streams on the OpenAI HTTP API hold without errors or a thread each
(issue 22).

Starts the real `flashserve` binary with one sequence slot (--max-num-seqs 1) and room for all
the streams in its queue, opens --streams (1000) keep-alive connections, each a streaming
completion of many tokens (ignore_eos): the first one decodes, the others wait in the queue,
answered `200` with their event stream open and nothing to send: idle. Checks that every one
is answered 200 and none is closed or errors while held --hold-seconds, that the server's
thread count (/proc/PID/status Threads) stays within --max-extra-threads of its count before
(libmicrohttpd suspends a waiting connection instead of blocking a thread on it), that when
the client closes them every one is counted cancelled under api="http", and that the server
then still answers a completion and stops cleanly.

    .venv/bin/python tests/e2e/python/test_http_idle_streams.py --server build/bin/flashserve

Standard library only. Exit code 77 (ctest: skipped) when the default model is missing.
"""

import argparse
import json
import os
import resource
import selectors
import socket
import sys
import tempfile
import time
import urllib.request

from test_openai_http import DEFAULT_MODEL, SKIP, Server, http_get, http_post


STATUSES = ("cancelled", "length", "stop", "stop_sequence", "deadline_exceeded", "internal",
            "invalid_argument", "capacity", "unavailable")


def http_requests(server, model):
    """{status: flashserve_requests_total{api="http"}} (0 for a series not there yet)."""
    counts = {}
    for status in STATUSES:
        try:
            counts[status] = server.metric('flashserve_requests_total{model="%s",api="http",'
                                           'status="%s"}' % (model, status))
        except KeyError:
            counts[status] = 0.0
    return counts


def threads(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise RuntimeError("no Threads line")


def open_streams(port, model, count, max_tokens):
    """count connections, each with a streaming completion sent; returns the sockets."""
    body = json.dumps({"model": model, "prompt": "Once upon a time", "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0, "stream": True}).encode()
    request = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    streams = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(request)
        streams.append(s)
    return streams


def read_heads(streams, timeout):
    """Waits until every stream has its response head; returns {socket: head bytes}."""
    heads = {s: b"" for s in streams}
    selector = selectors.DefaultSelector()
    for s in streams:
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ)
    pending = set(streams)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.5):
            s = key.fileobj
            data = s.recv(65536)
            if not data:
                raise AssertionError(f"a stream was closed before its head: {heads[s]!r}")
            heads[s] += data
            if b"\r\n\r\n" in heads[s] and s in pending:
                pending.discard(s)
    selector.close()
    if pending:
        raise AssertionError(f"{len(pending)} of {len(streams)} streams got no response head in {timeout} s")
    return heads


def drain_and_check_open(streams, seen):
    """Reads what is there (the decoding streams' tokens) into seen[socket]; fails on a
    stream the server closed or broke. Keep-alive: a finished stream stays open too."""
    for s in streams:
        while True:
            try:
                data = s.recv(65536)
            except BlockingIOError:
                break
            if not data:
                raise AssertionError("the server closed a held stream")
            seen[s] = (seen.get(s, b"") + data)[-64:]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--device", default=None, help="--device for the server (default: its own)")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--hold-seconds", type=float, default=2.0)
    parser.add_argument("--max-extra-threads", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=1000,
                        help="per stream (the server's KV cache of 64 MiB holds ~1400 tokens)")
    args = parser.parse_args()
    if not os.path.exists(args.model):
        print(f"skipped: {args.model} is missing (scripts/fetch-model.sh)")
        return SKIP
    # Each stream is a descriptor here and one in the server (which inherits this limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.streams + 256
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            print(f"skipped: RLIMIT_NOFILE hard limit {hard} < {need}")
            return SKIP
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    extra = ["--max-num-seqs", "1", "--max-waiting", str(args.streams + 16)]
    if args.device:
        extra += ["--device", args.device]
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args.server, args.model, tmp, "idle", extra)
        ok = False
        try:
            ok = check(server, args)
        finally:
            code = server.stop()
        if code != 0:
            print(f"server exited with {code}; log:\n{server.text()[-3000:]}")
            ok = False
        print("OK" if ok else "FAILED")
        return 0 if ok else 1


def check(server, args):
    port = int(server.http.rsplit(":", 1)[1])
    pid = server.proc.pid
    model = json.loads(http_get(server.http + "/v1/models")[1])["data"][0]["id"]
    before = http_requests(server, model)
    threads_before = threads(pid)
    start = time.monotonic()
    streams = open_streams(port, model, args.streams, max_tokens=args.max_tokens)
    heads = read_heads(streams, timeout=60)
    opened = time.monotonic() - start
    bad = [h.split(b"\r\n", 1)[0] + b" " + h.split(b"\r\n\r\n", 1)[1][:300] for h in heads.values()
           if not h.startswith(b"HTTP/1.1 200 ")]
    assert not bad, f"{len(bad)} streams not answered 200, e.g. {bad[:3]}"
    assert all(b"text/event-stream" in h for h in heads.values()), "a stream is not text/event-stream"
    threads_open = threads(pid)
    held_max = threads_open
    deadline = time.monotonic() + args.hold_seconds
    seen = {}
    while time.monotonic() < deadline:
        time.sleep(0.25)
        drain_and_check_open(streams, seen)
        held_max = max(held_max, threads(pid))
    drain_and_check_open(streams, seen)
    # A stream that ran its whole completion in the hold (a fast GPU) ended with [DONE].
    done = sum(b"data: [DONE]" in tail for tail in seen.values())
    print(f"idle streams: {args.streams} answered 200 in {opened:.2f} s, held {args.hold_seconds:g} s "
          f"with none closed ({len(seen)} sent tokens, {done} finished); server threads {threads_before} before, "
          f"{threads_open} after opening, at most {held_max} while held")
    assert held_max <= threads_before + args.max_extra_threads, (
        f"server threads grew from {threads_before} to {held_max} with {args.streams} streams")
    for s in streams:
        s.close()
    # Every stream ends cancelled, or "length" when it ran its whole completion (a fast GPU
    # can finish a few during the hold); nothing else.
    closed = time.monotonic()
    while True:
        now = http_requests(server, model)
        delta = {k: now[k] - before[k] for k in STATUSES}
        if delta["cancelled"] + delta["length"] >= args.streams or time.monotonic() > closed + 30:
            break
        time.sleep(0.1)
    print(f"idle streams: {delta['cancelled']:.0f} counted cancelled and {delta['length']:.0f} "
          f"finished ({done} seen finished) after the client closed them "
          f"({time.monotonic() - closed:.2f} s)")
    assert delta["cancelled"] + delta["length"] == args.streams, delta
    assert delta["length"] >= done, delta
    others = {k: v for k, v in delta.items() if k not in ("cancelled", "length") and v}
    assert not others, f"streams ended otherwise: {others}"
    status, body = http_post(server.http + "/v1/completions",
                             json.dumps({"model": model, "prompt": "Hello", "max_tokens": 2,
                                         "temperature": 0}).encode())
    assert status == 200, (status, body)
    assert json.loads(body)["usage"]["completion_tokens"] == 2, body
    threads_after = threads(pid)
    print(f"idle streams: the server still serves (a completion: 200); threads {threads_after}")
    assert threads_after <= threads_before + args.max_extra_threads
    with urllib.request.urlopen(server.http + "/ready", timeout=10) as r:
        assert r.status == 200
    return True


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"FAILED: {e}")
        sys.exit(1)
