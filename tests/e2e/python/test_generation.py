"""Drives flashserve from Python to prove the proto works from another language.

Stubs are generated at test time from proto/ with grpcio-tools (PyPI), the real `flashserve`
binary is started on free loopback ports (--port 0; the ports are read from its log), and the
test calls every RPC of flashserve.v1.Generation plus the standard health service.

    .venv/bin/python tests/e2e/python/test_generation.py --server build/bin/flashserve

Health and reflection go through the PyPI clients grpcio-health-checking and grpcio-reflection.
Exit code 77 (ctest: skipped) when the default model or those packages are missing.
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


class Server:
    def __init__(self, binary, model, log_path):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "--model", model, "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0",
             "--http-port", "0"],
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
        # The standard health client (PyPI grpcio-health-checking).
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        health = health_pb2_grpc.HealthStub(cls.channel)
        deadline = time.monotonic() + 120
        while True:
            answer = health.Check(health_pb2.HealthCheckRequest(), timeout=5)
            if answer.status == health_pb2.HealthCheckResponse.SERVING:
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
        # The reflection client of PyPI grpcio-reflection: what grpcurl and Postman rely on.
        from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
            ProtoReflectionDescriptorDatabase)
        from google.protobuf.descriptor_pool import DescriptorPool
        database = ProtoReflectionDescriptorDatabase(self.channel)
        services = set(database.get_services())
        self.assertLessEqual({"flashserve.v1.Generation", "grpc.health.v1.Health",
                              "grpc.reflection.v1.ServerReflection",
                              "grpc.reflection.v1alpha.ServerReflection"}, services)
        pool = DescriptorPool(database)
        generation = pool.FindServiceByName("flashserve.v1.Generation")
        self.assertLessEqual({"Generate", "GenerateStream", "Tokenize", "Detokenize",
                              "GetModelInfo"}, {m.name for m in generation.methods})
        self.assertEqual(generation.methods_by_name["Generate"].input_type.full_name,
                         "flashserve.v1.GenerateRequest")
        health = pool.FindServiceByName("grpc.health.v1.Health")
        self.assertLessEqual({"Check", "Watch"}, {m.name for m in health.methods})

    def test_health_check_names_unknown_services(self):
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        health = health_pb2_grpc.HealthStub(self.channel)
        answer = health.Check(health_pb2.HealthCheckRequest(service="flashserve.v1.Generation"),
                              timeout=10)
        self.assertEqual(answer.status, health_pb2.HealthCheckResponse.SERVING)
        with self.assertRaises(grpc.RpcError) as caught:
            health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)

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
        import grpc_health  # noqa: F401
        import grpc_reflection  # noqa: F401
    except ImportError:
        print("SKIPPED: grpcio-tools/-health-checking/-reflection not installed "
              "(scripts/install-deps.sh creates .venv)")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="flashserve-py-stubs-") as stubs:
        generate_stubs(stubs)
        result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
