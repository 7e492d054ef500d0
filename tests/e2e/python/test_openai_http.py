"""The OpenAI-compatible HTTP API, driven by the official `openai` Python client (PyPI).

Starts the real `flashserve` binary on the default model (free loopback ports: --port 0,
--http-port 0, --metrics-port 0; the ports are read from its log) and checks completions,
chat, streaming (server-sent events, usage in the last chunk), stop strings, seed
reproducibility, logprobs, errors in OpenAI's shape with their status codes, HTTPS with the
gRPC certificate and bearer-token auth,
and that a client that disconnects mid-stream cancels its request (the metrics count it as
cancelled under api="http" and the access line says so). Greedy answers are few tokens long:
the CPU backend decodes ~19 tokens/s and CI's whole suite has a time budget.

    .venv/bin/python tests/e2e/python/test_openai_http.py --server build/bin/flashserve

Against a server that is already running (a GPU server, say), the same suite but the HTTPS /
auth case (which needs a server started with its own flags):

    python3 tests/e2e/python/test_openai_http.py --url http://127.0.0.1:8000 \
        --metrics-url http://127.0.0.1:9464/metrics [--server-log server.log]

(or FLASHSERVE_OPENAI_URL, FLASHSERVE_METRICS_URL, FLASHSERVE_SERVER_LOG). Without a metrics
URL the disconnect test is skipped; without the server's log its access-line check is.

Exit code 77 (ctest: skipped) when the default model or the `openai` package is missing.
"""

import argparse
import contextlib
import io
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT_MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1"  # --url: the running server's, from /v1/models
DOCUMENTED_MODEL = "SmolLM2-135M-Instruct.Q4_1"  # docs/api.md's examples name it
TOKEN = "e2e-secret-token"


class Server:
    """One flashserve process; `http` is its OpenAI API's base URL."""

    def __init__(self, binary, model, tmp, name, extra=()):
        self.log_path = os.path.join(tmp, f"{name}.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "--model", model, "--host", "127.0.0.1", "--port", "0", "--metrics-port",
             "0", "--http-port", "0", "--threads", "1", "--kv-cache-mb", "64", "--max-num-seqs", "8", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            text = self.text()
            http = re.search(r"listening on 127\.0\.0\.1:(\d+) \((HTTPS?)\)", text)
            metrics = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", text)
            if http and metrics and "serving" in text:
                self.http = f"{http.group(2).lower()}://127.0.0.1:{http.group(1)}"
                self.metrics = f"http://127.0.0.1:{metrics.group(1)}/metrics"
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("flashserve did not start:\n" + text[-3000:])
            time.sleep(0.05)

    def text(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def has_log(self):
        return True

    def metric(self, series):
        with urllib.request.urlopen(self.metrics, timeout=10) as r:
            for line in r.read().decode().splitlines():
                name, _, value = line.rpartition(" ")
                if name == series:
                    return float(value)
        raise KeyError(series)

    def stop(self):
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    return self.proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    return self.proc.wait()
            return self.proc.returncode
        finally:
            self.log.close()


class RunningServer(Server):
    """A server this script did not start (--url): its log only when given."""

    def __init__(self, http, metrics, log_path):  # noqa: PLW0231 (nothing to start)
        self.http, self.metrics, self.log_path = http.rstrip("/"), metrics, log_path

    def has_log(self):
        return bool(self.log_path)

    def stop(self):
        return 0


def http_get(url, headers=None, context=None):
    """(status, body) of a GET, whatever the status."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def http_post(url, body, headers=None, context=None):
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class OpenAiHttp(unittest.TestCase):
    server = None
    client = None

    @classmethod
    def setUpClass(cls):
        import openai  # noqa: PLC0415 (imported late: the script skips cleanly without it)

        cls.openai = openai
        cls.client = openai.OpenAI(base_url=cls.server.http + "/v1", api_key="unused",
                                   max_retries=0, timeout=60)

    def greedy_completion(self, prompt, max_tokens):
        return self.client.completions.create(model=MODEL_NAME, prompt=prompt,
                                              max_tokens=max_tokens, temperature=0)

    def test_models_health_ready(self):
        models = self.client.models.list()
        self.assertEqual([m.id for m in models.data], [MODEL_NAME])
        self.assertEqual(self.client.models.retrieve(MODEL_NAME).id, MODEL_NAME)
        self.assertEqual(http_get(self.server.http + "/health")[0], 200)
        self.assertEqual(http_get(self.server.http + "/ready")[0], 200)

    def test_completion_matches_its_stream(self):
        whole = self.greedy_completion("The capital of France is", 6)
        choice = whole.choices[0]
        self.assertTrue(choice.text)
        self.assertEqual(choice.finish_reason, "length")
        self.assertEqual(whole.usage.completion_tokens, 6)
        self.assertEqual(whole.model, MODEL_NAME)
        self.assertEqual(whole.object, "text_completion")
        stream = self.client.completions.create(model=MODEL_NAME, prompt="The capital of France is",
                                                max_tokens=6, temperature=0, stream=True)
        pieces, finish = [], None
        for chunk in stream:
            pieces.append(chunk.choices[0].text)
            finish = chunk.choices[0].finish_reason or finish
        self.assertEqual("".join(pieces), choice.text)  # greedy: the same tokens
        self.assertEqual(finish, "length")

    def test_chat_through_the_template_and_stream_usage(self):
        messages = [{"role": "system", "content": "You are brief."},
                    {"role": "user", "content": "Say hello."}]
        whole = self.client.chat.completions.create(model=MODEL_NAME, messages=messages,
                                                    max_tokens=5, temperature=0)
        message = whole.choices[0].message
        self.assertEqual(message.role, "assistant")
        self.assertTrue(message.content)
        # The template wraps every message: far more prompt tokens than the words sent.
        self.assertGreater(whole.usage.prompt_tokens, 15)
        stream = self.client.chat.completions.create(
            model=MODEL_NAME, messages=messages, max_tokens=5, temperature=0, stream=True,
            stream_options={"include_usage": True})
        chunks = list(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, message.content)
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices][-1],
                         whole.choices[0].finish_reason)
        self.assertEqual(chunks[-1].choices, [])  # usage comes alone, last
        self.assertEqual(chunks[-1].usage.total_tokens, whole.usage.total_tokens)
        self.assertTrue(all(c.usage is None for c in chunks[:-1]))

    def test_stop_string(self):
        text = self.greedy_completion("1, 2, 3, 4,", 6).choices[0].text
        stop = text[len(text) // 2:][:2]
        self.assertTrue(stop.strip(), f"no usable stop string in {text!r}")
        stopped = self.client.completions.create(model=MODEL_NAME, prompt="1, 2, 3, 4,",
                                                 max_tokens=6, temperature=0, stop=[stop])
        self.assertEqual(stopped.choices[0].text, text[:text.index(stop)])
        self.assertEqual(stopped.choices[0].finish_reason, "stop")

    def test_seed_reproducibility(self):
        def sample(seed):
            return self.client.completions.create(model=MODEL_NAME, prompt="Once upon a time",
                                                  max_tokens=5, temperature=1.0,
                                                  seed=seed).choices[0].text
        first = sample(1234)
        self.assertEqual(sample(1234), first)
        # Another seed: some other text within a few tries (one could repeat by chance).
        self.assertTrue(any(sample(seed) != first for seed in (1, 2, 3)))

    def test_logprobs(self):
        chat = self.client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}], max_tokens=3,
            temperature=0, logprobs=True, top_logprobs=2)
        content = chat.choices[0].logprobs.content
        self.assertEqual(len(content), chat.usage.completion_tokens)
        for token in content:
            self.assertEqual(len(token.top_logprobs), 2)
            self.assertLessEqual(token.logprob, 0.0)
            # Greedy: the sampled token is the most likely one.
            self.assertAlmostEqual(token.logprob, token.top_logprobs[0].logprob, places=4)
        completion = self.client.completions.create(model=MODEL_NAME, prompt="Hello",
                                                    max_tokens=3, temperature=0, logprobs=1)
        lp = completion.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 3)
        self.assertEqual(len(lp.token_logprobs), 3)
        self.assertEqual("".join(lp.tokens), completion.choices[0].text)

    def test_errors_in_openai_shape(self):
        openai = self.openai
        with self.assertRaises(openai.BadRequestError) as bad:
            self.client.completions.create(model=MODEL_NAME, prompt="x", temperature=500)
        self.assertEqual(bad.exception.status_code, 400)
        self.assertEqual(bad.exception.body["param"], "temperature")
        self.assertIn("out of range", bad.exception.body["message"])
        with self.assertRaises(openai.BadRequestError) as n:
            self.client.completions.create(model=MODEL_NAME, prompt="x", n=2)
        self.assertEqual(n.exception.body["param"], "n")
        with self.assertRaises(openai.BadRequestError) as role:
            self.client.chat.completions.create(model=MODEL_NAME, max_tokens=1,
                                                messages=[{"role": "robot", "content": "x"}])
        self.assertEqual(role.exception.body["param"], "messages[0].role")
        with self.assertRaises(openai.NotFoundError) as unknown:
            self.client.completions.create(model="gpt-4", prompt="x", max_tokens=1)
        self.assertEqual(unknown.exception.body["code"], "model_not_found")
        # A body over 2 MiB is refused from its Content-Length, before it is read.
        host, port = self.server.http.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 3145728\r\n\r\n")
            answer = b""
            while b"}}" not in answer:
                data = s.recv(65536)
                if not data:
                    break
                answer += data
        self.assertTrue(answer.startswith(b"HTTP/1.1 413 "), answer)
        body = answer.split(b"\r\n\r\n", 1)[1]
        self.assertEqual(json.loads(body)["error"]["type"], "invalid_request_error")
        status, body = http_post(self.server.http + "/v1/completions", b"not json")
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["error"]["param"], "body")
        status, _ = http_get(self.server.http + "/v1/models", {"X-Big": "a" * 40000})
        self.assertEqual(status, 431)
        self.assertEqual(http_get(self.server.http + "/v2/nothing")[0], 404)

    def test_the_documented_example(self):
        """docs/api.md's Python example, run as written (against this server's port)."""
        if MODEL_NAME != DOCUMENTED_MODEL:
            self.skipTest(f"the example asks {DOCUMENTED_MODEL} for its answer; this server "
                          f"serves {MODEL_NAME}")
        with open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8") as f:
            doc = f.read()
        section = doc[doc.index("## OpenAI-compatible HTTP API"):]
        code = section[section.index("```python\n") + 10:]
        code = code[:code.index("```")].replace("http://localhost:8000", self.server.http)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "docs/api.md", "exec"), {})  # noqa: S102 (our own document)
        # The greedy chat answer the document shows, then the streamed story.
        self.assertTrue(out.getvalue().startswith("The capital of France is Paris.\n"),
                        out.getvalue())
        self.assertGreater(len(out.getvalue()), len("The capital of France is Paris.\n"))

    def test_disconnect_cancels_the_request(self):
        if not self.server.metrics:
            self.skipTest("no metrics URL (--metrics-url)")
        series = ('flashserve_requests_total{model="%s",api="http",status="cancelled"}'
                  % MODEL_NAME)
        before = self.server.metric(series)
        stream = self.client.completions.create(model=MODEL_NAME, prompt="Once upon a time",
                                                max_tokens=400, temperature=0, stream=True)
        for i, _ in enumerate(stream):
            if i == 2:
                break
        stream.close()  # drops the connection with the stream unread
        deadline = time.monotonic() + 20
        while self.server.metric(series) < before + 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.server.metric(series), before + 1)
        if not self.server.has_log():
            return
        deadline = time.monotonic() + 5
        while "finish_reason=client_disconnected" not in self.server.text():
            self.assertLess(time.monotonic(), deadline, "no access line for the disconnect")
            time.sleep(0.05)


def make_certificates(tmp):
    """A CA and a server certificate for 127.0.0.1 signed by it (openssl, a test tool)."""
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "1", "-subj", "/CN=flashserve-e2e-ca")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(tmp, "san.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "1", "-extfile", "san.cnf")
    return [os.path.join(tmp, name) for name in ("ca.pem", "server.pem", "server.key")]


class OpenAiHttpsAuth(unittest.TestCase):
    """gRPC's TLS certificate (--tls-cert/--tls-key: HTTPS only) and bearer tokens
    (--auth-token-file: `Authorization: Bearer ...`)."""

    server = None
    ca = None

    def test_bearer_token_over_tls(self):
        import openai  # noqa: PLC0415

        self.assertTrue(self.server.http.startswith("https://"))
        url = self.server.http + "/v1"
        tls = ssl.create_default_context(cafile=self.ca)

        def client(key):
            return openai.OpenAI(base_url=url, api_key=key, max_retries=0,
                                 http_client=openai.DefaultHttpxClient(verify=self.ca))
        with self.assertRaises(openai.AuthenticationError) as denied:
            client("wrong").models.list()
        self.assertEqual(denied.exception.status_code, 401)
        self.assertEqual(http_post(url + "/completions", b'{"prompt": "x"}', context=tls)[0], 401)
        reply = client(TOKEN).completions.create(model=MODEL_NAME, prompt="Hi", max_tokens=1,
                                                 temperature=0)
        self.assertEqual(reply.usage.completion_tokens, 1)
        # Probes stay open (--auth-open-health, the default), as gRPC health.
        self.assertEqual(http_get(self.server.http + "/ready", context=tls)[0], 200)
        with self.assertRaises((urllib.error.URLError, ConnectionError)):  # HTTPS only
            http_get(self.server.http.replace("https://", "http://") + "/ready")


def run_against(url, metrics_url, log_path):
    """The OpenAiHttp suite against a running server; its model name from /v1/models."""
    global MODEL_NAME  # noqa: PLW0603 (the tests read it)
    status, body = http_get(url.rstrip("/") + "/v1/models")
    if status != 200:
        print(f"GET {url}/v1/models: {status} {body[:200]}")
        return 1
    MODEL_NAME = json.loads(body)["data"][0]["id"]
    OpenAiHttp.server = RunningServer(url, metrics_url, log_path)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(OpenAiHttp)
    print(f"against {url} (model {MODEL_NAME}); the HTTPS/auth case needs its own server: not run")
    return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", help="the flashserve binary to start (or --url)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--url", default=os.environ.get("FLASHSERVE_OPENAI_URL"),
                        help="a running server's HTTP API, e.g. http://127.0.0.1:8000")
    parser.add_argument("--metrics-url", default=os.environ.get("FLASHSERVE_METRICS_URL"))
    parser.add_argument("--server-log", default=os.environ.get("FLASHSERVE_SERVER_LOG"))
    args = parser.parse_args()
    if not args.url and not args.server:
        parser.error("--server or --url is required")
    try:
        import openai  # noqa: F401,PLC0415
    except ImportError:
        print("skipped: the openai package is missing (scripts/install-deps.sh --test)")
        return SKIP
    if args.url:
        return run_against(args.url, args.metrics_url, args.server_log)
    if not os.path.exists(args.model):
        print(f"skipped: {args.model} is missing (scripts/fetch-model.sh)")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        token_file = os.path.join(tmp, "tokens")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        servers = []
        try:
            OpenAiHttp.server = Server(args.server, args.model, tmp, "open")
            servers.append(OpenAiHttp.server)
            ca, cert, key = make_certificates(tmp)
            OpenAiHttpsAuth.ca = ca
            OpenAiHttpsAuth.server = Server(args.server, args.model, tmp, "auth",
                                            ["--auth-token-file", token_file, "--tls-cert", cert,
                                             "--tls-key", key])
            servers.append(OpenAiHttpsAuth.server)
            suite = unittest.TestSuite()
            loader = unittest.defaultTestLoader
            suite.addTests(loader.loadTestsFromTestCase(OpenAiHttp))
            suite.addTests(loader.loadTestsFromTestCase(OpenAiHttpsAuth))
            ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
        finally:
            codes = [s.stop() for s in servers]
        for server, code in zip(servers, codes):
            if code != 0:
                print(f"server exited with {code}; log:\n{server.text()[-3000:]}")
                ok = False
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
