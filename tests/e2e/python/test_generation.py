"""Drives flashserve from Python to prove the proto works from another language.

Stubs are generated at test time from proto/ with grpcio-tools (PyPI), the real `flashserve`
binary is started on free loopback ports (--port 0; the ports are read from its log), and the
test calls every RPC of flashserve.v1.Generation plus the standard health service.

    .venv/bin/python tests/e2e/python/test_generation.py --server build/bin/flashserve

Exit code 77 (ctest: skipped) when the default model or grpcio-tools is missing.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT_MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
PROTO_FILES = ["flashserve/v1/generation.proto"]
SERVING = 1  # grpc.health.v1.HealthCheckResponse.ServingStatus


def generate_stubs(out_dir):
    from grpc_tools import protoc  # noqa: PLC0415 (imported late: skip cleanly if absent)
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    for proto in PROTO_FILES:
        rc = protoc.main(["protoc", f"-I{ROOT}/proto", f"-I{include}", f"--python_out={out_dir}",
                          f"--grpc_python_out={out_dir}", os.path.join(ROOT, "proto", proto)])
        if rc != 0:
            raise RuntimeError(f"protoc failed on {proto}")
    sys.path.insert(0, out_dir)


def parse_fields(buf):
    """Top-level fields of a serialized protobuf message: {number: [value, ...]}, where a
    value is an int (varint) or bytes (length-delimited). Enough to read reflection replies
    without generated stubs."""
    fields, i = {}, 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value

    while i < len(buf):
        key = varint()
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value = varint()
        elif wire_type == 2:
            length = varint()
            value = buf[i:i + length]
            i += length
        else:
            raise ValueError(f"unexpected wire type {wire_type}")
        fields.setdefault(number, []).append(value)
    return fields


def length_delimited(number, payload):
    """One length-delimited field (payload < 128 bytes)."""
    assert len(payload) < 128
    return bytes([(number << 3) | 2, len(payload)]) + payload


class Server:
    def __init__(self, binary, model, log_path):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "--model", model, "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(gRPC\)", text)
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("flashserve did not start:\n" + text[-3000:])
            time.sleep(0.02)
        self.target = f"127.0.0.1:{self.port}"

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


class GenerationFromPython(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        import grpc
        from flashserve.v1 import generation_pb2_grpc

        cls.tmp = tempfile.TemporaryDirectory(prefix="flashserve-py-e2e-")
        cls.server = Server(ARGS.server, ARGS.model, os.path.join(cls.tmp.name, "server.log"))
        cls.channel = grpc.insecure_channel(cls.server.target)
        cls.stub = generation_pb2_grpc.GenerationStub(cls.channel)
        # grpc.health.v1.Health/Check without generated stubs (the name `grpc` is taken by
        # grpcio): an empty HealthCheckRequest is b"", the response is field 1 as a varint.
        check = cls.channel.unary_unary("/grpc.health.v1.Health/Check",
                                        request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)
        deadline = time.monotonic() + 120
        while True:
            answer = check(b"", timeout=5)
            status = answer[1] if len(answer) >= 2 and answer[0] == 0x08 else 0
            if status == SERVING:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("flashserve not SERVING in time")
            time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.channel.close()
            rc = cls.server.stop()
            cls.tmp.cleanup()
            assert rc == 0, f"flashserve exited with {rc}"

    def request(self, prompt, max_new_tokens):
        from flashserve.v1 import generation_pb2 as pb
        return pb.GenerateRequest(prompt=prompt, sampling=pb.SamplingParams(temperature=0),
                                  stopping=pb.StoppingCriteria(max_new_tokens=max_new_tokens))

    def test_model_info(self):
        from flashserve.v1 import generation_pb2 as pb
        info = self.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
        self.assertEqual(info.architecture, "llama")
        self.assertEqual(info.vocab_size, 49152)
        self.assertGreater(info.kv_cache.num_blocks, 0)

    def test_unary_and_stream_agree(self):
        from flashserve.v1 import generation_pb2 as pb
        request = self.request("The capital of France is", 8)
        unary = self.stub.Generate(request, timeout=180)
        self.assertIn("Paris", unary.text)
        self.assertEqual(unary.usage.completion_tokens, len(unary.token_ids))
        messages = list(self.stub.GenerateStream(request, timeout=180))
        self.assertEqual("".join(m.text for m in messages), unary.text)
        self.assertTrue(messages[-1].HasField("final"))
        self.assertEqual(messages[-1].final.finish_reason, unary.finish_reason)
        self.assertIn(unary.finish_reason, (pb.FINISH_REASON_LENGTH, pb.FINISH_REASON_STOP))

    def test_chat(self):
        from flashserve.v1 import generation_pb2 as pb
        request = pb.GenerateRequest(
            chat=pb.ChatInput(messages=[pb.ChatMessage(role="user", content="Say hello.")]),
            sampling=pb.SamplingParams(temperature=0),
            stopping=pb.StoppingCriteria(max_new_tokens=8))
        response = self.stub.Generate(request, timeout=180)
        self.assertTrue(response.text)

    def test_tokenize_detokenize(self):
        from flashserve.v1 import generation_pb2 as pb
        text = "Hello from Python, caf\u00e9 \u4e2d\u6587!"
        ids = self.stub.Tokenize(pb.TokenizeRequest(text=text), timeout=30).token_ids
        self.assertGreater(len(ids), 0)
        back = self.stub.Detokenize(pb.DetokenizeRequest(token_ids=ids), timeout=30)
        self.assertEqual(back.text, text)

    def test_reflection_describes_the_services(self):
        # grpc.reflection.v1alpha by hand (no stubs): what grpcurl and Postman rely on.
        from google.protobuf import descriptor_pb2
        call = self.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda b: b, response_deserializer=lambda b: b)
        list_services = length_delimited(7, b"")
        by_symbol = [length_delimited(4, name.encode())
                     for name in ("flashserve.v1.Generation", "grpc.health.v1.Health")]
        replies = [parse_fields(r) for r in call(iter([list_services] + by_symbol), timeout=30)]
        self.assertEqual(len(replies), 3)
        services = {parse_fields(svc)[1][0].decode()
                    for svc in parse_fields(replies[0][6][0]).get(1, [])}
        self.assertLessEqual({"flashserve.v1.Generation", "grpc.health.v1.Health",
                              "grpc.reflection.v1alpha.ServerReflection"}, services)
        for reply, (package, service) in zip(replies[1:], [("flashserve.v1", "Generation"),
                                                            ("grpc.health.v1", "Health")]):
            self.assertNotIn(7, reply, f"reflection error for {package}.{service}")
            files = [descriptor_pb2.FileDescriptorProto.FromString(f)
                     for f in parse_fields(reply[4][0])[1]]
            self.assertTrue(any(f.package == package and service in [s.name for s in f.service]
                                for f in files))

    def test_invalid_argument_names_the_field(self):
        import grpc
        from flashserve.v1 import generation_pb2 as pb
        request = self.request("Hello", 4)
        request.sampling.top_p = 2.0
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.Generate(request, timeout=30)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(caught.exception.details().startswith("sampling.top_p:"),
                        caught.exception.details())


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, help="path of the flashserve binary")
    parser.add_argument("--model", default=os.environ.get("FLASHSERVE_E2E_MODEL", DEFAULT_MODEL))
    ARGS, rest = parser.parse_known_args()
    if not os.path.isfile(ARGS.model):
        print(f"SKIPPED: model {ARGS.model} not present")
        return SKIP
    try:
        import grpc_tools  # noqa: F401
    except ImportError:
        print("SKIPPED: grpcio-tools not installed (scripts/install-deps.sh creates .venv)")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="flashserve-py-stubs-") as stubs:
        generate_stubs(stubs)
        result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
