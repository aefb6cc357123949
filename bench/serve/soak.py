"""Soak test of a running attn serve: --workers clients send a mix of requests for --duration
seconds (streamed chat, completions, embeddings, tokenize, and the failures a server meets:
bad JSON, an unknown model, a client that disconnects mid-stream; a transcription when
--whisper and --wav are given), each checked for its expected status. The server's resident
memory (VmRSS of --pid) is sampled every 2 s. Passes (exit 0) when no request failed, no slot
or queue entry is left busy afterwards (/metrics), and RSS at the end (the largest sample of the
last 10% of the run) is less than --max-growth (default 10%) above RSS after the warm-up (the
largest sample of the first max(10 s, 20%) of the run, when every kind of request has run)."""
import argparse
import asyncio
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client  # noqa: E402


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def one(a, rng, counts, fails):
    kind = rng.choice(["chat_stream", "chat_stream", "completion", "embed", "embed", "tokenize", "bad_json", "unknown_model", "disconnect"]
                      + (["transcribe"] if a.whisper else []))
    counts[kind] = counts.get(kind, 0) + 1
    b = a.base
    try:
        if kind == "chat_stream":
            st, ev, _, _, err = await client.stream(b, "/v1/chat/completions", {
                "model": a.chat_model, "messages": [{"role": "user", "content": rng.choice(["Hi!", "Name a colour.", "Count to five."])}],
                "max_tokens": rng.randint(4, 48), "temperature": rng.choice([0, 0.7]), "stream": True})
            ok = st == 200 and err is None and ev
        elif kind == "completion":
            r = await client.request(b, "POST", "/v1/completions", {"model": a.small_model, "prompt": "Once upon a time",
                                                                    "max_tokens": rng.randint(4, 64), "temperature": 0.8})
            ok = r.status == 200 and r.json()["choices"][0]["finish_reason"] in ("stop", "length")
        elif kind == "embed":
            n = rng.randint(1, 8)
            r = await client.request(b, "POST", "/v1/embeddings", {"model": a.embed_model, "input": [f"sentence {i} of {n}" for i in range(n)]})
            ok = r.status == 200 and len(r.json()["data"]) == n
        elif kind == "tokenize":
            r = await client.request(b, "POST", "/tokenize", {"model": a.chat_model, "content": "Hello world " * rng.randint(1, 50)})
            ok = r.status == 200 and r.json()["tokens"]
        elif kind == "bad_json":
            r = await client.request(b, "POST", "/v1/chat/completions", b'{"model": "x", "messages": [')
            ok = r.status == 400
        elif kind == "unknown_model":
            r = await client.request(b, "POST", "/v1/embeddings", {"model": "no-such-model", "input": "x"})
            ok = r.status == 404
        elif kind == "disconnect":
            st, ev, _, _, err = await client.stream(b, "/v1/completions", {"model": a.chat_model, "prompt": "1, 2, 3,", "max_tokens": 500,
                                                                           "stream": True}, abort_after=2)
            ok = st == 200 and err == b"aborted"
        else:  # transcribe
            wav = open(a.wav, "rb").read()
            bd = "soakb0undary"
            body = (f"--{bd}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{a.whisper}\r\n"
                    f"--{bd}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n").encode() + wav + f"\r\n--{bd}--\r\n".encode()
            r = await client.request(b, "POST", "/v1/audio/transcriptions", body, {"Content-Type": f"multipart/form-data; boundary={bd}"})
            ok = r.status == 200 and r.json()["text"]
    except Exception as e:
        ok, kind = False, f"{kind} ({e!r})"
    if not ok:
        fails.append(kind)


async def run(a):
    rng = random.Random(a.seed)
    counts, fails, samples = {}, [], []
    t0 = time.time()
    end = t0 + a.duration

    async def worker():
        while time.time() < end:
            await one(a, rng, counts, fails)

    async def sampler():
        while time.time() < end:
            samples.append((time.time() - t0, rss_kib(a.pid)))
            await asyncio.sleep(2)

    await asyncio.gather(sampler(), *[worker() for _ in range(a.workers)])
    samples.append((time.time() - t0, rss_kib(a.pid)))
    return counts, fails, samples


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--duration", type=float, default=600)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--chat-model", default="SmolLM2-135M-Instruct.Q4_1")
    p.add_argument("--small-model", default="stories260K")
    p.add_argument("--embed-model", default="all-MiniLM-L6-v2")
    p.add_argument("--whisper")
    p.add_argument("--wav")
    p.add_argument("--max-growth", type=float, default=0.10)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    counts, fails, samples = asyncio.run(run(a))
    warm = max(10.0, 0.2 * a.duration)
    base = max(r for t, r in samples if t <= warm)
    last = max(r for t, r in samples if t >= 0.9 * a.duration)
    growth = (last - base) / base
    print(f"soak: {sum(counts.values())} requests in {a.duration:.0f} s ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}); "
          f"failed {len(fails)}{': ' + ', '.join(sorted(set(fails))[:5]) if fails else ''}")
    print(f"soak: RSS after warm-up ({warm:.0f} s) {base / 1024:.1f} MiB, at the end {last / 1024:.1f} MiB: {100 * growth:+.1f}% "
          f"(limit +{100 * a.max_growth:.0f}%); peak {max(r for _, r in samples) / 1024:.1f} MiB over {len(samples)} samples")
    # nothing left behind: no busy slot, no queued request
    time.sleep(1)
    m = asyncio.run(client.request(a.base, "GET", "/metrics")).body.decode()
    stuck = [l for l in m.splitlines() if (l.startswith("attn_busy_slots{") or l.startswith("attn_queue_depth{")) and float(l.rsplit(" ", 1)[1]) != 0]
    print(f"soak: busy slots and queue afterwards: {'all 0' if not stuck else '; '.join(stuck)}")
    ok = not fails and growth < a.max_growth and not stuck
    print("soak: PASS" if ok else "soak: FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
