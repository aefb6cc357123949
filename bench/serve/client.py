"""A minimal asyncio HTTP/1.1 client for the serve benchmarks (standard library only, so the
measurement does not depend on, or pay for, a client library): one connection per request
("Connection: close"), chunked or Content-Length bodies, server-sent events read as they arrive.
Used by bench/serve/load.py and bench/serve/soak.py."""
import asyncio
import json
import time
from urllib.parse import urlsplit


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


async def _open(base, method, path, body, headers):
    u = urlsplit(base)
    r, w = await asyncio.open_connection(u.hostname, u.port or 80)
    data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    h = {"Host": u.netloc, "Connection": "close", "Content-Length": str(len(data)), "Content-Type": "application/json", **(headers or {})}
    w.write(f"{method} {path} HTTP/1.1\r\n".encode() + "".join(f"{k}: {v}\r\n" for k, v in h.items()).encode() + b"\r\n" + data)
    await w.drain()
    status = int((await r.readline()).split()[1])
    hdrs = {}
    while True:
        line = (await r.readline()).decode("latin-1").strip()
        if not line:
            break
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return r, w, status, hdrs


async def _chunks(r, hdrs):
    """the body's pieces as they arrive"""
    if hdrs.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await r.readline()).split(b";")[0], 16)
            if size == 0:
                await r.readline()
                return
            yield await r.readexactly(size)
            await r.readexactly(2)
    elif "content-length" in hdrs:
        yield await r.readexactly(int(hdrs["content-length"]))
    else:
        while True:
            b = await r.read(65536)
            if not b:
                return
            yield b


async def request(base, method, path, body=None, headers=None):
    r, w, status, hdrs = await _open(base, method, path, body, headers)
    try:
        out = b"".join([c async for c in _chunks(r, hdrs)])
    finally:
        w.close()
    return Response(status, hdrs, out)


async def stream(base, path, body, headers=None, abort_after=None):
    """POST with "stream": true. Returns (status, events, t_first, t_end, error_body): events are
    the parsed JSON of each "data:" line before [DONE]; t_first the time the first event with
    text arrived (time.perf_counter()). abort_after=N: close the connection after N events (a
    client that goes away)."""
    r, w, status, hdrs = await _open(base, "POST", path, body, headers)
    events, t_first, buf = [], None, b""
    try:
        if status != 200:
            err = b"".join([c async for c in _chunks(r, hdrs)])
            return status, events, None, time.perf_counter(), err
        async for c in _chunks(r, hdrs):
            buf += c
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                if not ev.startswith(b"data: "):
                    continue
                if ev[6:] == b"[DONE]":
                    return status, events, t_first, time.perf_counter(), None
                j = json.loads(ev[6:])
                events.append(j)
                ch = j.get("choices") or [{}]
                if t_first is None and ((ch[0].get("delta") or {}).get("content") or ch[0].get("text")):
                    t_first = time.perf_counter()
                if abort_after is not None and len(events) >= abort_after:
                    return status, events, t_first, time.perf_counter(), b"aborted"
        return status, events, t_first, time.perf_counter(), b"no [DONE]"
    finally:
        w.close()
