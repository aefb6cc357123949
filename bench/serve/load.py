"""Load generator for OpenAI-compatible servers (bench/serve/run.sh runs it against attn serve and
llama-cpp-python's server). For each concurrency C: C clients, each sending --requests streamed
chat requests one after another (greedy unless --temperature, --max-tokens,
stream_options.include_usage; a server that sends no usage has its tokens counted as content
chunks, one per token, and the line says so; a stream that ends without a finish_reason is a
failed request). Reports per phase: aggregate generated tokens/s (all tokens / the phase's wall
time), time to first token and request latency p50 / p99, failed requests. With --embed-model,
the same for embeddings (one text per request): embeddings/s and latency. --json FILE keeps the numbers;
--compare A.json [B.json] prints each one's scaling (8 clients / 1) and A's ratios to B.
--rounds N repeats the chat phases N times in turn (1, 8, 1, 8, ...: each pair in the same
minute of a host whose speed drifts) and --compare then gives every round's 8/1 and their median.
--server-pid PID (a server on this machine) adds the server process's CPU time (user + system,
/proc/PID/stat) per generated token of each phase: a signal that a busy machine disturbs little."""
import argparse
import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client  # noqa: E402

PROMPTS = [
    "Explain in a few sentences why the sky is blue.",
    "Write a short story about a robot who learns to paint.",
    "List five uses of a paperclip and explain each briefly.",
    "What are the main differences between a cat and a dog as pets?",
    "Describe how a bicycle works to a ten-year-old.",
    "Give me a recipe for a simple vegetable soup.",
    "Why do leaves change colour in autumn?",
    "Summarise the plot of a fairy tale of your choice.",
]


def cpu_s(pid):
    """user + system CPU seconds of process pid so far (None without a pid)"""
    if not pid:
        return None
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


async def chat_phase(a, conc):
    res = []

    async def worker(w):
        for i in range(a.requests):
            body = {"model": a.model, "messages": [{"role": "user", "content": PROMPTS[(w * a.requests + i) % len(PROMPTS)]}],
                    "max_tokens": a.max_tokens, "temperature": a.temperature, "seed": w * a.requests + i, "stream": True, "stream_options": {"include_usage": True}}
            t0 = time.perf_counter()
            try:
                st, ev, tf, te, err = await client.stream(a.base, "/v1/chat/completions", body, a.headers)
            except Exception as e:  # a refused or reset connection is a failed request
                res.append({"ok": False, "why": repr(e)})
                continue
            usage = next((e["usage"] for e in reversed(ev) if e.get("usage")), None)
            chunks = sum(1 for e in ev if e.get("choices") and (e["choices"][0].get("delta") or {}).get("content"))
            # a stream that ends ([DONE]) without a finish_reason was cut short by the server (as
            # llama-cpp-python's interrupt_requests does to a running stream when another request
            # arrives): a failed request, not a short one
            finished = any(e["choices"][0].get("finish_reason") for e in ev if e.get("choices"))
            if st == 200 and err is None and not finished:
                err = "the stream ended without a finish_reason"
            res.append({"ok": st == 200 and err is None, "why": err, "tokens": usage["completion_tokens"] if usage else chunks,
                        "counted": usage is None, "ttft": (tf - t0) if tf else None, "lat": te - t0})

    c0, t0 = cpu_s(a.server_pid), time.perf_counter()
    await asyncio.gather(*[worker(w) for w in range(conc)])
    wall = time.perf_counter() - t0
    c1 = cpu_s(a.server_pid)
    ok = [r for r in res if r["ok"]]
    tok = sum(r["tokens"] for r in ok)
    return {"server_cpu_ms_per_token": 1000 * (c1 - c0) / tok if c1 is not None and tok else None, "phase": "chat", "concurrency": conc, "requests": len(res), "failed": len(res) - len(ok), "tokens": tok, "wall_s": wall,
            "tokens_per_s": tok / wall, "ttft_p50": pct([r["ttft"] for r in ok if r["ttft"]], 50),
            "ttft_p99": pct([r["ttft"] for r in ok if r["ttft"]], 99), "lat_p50": pct([r["lat"] for r in ok], 50),
            "lat_p99": pct([r["lat"] for r in ok], 99), "tokens_counted_as_chunks": any(r.get("counted") for r in ok)}


async def embed_phase(a, conc):
    lat, fails = [], 0

    async def worker(w):
        nonlocal fails
        for i in range(a.requests * 4):
            t0 = time.perf_counter()
            try:
                r = await client.request(a.base, "POST", "/v1/embeddings", {"model": a.embed_model, "input": PROMPTS[(w + i) % len(PROMPTS)]}, a.headers)
                ok = r.status == 200 and len(r.json()["data"]) == 1
            except Exception:
                ok = False
            if ok:
                lat.append(time.perf_counter() - t0)
            else:
                fails += 1

    t0 = time.perf_counter()
    await asyncio.gather(*[worker(w) for w in range(conc)])
    wall = time.perf_counter() - t0
    return {"phase": "embed", "concurrency": conc, "requests": len(lat) + fails, "failed": fails, "wall_s": wall,
            "embeddings_per_s": len(lat) / wall, "lat_p50": pct(lat, 50), "lat_p99": pct(lat, 99)}


def show(label, r):
    if r["phase"] == "chat":
        print(f"{label}: chat  C={r['concurrency']:>2}: {r['tokens_per_s']:7.1f} tokens/s aggregate ({r['tokens']} tokens in {r['wall_s']:.1f} s"
              f"{', counted as chunks' if r['tokens_counted_as_chunks'] else ''}), TTFT p50 {r['ttft_p50']:.3f} s p99 {r['ttft_p99']:.3f} s, "
              f"latency p50 {r['lat_p50']:.2f} s p99 {r['lat_p99']:.2f} s, failed {r['failed']}/{r['requests']}"
              f"{'' if r.get('server_cpu_ms_per_token') is None else ', server CPU %.2f ms/token' % r['server_cpu_ms_per_token']}", flush=True)
    else:
        print(f"{label}: embed C={r['concurrency']:>2}: {r['embeddings_per_s']:7.1f} embeddings/s, latency p50 {r['lat_p50'] * 1000:.1f} ms "
              f"p99 {r['lat_p99'] * 1000:.1f} ms, failed {r['failed']}/{r['requests']}", flush=True)


def compare(pa, pb=None):
    a = json.load(open(pa))
    b = json.load(open(pb)) if pb else {"label": "-", "results": []}
    rounds = sorted({r.get("round", 0) for r in a["results"] if r["phase"] == "chat"})
    if len(rounds) > 1:
        rs = []
        for k in rounds:
            d = {r["concurrency"]: r for r in a["results"] if r["phase"] == "chat" and r.get("round", 0) == k}
            if 1 in d and 8 in d:
                rs.append(d[8]["tokens_per_s"] / d[1]["tokens_per_s"])
                print(f"{a['label']}: round {k + 1}: {d[1]['tokens_per_s']:.1f} tokens/s at 1 client, {d[8]['tokens_per_s']:.1f} at 8 = {rs[-1]:.2f}x")
        if rs:
            m = sorted(rs)
            med = m[len(m) // 2] if len(m) % 2 else (m[len(m) // 2 - 1] + m[len(m) // 2]) / 2
            b1 = max(r["tokens_per_s"] for r in a["results"] if r["phase"] == "chat" and r["concurrency"] == 1)
            b8 = max(r["tokens_per_s"] for r in a["results"] if r["phase"] == "chat" and r["concurrency"] == 8)
            print(f"{a['label']}: 8/1 over {len(rs)} rounds: median {med:.2f}x, min {m[0]:.2f}x, max {m[-1]:.2f}x, "
                  f"{sum(x >= 3 for x in rs)} of {len(rs)} rounds >= 3x; best 8 / best 1 = {b8:.1f} / {b1:.1f} = {b8 / b1:.2f}x "
                  f"(target >= 3x for attn)")
    last = rounds[-1] if rounds else 0
    ca = {r["concurrency"]: r for r in a["results"] if r["phase"] == "chat" and r.get("round", 0) == last}
    cb = {r["concurrency"]: r for r in b["results"] if r["phase"] == "chat"}
    for label, d in ((a["label"], ca), (b["label"], cb)):
        if 1 in d and 8 in d:
            print(f"{label}: aggregate tokens/s at 8 clients / at 1 client = {d[8]['tokens_per_s'] / d[1]['tokens_per_s']:.2f}x (target >= 3x for attn)")
    for c in sorted(set(ca) & set(cb)):
        print(f"C={c:>2}: {a['label']} {ca[c]['tokens_per_s']:.1f} tokens/s vs {b['label']} {cb[c]['tokens_per_s']:.1f} tokens/s = "
              f"{ca[c]['tokens_per_s'] / cb[c]['tokens_per_s']:.2f}x{' (target >= 1.5x at 8)' if c == 8 else ''}")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base", help="server URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--model")
    p.add_argument("--embed-model")
    p.add_argument("--api-key")
    p.add_argument("--concurrency", default="1,4,8,16")
    p.add_argument("--requests", type=int, default=4, help="chat requests per client (embeddings: 4x as many)")
    p.add_argument("--rounds", type=int, default=1, help="the chat phases this many times in turn (each round's 8/1 in --compare)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy (the benchmark); > 0 samples (seeded per request)")
    p.add_argument("--label", default="server")
    p.add_argument("--server-pid", type=int, help="the server's process id (same machine): its CPU time per generated token")
    p.add_argument("--json")
    p.add_argument("--compare", nargs="+", metavar="JSON", help="A.json [B.json]: the scaling of each, B's ratios to A")
    a = p.parse_args()
    if a.compare:
        compare(*a.compare)
        return
    a.headers = {"Authorization": "Bearer " + a.api_key} if a.api_key else {}
    out = []
    for k in range(max(1, a.rounds)):
        for c in [int(x) for x in a.concurrency.split(",")]:
            r = asyncio.run(chat_phase(a, c))
            r["round"] = k
            show(a.label, r)
            out.append(r)
    if a.embed_model:
        for c in [int(x) for x in a.concurrency.split(",")]:
            r = asyncio.run(embed_phase(a, c))
            show(a.label, r)
            out.append(r)
    if a.json:
        json.dump({"label": a.label, "results": out}, open(a.json, "w"), indent=1)
    if any(r["failed"] for r in out):
        sys.exit(1)


if __name__ == "__main__":
    main()
