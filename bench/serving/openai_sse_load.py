"""Streaming completions against flashserve's OpenAI HTTP API on loopback: C concurrent
clients (one keep-alive connection each) send N requests in all; prints generated tokens/s
and the TTFT median, to set beside `flashserve-cli load` (gRPC) on the same server. Raw
asyncio sockets (chunked SSE parsed by hand) so that the client costs little; not a general
OpenAI load generator (docs/design.md "The HTTP API and its library" has the numbers).

    python3 bench/serving/openai_sse_load.py PORT CONCURRENCY REQUESTS MAX_TOKENS
"""
import asyncio, json, sys, time

port, conc, total, max_tokens = map(int, sys.argv[1:5])
body = json.dumps({"prompt": "Hello world", "max_tokens": max_tokens, "ignore_eos": True,
                   "temperature": 0, "stream": True,
                   "stream_options": {"include_usage": True}}).encode()
head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body))
ttfts, tokens, left = [], [0], [total]

async def one(reader, writer):
    start = time.perf_counter()
    writer.write(head + body)
    await writer.drain()
    status = await reader.readline()
    assert b" 200 " in status, status
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    first = None
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
                tokens[0] += json.loads(record[6:])["usage"]["completion_tokens"]

async def worker():
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while left[0] > 0:
        left[0] -= 1
        await one(reader, writer)
    writer.close()

async def main():
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    dt = time.perf_counter() - t0
    ttfts.sort()
    print(f"http  concurrency {conc}: {total} requests, {tokens[0]} tokens in {dt:.2f} s = "
          f"{tokens[0]/dt:.0f} tok/s; TTFT p50 {1000*ttfts[len(ttfts)//2]:.2f} ms")

asyncio.run(main())
