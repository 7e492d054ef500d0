"""Streaming completions against flashserve's OpenAI HTTP API on loopback: C concurrent
clients (one keep-alive connection each) send N requests in all; prints generated tokens/s
and the TTFT median, to set beside `flashserve-cli load` (gRPC) on the same server. Raw
asyncio sockets (chunked SSE parsed by hand) so that the client costs little; not a general
OpenAI load generator (docs/design.md "The HTTP API and its library" has the numbers).

    python3 bench/serving/openai_sse_load.py PORT CONCURRENCY REQUESTS MAX_TOKENS [PROMPT_TOKENS]

With PROMPT_TOKENS the prompt is that many token ids (as `flashserve-cli load --prompt-tokens`
sends), else the text "Hello world". The streams are spread over one process per 32 of them
(at most SSE_LOAD_PROCESSES, default 8): one Python event loop parses ~50-100k SSE records a
second, less than the GPU server sends at 256 streams. Exits 1 when a request failed or fell
short of MAX_TOKENS (the server ignores EOS).
"""
import asyncio
import json
import multiprocessing
import os
import queue
import sys
import time


def run_share(port, conc, total, max_tokens, prompt, start_at, results):
    """One process: conc streams, total requests; puts (ttfts, tokens, failed, t0, t1)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
                       "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body))
    ttfts, tokens, left, failed = [], [0], [total], [0]

    async def one(reader, writer):
        start = time.perf_counter()
        writer.write(head + body)
        await writer.drain()
        status = await reader.readline()
        assert b" 200 " in status, status
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        first, usage = None, False
        while True:  # chunked: size line, data, CRLF
            size = int((await reader.readline()).strip(), 16)
            if size == 0:
                await reader.readline()
                break
            data = await reader.readexactly(size + 2)
            for record in data.split(b"\n\n"):
                if not record.startswith(b"data: {"):
                    continue
                if first is None:
                    first = time.perf_counter()
                    ttfts.append(first - start)
                if b'"usage":{' in record:
                    usage = True
                    n = json.loads(record[6:])["usage"]["completion_tokens"]
                    tokens[0] += n
                    failed[0] += n != max_tokens
        assert usage, "the stream ended without its usage chunk"

    async def worker():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while left[0] > 0:
            left[0] -= 1
            try:
                await one(reader, writer)
            except (AssertionError, OSError, ValueError, asyncio.IncompleteReadError) as e:
                failed[0] += 1
                print(f"request failed: {e!r}", file=sys.stderr)
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()

    async def main():
        await asyncio.sleep(max(0.0, start_at - time.time()))  # every process at once
        t0 = time.time()
        await asyncio.gather(*(worker() for _ in range(conc)))
        return t0, time.time()

    t0, t1 = asyncio.run(main())
    results.put((ttfts, tokens[0], failed[0], t0, t1))


def main():
    port, conc, total, max_tokens = map(int, sys.argv[1:5])
    prompt = list(range(1000, 1000 + int(sys.argv[5]))) if len(sys.argv) > 5 else "Hello world"
    procs = max(1, min(int(os.environ.get("SSE_LOAD_PROCESSES", "8")), (conc + 31) // 32))
    results = multiprocessing.Queue()
    start_at = time.time() + 0.2 + 0.05 * procs
    workers = []
    for i in range(procs):
        share_conc = conc // procs + (i < conc % procs)
        share_total = total // procs + (i < total % procs)
        workers.append(multiprocessing.Process(
            target=run_share,
            args=(port, share_conc, share_total, max_tokens, prompt, start_at, results),
            daemon=True))
    for w in workers:
        w.start()
    shares = []
    while len(shares) < len(workers):
        try:
            shares.append(results.get(timeout=1))
        except queue.Empty:
            if not any(w.is_alive() for w in workers) and results.empty():
                break  # a process died without its result
    for w in workers:
        w.join(timeout=10)
    if not shares:
        print("http: no client process finished", file=sys.stderr)
        return 1
    ttfts = sorted(t for share in shares for t in share[0])
    tokens = sum(share[1] for share in shares)
    failed = sum(share[2] for share in shares) + len(workers) - len(shares)
    dt = max(share[4] for share in shares) - min(share[3] for share in shares)
    p50 = 1000 * ttfts[(len(ttfts) - 1) // 2] if ttfts else float("nan")  # lower median, as the cli
    print(f"http  concurrency {conc}: {total} requests, {tokens} tokens in {dt:.2f} s = "
          f"{tokens / dt:.0f} tok/s; TTFT p50 {p50:.2f} ms; failed {failed} "
          f"({procs} client processes)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
