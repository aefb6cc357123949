"""attn serve (issue 20) through the official `openai` client and raw HTTP: the server is started
on a free loopback port (--port 0, the port read from its "listening" line), bounded in time, and
stopped by SIGTERM (it must exit 0). References are the CLI verbs the server must agree with:
`attn embed` (identical float32 embeddings), `attn chat --temp 0` (identical reply), `attn
generate --temp 0` (identical continuation). The openai package comes from scripts/setup.sh (a
.venv with --system-site-packages that tests/run_python_tests.sh prefers); without it these tests
are skipped with that message."""
import base64
import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import MINILM, ROOT

openai = pytest.importorskip("openai", reason="the openai package is not installed: run scripts/setup.sh (it pip-installs openai into .venv)")

EXE = os.environ.get("ATTN_BIN", os.path.join(ROOT, "build", "attn"))
if not os.path.isabs(EXE):
    EXE = os.path.join(ROOT, EXE)
STORIES = os.path.normpath(os.path.join(ROOT, "..", "shared", "models", "stories260K"))
SMOL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
SMOL_NAME = "SmolLM2-135M-Instruct.Q4_1"
for p in (STORIES, SMOL, MINILM):
    if not os.path.exists(p):
        pytest.skip(f"model {p} is missing (scripts/setup.sh fetches it)", allow_module_level=True)


class Server:
    def __init__(self, *args, timeout=60):
        self.p = subprocess.Popen([EXE, "serve", "--port", "0", "--threads", "2", *args], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, cwd=ROOT)
        self.log = []
        self.port = None
        threading.Thread(target=lambda: [self.log.append(x) for x in self.p.stderr], daemon=True).start()
        end = time.time() + timeout
        while time.time() < end and self.p.poll() is None and not any("ready" in x for x in self.log):
            time.sleep(0.05)
        for line in list(self.log):
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None or not any("ready" in x for x in self.log):
            self.p.kill()
            self.p.wait()
            raise RuntimeError("attn serve did not start: " + "".join(self.log))
        self.base = f"http://127.0.0.1:{self.port}"

    def client(self, key="none"):
        return openai.OpenAI(base_url=self.base + "/v1", api_key=key, max_retries=0, timeout=120)

    def raw(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        h = {"Content-Type": "application/json", **(headers or {})}
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = r.status, dict(r.getheaders()), r.read()
        c.close()
        return out

    def metric(self, name, key=None):
        _, _, b = self.raw("GET", "/metrics", headers={"Authorization": "Bearer " + key} if key else None)
        total = 0.0
        for line in b.decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self, grace=30):
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(grace)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return "killed"


@pytest.fixture(scope="module")
def srv():
    s = Server("--model", STORIES, "--model", SMOL, "--model", MINILM, "--parallel", "4", "--max-body", "65536")
    yield s
    assert s.stop() == 0, "attn serve must exit 0 on SIGTERM: " + "".join(s.log)


def cli(*args):
    r = subprocess.run([EXE, *args], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_health_models_metrics(srv):
    st, _, body = srv.raw("GET", "/health")
    assert st == 200 and json.loads(body)["status"] == "ok"
    ids = sorted(m.id for m in srv.client().models.list())
    assert ids == sorted(["stories260K", SMOL_NAME, "all-MiniLM-L6-v2"])
    st, h, body = srv.raw("GET", "/metrics")
    text = body.decode()
    assert st == 200 and h["Content-Type"].startswith("text/plain")
    for name in ("attn_requests_total", "attn_generated_tokens_total", "attn_queue_depth", "attn_busy_slots",
                 "attn_request_duration_seconds_bucket"):
        assert name in text


def test_embeddings_equal_cli(srv):
    texts = ["Hello world", "Attention is all you need, they said.", "Ünïcode and emoji 🙂 work too"]
    out = cli("embed", "--model", MINILM, *texts)
    ref = np.array([json.loads(l) for l in out.splitlines()], dtype=np.float32)
    c = srv.client()
    r = c.embeddings.create(model="all-MiniLM-L6-v2", input=texts)
    got = np.array([d.embedding for d in r.data], dtype=np.float32)
    assert [d.index for d in r.data] == [0, 1, 2]
    np.testing.assert_array_equal(got, ref)  # the same function on the same texts: bit-identical
    assert r.usage.prompt_tokens > 0
    one = c.embeddings.create(model="all-MiniLM-L6-v2", input=texts[1])
    # alone against in a batch of 3: bit-identical where OpenBLAS runs its SkylakeX sgemm (Zen 4,
    # Intel AVX-512); its Haswell / Zen kernels (Zen 3, and Zen 5, which OpenBLAS 0.3.21 does not
    # know) sum a row by its place in a 12-row tile, so a sentence's rows alone and in a padded
    # batch round differently: ~5e-8 on these unit vectors, 1e-6 allowed (a wrong row or
    # pooling is off by ~1e-2)
    np.testing.assert_allclose(np.array(one.data[0].embedding, dtype=np.float32), ref[1], atol=1e-6, rtol=0)
    # base64: the raw float32 bytes
    st, _, body = srv.raw("POST", "/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": texts, "encoding_format": "base64"})
    b64 = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in json.loads(body)["data"]])
    np.testing.assert_array_equal(b64, ref)
    # token arrays (from /tokenize, [CLS] .. [SEP] included) give the text's embedding; another code
    # path (pooling in float64 here, float32 sums in attn_bert_embed): 1e-6 on unit vectors
    st, _, body = srv.raw("POST", "/tokenize", {"model": "all-MiniLM-L6-v2", "content": texts[0]})
    ids = json.loads(body)["tokens"]
    assert ids[0] == 101 and ids[-1] == 102
    r = c.embeddings.create(model="all-MiniLM-L6-v2", input=[ids])
    np.testing.assert_allclose(np.array(r.data[0].embedding), ref[0], atol=1e-6)


def test_embeddings_concurrent(srv):
    texts = [f"sentence number {i} about attention" for i in range(12)]
    ref = np.array([json.loads(l) for l in cli("embed", "--model", MINILM, *texts).splitlines()], dtype=np.float32)
    got = [None] * len(texts)

    def one(i):
        got[i] = srv.client().embeddings.create(model="all-MiniLM-L6-v2", input=texts[i]).data[0].embedding

    ths = [threading.Thread(target=one, args=(i,)) for i in range(len(texts))]
    [t.start() for t in ths]
    [t.join(120) for t in ths]
    # batched with whichever requests came at the same time: as alone vs batched above
    np.testing.assert_allclose(np.array(got, dtype=np.float32), ref, atol=1e-6, rtol=0)


def _metric(srv, name):
    st, _, body = srv.raw("GET", "/metrics")
    assert st == 200
    return int(float(re.search(r"^" + name + r" (\S+)$", body.decode(), re.M).group(1)))


def test_prompt_cache(srv):
    # a slot keeps its last prompt: a request sharing its start (the chat template's system turn,
    # here the whole earlier conversation) feeds only the rest, and replies as alone (CLI)
    c = srv.client()
    msgs = [{"role": "user", "content": "Name a fruit that is yellow."}]
    c.chat.completions.create(model=SMOL_NAME, messages=[{"role": "user", "content": "Hi."}], temperature=0, max_tokens=2)
    before = _metric(srv, "attn_prompt_cached_tokens_total")
    r1 = c.chat.completions.create(model=SMOL_NAME, messages=msgs, temperature=0, max_tokens=8)
    mid = _metric(srv, "attn_prompt_cached_tokens_total")
    msgs2 = msgs + [{"role": "assistant", "content": r1.choices[0].message.content}, {"role": "user", "content": "And a red one?"}]
    r2 = c.chat.completions.create(model=SMOL_NAME, messages=msgs2, temperature=0, max_tokens=8)
    after = _metric(srv, "attn_prompt_cached_tokens_total")
    assert mid > before  # the system turn of an earlier request
    assert after - mid > 20  # the first turn, on top
    ref1 = cli("chat", "--model", SMOL, "--temp", "0", "-n", "8", "--threads", "2", msgs[0]["content"]).rstrip("\n")
    assert r1.choices[0].message.content == ref1
    r3 = c.chat.completions.create(model=SMOL_NAME, messages=msgs, temperature=0, max_tokens=8)
    assert r3.choices[0].message.content == ref1  # the whole prompt held: its last rows are fed again


def test_chat_equals_cli(srv):
    msg = "What is the capital of France?"
    ref = cli("chat", "--model", SMOL, "--temp", "0", "-n", "16", "--threads", "2", msg).rstrip("\n")
    r = srv.client().chat.completions.create(model=SMOL_NAME, messages=[{"role": "user", "content": msg}], temperature=0, max_tokens=16)
    assert r.choices[0].message.content == ref
    assert r.choices[0].message.role == "assistant" and r.object == "chat.completion"
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 16
    assert r.usage.prompt_tokens == 37 and r.usage.total_tokens == 53  # the template's default system turn is there
    # streamed: the chunks joined are the reply; usage comes last with include_usage
    s = srv.client().chat.completions.create(model=SMOL_NAME, messages=[{"role": "user", "content": msg}], temperature=0, max_tokens=16,
                                             stream=True, stream_options={"include_usage": True})
    parts, finish, usage = [], None, None
    for ch in s:
        if ch.choices:
            parts.append(ch.choices[0].delta.content or "")
            finish = ch.choices[0].finish_reason or finish
        if ch.usage:
            usage = ch.usage
    assert "".join(parts) == ref and finish == "length" and usage.completion_tokens == 16
    # one delta a token, however fast the client reads (16 ASCII tokens, no stop string holding text back)
    assert len([p for p in parts if p]) == 16, parts


def test_completion_equals_generate_and_stream(srv):
    prompt = "Once upon a time, there was a"
    ref = cli("generate", "--model", os.path.join(STORIES, "stories260K.bin"), "--tokenizer", os.path.join(STORIES, "tok512.bin"),
              "--temp", "0", "-n", "40", "-p", prompt)
    c = srv.client()
    r = c.completions.create(model="stories260K", prompt=prompt, temperature=0, max_tokens=40)
    assert prompt + r.choices[0].text == ref.rstrip("\n")
    s = c.completions.create(model="stories260K", prompt=prompt, temperature=0, max_tokens=40, stream=True)
    texts = [ch.choices[0].text for ch in s if ch.choices]
    assert "".join(texts) == r.choices[0].text
    assert len([x for x in texts if x]) == r.usage.completion_tokens, texts  # one event a token
    # seeded sampling is reproducible; a stop string ends the text before it
    a = c.completions.create(model="stories260K", prompt=prompt, temperature=0.9, top_p=0.9, seed=7, max_tokens=30).choices[0].text
    b = c.completions.create(model="stories260K", prompt=prompt, temperature=0.9, top_p=0.9, seed=7, max_tokens=30).choices[0].text
    assert a == b
    full = r.choices[0].text
    word = full.split()[3]
    st = c.completions.create(model="stories260K", prompt=prompt, temperature=0, max_tokens=40, stop=[word, "zzz"])
    assert st.choices[0].finish_reason == "stop" and st.choices[0].text == full[:full.index(word)]


def test_16_concurrent_clients(srv):
    prompts = [f"{w} went to the" for w in ("Tom", "Lily", "The dog", "A bird", "Ben", "Sue", "The cat", "Max",
                                            "Anna", "The boy", "Mia", "Sam", "The girl", "Tim", "Zoe", "Bob")]
    c = srv.client()
    alone = [c.completions.create(model="stories260K", prompt=p, temperature=0, max_tokens=60).choices[0].text for p in prompts]
    got = [None] * 16

    def one(i):
        got[i] = srv.client().completions.create(model="stories260K", prompt=prompts[i], temperature=0, max_tokens=60).choices[0].text

    ths = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    [t.start() for t in ths]
    [t.join(300) for t in ths]
    # greedy output is the same alone and batched (batched logits differ from the single path by
    # < 1e-5, tests/test_llama_batch.c; no argmax flips on these prompts)
    assert got == alone


def test_bad_requests(srv):
    c = srv.client()
    st, _, body = srv.raw("POST", "/v1/chat/completions", b'{"model": "x", "messages": [')
    e = json.loads(body)["error"]
    assert st == 400 and "not valid JSON" in e["message"] and set(e) == {"message", "type", "param", "code"}
    # a lone UTF-16 surrogate escape: named, with its byte offset (was only "not valid JSON"); a proper
    # pair (an emoji) and an escaped backslash before 'ud800' are fine
    st, _, body = srv.raw("POST", "/v1/embeddings", b'{"model": "all-MiniLM-L6-v2", "input": "a\\ud800b"}')
    e = json.loads(body)["error"]
    assert st == 400 and "lone UTF-16 surrogate" in e["message"] and "\\ud800 at byte 41" in e["message"], e
    for ok in (b'{"model": "all-MiniLM-L6-v2", "input": "a\\ud83d\\ude00b"}', b'{"model": "all-MiniLM-L6-v2", "input": "a\\\\ud800b"}'):
        st, _, body = srv.raw("POST", "/v1/embeddings", ok)
        assert st == 200, body
    # a \u0000 escape (cJSON's strings end there: "ab\u0000cd" was embedded as "ab") and data after the
    # JSON value (was ignored): 400s that say so (new-user findings)
    st, _, body = srv.raw("POST", "/v1/embeddings", b'{"model": "all-MiniLM-L6-v2", "input": "ab\\u0000cd"}')
    e = json.loads(body)["error"]
    assert st == 400 and "u0000 at byte 42" in e["message"] and "NUL" in e["message"], e
    st, _, body = srv.raw("POST", "/v1/embeddings", b'{"model": "all-MiniLM-L6-v2", "input": "abc"} trailing')
    e = json.loads(body)["error"]
    assert st == 400 and "after the JSON value at byte 46" in e["message"], e
    st, _, body = srv.raw("POST", "/v1/embeddings", b'{"model": "all-MiniLM-L6-v2", "input": "abc"} \r\n')
    assert st == 200, body
    with pytest.raises(openai.BadRequestError) as ei:
        c.completions.create(model="stories260K", prompt="a", max_tokens="many")
    assert "max_tokens" in str(ei.value)
    with pytest.raises(openai.BadRequestError) as ei:
        c.completions.create(model="stories260K", prompt="a", max_tokens=-1)
    assert "max_tokens" in str(ei.value)
    with pytest.raises(openai.BadRequestError) as ei:
        c.completions.create(model="stories260K", prompt="a", temperature=1e308)
    assert "temperature" in str(ei.value)
    # a top_p above 0 that is 0 as the sampler's float32: a 400 (was a 500 from the sampler; new-user finding)
    for tp in (1e-300, 1e-46):
        with pytest.raises(openai.BadRequestError) as ei:
            c.completions.create(model="stories260K", prompt="a", top_p=tp)
        assert "top_p" in str(ei.value) and "float32" in str(ei.value)
    with pytest.raises(openai.BadRequestError) as ei:
        c.chat.completions.create(model=SMOL_NAME, messages=[{"role": "user", "content": "hi"}], n=1000)
    assert "'n'" in str(ei.value)
    with pytest.raises(openai.BadRequestError) as ei:
        c.chat.completions.create(model=SMOL_NAME, messages=[{"role": "user", "content": "hi"}], tools=[{"type": "function", "function": {"name": "f"}}])
    assert "'tools' is not supported" in str(ei.value)
    with pytest.raises(openai.NotFoundError) as ei:
        c.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert ei.value.body["code"] == "model_not_found"
    # no 'model' while several are served: the request's fault, a 400 (was a 404)
    st, _, body = srv.raw("POST", "/v1/embeddings", b'{"input": "hi"}')
    assert st == 400 and json.loads(body)["error"]["code"] == "missing_required_parameter", (st, body)
    with pytest.raises(openai.BadRequestError):  # llama2.c: no chat template
        c.chat.completions.create(model="stories260K", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError):  # an encoder cannot generate
        c.completions.create(model="all-MiniLM-L6-v2", prompt="hi")
    st, _, body = srv.raw("POST", "/v1/completions", b'{"model": "stories260K", "prompt": "\xff\xfe"}')
    assert st == 400 and "UTF-8" in json.loads(body)["error"]["message"]
    # deeper than cJSON's 1000 levels: says so (was only "not valid JSON"); 1000 levels parse (and fail as a
    # body that is not an object); a syntax error before the deep part is still a syntax error
    st, _, body = srv.raw("POST", "/v1/completions", b"[" * 5000 + b"]" * 5000)
    e = json.loads(body)["error"]
    assert st == 400 and "deeper than 1000 levels (at byte 1000)" in e["message"], e
    st, _, body = srv.raw("POST", "/v1/completions", b"[" * 1000 + b"]" * 1000)
    assert st == 400 and "deeper" not in json.loads(body)["error"]["message"], body
    st, _, body = srv.raw("POST", "/v1/completions", b'{"a": x, "b": ' + b"[" * 2000 + b"]" * 2000 + b"}")
    e = json.loads(body)["error"]
    assert st == 400 and "not valid JSON" in e["message"] and "deeper" not in e["message"], e
    # a number beyond a double's range (cJSON: +-inf) is a value out of range, not a type error (was
    # "must be a number"; new-user finding)
    for param, num in (("temperature", b"1e309"), ("top_p", b"-1e400"), ("max_tokens", b"1e999")):
        st, _, body = srv.raw("POST", "/v1/completions", b'{"model": "stories260K", "prompt": "a", "' + param.encode() + b'": ' + num + b"}")
        e = json.loads(body)["error"]
        assert st == 400 and e["param"] == param and e["code"] == "invalid_value" and "beyond a double's range" in e["message"], e
        assert ("(0, 1]" if param == "top_p" else "[") in e["message"], e
    # integer bounds printed as integers; the float32 note only where the float32 rounding refused it;
    # seeds beyond 2^53 - 1 (a double rounds them: 2^62 - 1 arrives as 2^62) are refused, 2^53 - 1 is kept
    st, _, body = srv.raw("POST", "/v1/completions", b'{"model": "stories260K", "prompt": "a", "max_tokens": 1e999}')
    assert st == 400 and "must be in [1, 16777216], got a number beyond" in json.loads(body)["error"]["message"], body
    st, _, body = srv.raw("POST", "/v1/completions", b'{"model": "stories260K", "prompt": "a", "top_p": 1.5}')
    assert st == 400 and json.loads(body)["error"]["message"] == "'top_p' must be in (0, 1], got 1.5", body
    # numbers in messages: the shortest text that reads back (-0.1, not -0.10000000000000001); integers as integers
    st, _, body = srv.raw("POST", "/v1/completions", b'{"model": "stories260K", "prompt": "a", "top_p": -0.1}')
    assert st == 400 and json.loads(body)["error"]["message"] == "'top_p' must be in (0, 1], got -0.1", body
    st, _, body = srv.raw("POST", "/v1/completions", b'{"model": "stories260K", "prompt": "a", "seed": 4611686018427387903}')
    assert st == 400 and json.loads(body)["error"]["message"].endswith("got 4611686018427387904"), body
    # max_tokens and max_completion_tokens name one limit: two different values are refused, equal ones kept
    st, _, body = srv.raw("POST", "/v1/completions", b'{"model": "stories260K", "prompt": "a", "max_tokens": 2, "max_completion_tokens": 3}')
    assert st == 400 and "name the same limit" in json.loads(body)["error"]["message"], body
    st, _, body = srv.raw("POST", "/v1/completions", b'{"model": "stories260K", "prompt": "a", "max_tokens": 2, "max_completion_tokens": 2}')
    assert st == 200 and json.loads(body)["usage"]["completion_tokens"] == 2, body
    for seed in (2 ** 53, 2 ** 62 - 1, -(2 ** 53)):
        st, _, body = srv.raw("POST", "/v1/completions", {"model": "stories260K", "prompt": "a", "seed": seed})
        e = json.loads(body)["error"]
        assert st == 400 and e["param"] == "seed" and "[-9007199254740991, 9007199254740991]" in e["message"], (seed, e)
    for seed in (2 ** 53 - 1, -(2 ** 53 - 1)):
        r = c.completions.create(model="stories260K", prompt="a", seed=seed, temperature=1, max_tokens=2)
        assert r.usage.completion_tokens == 2
    # a name given twice in one object (top level or nested): refused, naming it (the first value won, silently)
    for body, name in ((b'{"model": "stories260K", "prompt": "a", "max_tokens": 1, "max_tokens": 5}', "max_tokens"),
                       (b'{"model": "stories260K", "prompt": "a", "stream": true, "stream_options": {"include_usage": true, "include_usage": false}}',
                        "include_usage")):
        st, _, raw = srv.raw("POST", "/v1/completions", body)
        e = json.loads(raw)["error"]
        assert st == 400 and e["param"] == name and f"names '{name}' twice" in e["message"], e
    # oversized body: 413 before it is read
    st, _, body = srv.raw("POST", "/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": "x" * 100000})
    assert st == 413 and json.loads(body)["error"]["code"] == "request_too_large"
    # the same without Content-Length (chunked): read, dropped, then the 413 (was: connection closed, no reply)
    c2 = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    payload = json.dumps({"model": "all-MiniLM-L6-v2", "input": "x" * 100000}).encode()
    c2.request("POST", "/v1/embeddings", body=iter([payload[i:i + 8192] for i in range(0, len(payload), 8192)]),
               headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"}, encode_chunked=True)
    resp = c2.getresponse()
    assert resp.status == 413 and json.loads(resp.read())["error"]["code"] == "request_too_large"
    c2.close()
    # prompt longer than the context (stories260K: 512) -> 400; max_tokens past it -> finish length
    with pytest.raises(openai.BadRequestError) as ei:
        c.completions.create(model="stories260K", prompt="Once upon a time " * 200, max_tokens=4)
    assert ei.value.body["code"] == "context_length_exceeded"
    r = c.completions.create(model="stories260K", prompt="Once upon a time " * 100, max_tokens=400, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.prompt_tokens + r.usage.completion_tokens == 513  # C - P + 1
    st, _, _ = srv.raw("GET", "/v1/nothing")
    assert st == 404
    st, _, _ = srv.raw("DELETE", "/v1/models")
    assert st == 405
    assert srv.raw("GET", "/health")[0] == 200  # still serving


def test_tokenize_detokenize(srv):
    st, _, body = srv.raw("POST", "/tokenize", {"model": SMOL_NAME, "content": "Hello world"})
    ids = json.loads(body)["tokens"]
    assert st == 200 and len(ids) == 2
    st, _, body = srv.raw("POST", "/detokenize", {"model": SMOL_NAME, "tokens": ids})
    assert json.loads(body)["content"] == "Hello world"
    st, _, body = srv.raw("POST", "/detokenize", {"model": SMOL_NAME, "tokens": [10 ** 8]})
    assert st == 400


def _start_stream(port, body):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    got = b""
    while b"data: {" not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    return s


def test_disconnect_mid_stream_frees_the_slot(srv):
    before = srv.metric("attn_cancelled_total")
    s = _start_stream(srv.port, {"model": SMOL_NAME, "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", "max_tokens": 2000, "stream": True})
    s.close()
    end = time.time() + 30
    while time.time() < end and (srv.metric("attn_busy_slots") > 0 or srv.metric("attn_cancelled_total") <= before):
        time.sleep(0.2)
    assert srv.metric("attn_busy_slots") == 0 and srv.metric("attn_cancelled_total") > before


def _dechunk(raw):
    """an HTTP/1.1 chunked body -> (the bytes, whether it ended with the last (empty) chunk)"""
    out, pos = b"", 0
    while True:
        eol = raw.find(b"\r\n", pos)
        if eol < 0:
            return out, False
        size = int(raw[pos:eol].split(b";")[0], 16)
        if size == 0:
            return out, raw[eol + 2:eol + 4] == b"\r\n"
        if len(raw) < eol + 2 + size + 2:
            return out + raw[eol + 2:], False
        out += raw[eol + 2:eol + 2 + size]
        pos = eol + 2 + size + 2


def test_key_queue_and_sigterm():
    s = Server("--model", SMOL, "--api-key", "sekret", "--parallel", "1", "--queue", "0", "--grace", "2")
    try:
        assert s.raw("GET", "/health")[0] == 200  # open without the key
        assert s.raw("GET", "/")[0] == 200  # the chat page too (static; the key is typed into it)
        with pytest.raises(openai.AuthenticationError):
            s.client("wrong").models.list()
        st, _, body = s.raw("GET", "/v1/models")
        assert st == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
        assert [m.id for m in s.client("sekret").models.list()] == [SMOL_NAME]
        # the scheme is case-insensitive (RFC 9110): "bearer" is accepted with the right key, not with a wrong one
        assert s.raw("GET", "/v1/models", headers={"Authorization": "bearer sekret"})[0] == 200
        assert s.raw("GET", "/v1/models", headers={"Authorization": "BEARER wrong"})[0] == 401
        # one slot, no queue: a second request while the first runs is refused at once with Retry-After
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=60)
        data = json.dumps({"model": SMOL_NAME, "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", "max_tokens": 3000, "stream": True}).encode()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(data) + data)
        got = b""
        while b"data: {" not in got:
            got += sock.recv(4096)
        assert s.metric("attn_busy_slots", "sekret") == 1
        t0 = time.time()
        st, h, body = s.raw("POST", "/v1/completions", {"model": SMOL_NAME, "prompt": "hi", "max_tokens": 2}, {"Authorization": "Bearer sekret"})
        assert st == 503 and h.get("Retry-After") == "1" and json.loads(body)["error"]["code"] == "queue_full"
        assert time.time() - t0 < 5
        # SIGTERM with a request in flight: it is cut after --grace 2 s and the server exits 0
        t0 = time.time()
        rc = s.stop(grace=30)
        t_stop = time.time() - t0
        assert rc == 0 and t_stop < 20
        sock.settimeout(10)
        rest = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            rest += chunk
        sock.close()
        # the stream cut by the grace ends with an error event, never with a finish_reason that
        # looks like an ending ("length" / "stop": it said "length" before; new-user finding)
        # (unless the generation ended by itself within the grace: then the server left sooner than
        # the 2 s and the stream carries its real finish_reason)
        stream = got + rest
        cut = b"shut down before this generation finished" in stream
        ended = re.search(rb'"finish_reason"\s*:\s*"', stream) is not None
        assert not (cut and ended) and (not ended or t_stop < 1.9), (t_stop, stream[-600:])
        # the stream always ends in one of the two ways, its last events sent before the server closes
        # the connection: the error event, then "data: [DONE]", then the chunked body's end (the server
        # used to close as it sent them, about 1 run in 10: no error, no ending, no [DONE])
        assert cut or ended, (t_stop, stream[-600:])
        body, complete = _dechunk(stream.split(b"\r\n\r\n", 1)[1])
        assert complete, ("the chunked body was cut", t_stop, stream[-600:])
        events = [e for e in body.split(b"\n\n") if e]
        assert events[-1] == b"data: [DONE]", events[-3:]
        if cut:
            err = json.loads(events[-2][len(b"data: "):])
            assert err["error"]["type"] == "server_error" and "--grace ran out" in err["error"]["message"], events[-3:]
    finally:
        if s.p.poll() is None:
            s.p.kill()


def test_chat_concurrent(srv):
    # 4 concurrent chats are all answered in full (that they equal the replies alone:
    # test_batched_equals_alone_q4_1)
    msgs = ["Name a fruit.", "What is 2 plus 2?", "Say hello in French.", "Name a planet."]
    got = [None] * 4

    def one(i):
        r = srv.client().chat.completions.create(model=SMOL_NAME, messages=[{"role": "user", "content": msgs[i]}], temperature=0,
                                                 max_tokens=10)
        got[i] = (r.choices[0].message.content, r.usage.completion_tokens, r.choices[0].finish_reason)

    ths = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    [t.start() for t in ths]
    [t.join(300) for t in ths]
    for text, n, fin in got:
        assert text and (n == 10 and fin == "length" or n < 10 and fin == "stop")


def test_pipelined_and_idle_connections(srv):
    # 64 silent connections do not stop the server from answering others (thread per connection,
    # at most 4096 or the descriptor limit; silent ones are closed after --idle-timeout)
    idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(64)]
    try:
        assert srv.raw("GET", "/health")[0] == 200
        # two pipelined requests on one connection: both answered, in order
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        one = json.dumps({"model": "stories260K", "content": "Once"}).encode()
        two = json.dumps({"model": "stories260K", "tokens": [1, 403]}).encode()
        s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(one) + one +
                  b"POST /detokenize HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(two) + two)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        s.close()
        assert got.count(b"HTTP/1.1 200") == 2 and b'"tokens":[' in got and b'"content":' in got
        assert got.index(b'"tokens":[') < got.index(b'"content":')
        # headers that announce a body that never comes: the connection is not answered with a
        # model call, and the server goes on
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\"")
        s.close()
        assert srv.raw("GET", "/health")[0] == 200
    finally:
        for c in idle:
            c.close()


def test_model_errors_before_listening(tmp_path):
    # a missing path fails before anything is bound; a file that cannot load fails after binding
    # (so /health can answer 503 while loading) but before "listening" is printed: a launcher that
    # waits for that line never sees a server that is about to die
    r = subprocess.run([EXE, "serve", "--port", "0", "--model", "/missing/model.gguf"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "/missing/model.gguf" in r.stderr and "listening" not in r.stderr
    bad = tmp_path / "junk.gguf"
    bad.write_bytes(b"not a model at all" * 10)
    r = subprocess.run([EXE, "serve", "--port", "0", "--model", STORIES, "--model", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "junk.gguf" in r.stderr and "listening" not in r.stderr and "ready" not in r.stderr
    # NAME=PATH with an empty NAME is a usage error, not the path "=PATH"
    r = subprocess.run([EXE, "serve", "--port", "0", "--model", "=" + STORIES], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "the name before '=' is empty" in r.stderr and "listening" not in r.stderr, r.stderr


def test_host_names_and_bad_hosts():
    # --host takes a name this machine resolves (localhost -> 127.0.0.1, as clients try it); an
    # address that is none (999.1.1.1) or an unknown name is a usage error (exit 2) before loading
    r = subprocess.run([EXE, "serve", "--port", "0", "--host", "999.1.1.1", "--model", STORIES], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--host 999.1.1.1" in r.stderr and "not an IP address" in r.stderr and "listening" not in r.stderr, r.stderr
    p = subprocess.Popen([EXE, "serve", "--port", "0", "--host", "localhost", "--model", STORIES], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        port = None
        for line in p.stderr:
            m = re.search(r"listening on http://localhost:(\d+)/", line)
            if m:
                port = int(m.group(1))
            if "ready" in line:
                break
        assert port, "no 'listening' line"
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/health")
        assert c.getresponse().status == 200
        c.close()
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0


def test_empty_messages_agree_with_python(srv):
    # the server and attn.LLM.chat refuse an empty conversation alike (was: 400 here, a reply to
    # the default system turn there)
    with pytest.raises(openai.BadRequestError) as ei:
        srv.client().chat.completions.create(model=SMOL_NAME, messages=[])
    assert ei.value.body["param"] == "messages" and "empty" in ei.value.body["message"]
    import attn
    with pytest.raises(ValueError, match="messages is empty"):
        attn.LLM(SMOL).chat([])


def test_1000_idle_connections(srv):
    # 1000 silent keep-alive connections are all accepted and kept open (a thread each, poll()
    # past FD_SETSIZE; was: at most 256, later ones closed at once), and a request is still answered
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    idle = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
        r = srv.client().completions.create(model="stories260K", prompt="Once upon a time", temperature=0, max_tokens=8)
        assert r.usage.completion_tokens == 8
        time.sleep(0.5)  # a refused connection is closed by the server at once
        closed = 0
        for s in idle:
            s.setblocking(False)
            try:
                closed += s.recv(1) == b""
            except BlockingIOError:
                pass  # open and silent: as it should be
            except OSError:
                closed += 1
        assert closed == 0, f"{closed} of 1000 idle connections were closed by the server"
    finally:
        for s in idle:
            s.close()
    assert srv.raw("GET", "/health")[0] == 200


WHISPER = os.path.join(ROOT, "models", "whisper-tiny.en")
AREN = os.path.normpath(os.path.join(ROOT, "..", "shared", "models", "aren-transliteration"))
ALSA_WAV = "/usr/share/sounds/alsa/Front_Center.wav"
ESPEAK_WAV = os.path.join(ROOT, "tests", "fixtures", "whisper", "espeak_3.wav")


@pytest.fixture(scope="module")
def ct2():
    for p in (WHISPER, AREN, ALSA_WAV, ESPEAK_WAV):
        if not os.path.exists(p):
            pytest.skip(f"{p} is missing (scripts/setup.sh fetches the models; alsa-utils has the WAV)")
    s = Server("--model", WHISPER, "--model", AREN, "--model", STORIES)
    yield s
    assert s.stop() == 0, "".join(s.log)


def _cli_transcripts(*wavs, extra=()):
    out = cli("transcribe", "--model", WHISPER, "--threads", "2", *extra, *wavs)
    return out


def test_transcription_equals_cli(ct2):
    # the text of `attn transcribe` (the same decoding of the same bytes: beam 5, the fallback
    # rules), through the official client's multipart upload
    ref = _cli_transcripts(ALSA_WAV, ESPEAK_WAV).splitlines()
    c = ct2.client()
    for wav, line in zip((ALSA_WAV, ESPEAK_WAV), ref):
        want = line[len(wav) + 2:]
        with open(wav, "rb") as f:
            r = c.audio.transcriptions.create(model="whisper-tiny.en", file=f)
        assert r.text == want and want  # "front, center." / "Please call Stella ..."
        with open(wav, "rb") as f:
            t = c.audio.transcriptions.create(model="whisper-tiny.en", file=f, response_format="text", language="en")
        assert t == want + "\n"
    # timestamped formats: the segments of `attn transcribe --timestamps`
    segs = []
    for line in _cli_transcripts(ESPEAK_WAV, extra=("--timestamps",)).splitlines():
        m = re.match(r".* \[(\d+\.\d+) --> (\d+\.\d+)\] (.*)$", line)
        segs.append((float(m.group(1)), float(m.group(2)), m.group(3)))
    with open(ESPEAK_WAV, "rb") as f:
        v = c.audio.transcriptions.create(model="whisper-tiny.en", file=f, response_format="verbose_json")
    assert [(round(s.start, 2), round(s.end, 2), s.text.strip()) for s in v.segments] == segs
    assert abs(v.duration - 4.0029375) < 1e-9 and v.language == "english" and v.text == segs[0][2]

    def hms(x, sep):
        ms = int(round(x * 1000))
        return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"
    with open(ESPEAK_WAV, "rb") as f:
        srt = c.audio.transcriptions.create(model="whisper-tiny.en", file=f, response_format="srt")
    assert srt == "".join(f"{i + 1}\n{hms(a, ',')} --> {hms(b, ',')}\n{t}\n\n" for i, (a, b, t) in enumerate(segs))
    with open(ESPEAK_WAV, "rb") as f:
        vtt = c.audio.transcriptions.create(model="whisper-tiny.en", file=f, response_format="vtt")
    assert vtt == "WEBVTT\n\n" + "".join(f"{hms(a, '.')} --> {hms(b, '.')}\n{t}\n\n" for a, b, t in segs)
    # temperature T > 0: the fallback starts at T (openai-whisper's schedule), seeded as the CLI
    ref = _cli_transcripts(ESPEAK_WAV, extra=("--temperatures", "0.4,0.6,0.8,1")).splitlines()[0][len(ESPEAK_WAV) + 2:]
    with open(ESPEAK_WAV, "rb") as f:
        assert c.audio.transcriptions.create(model="whisper-tiny.en", file=f, temperature=0.4).text == ref


def test_transcription_concurrent_and_bad_input(ct2, tmp_path):
    want = _cli_transcripts(ESPEAK_WAV).splitlines()[0][len(ESPEAK_WAV) + 2:]
    got = [None] * 4

    def one(i):
        with open(ESPEAK_WAV, "rb") as f:
            got[i] = ct2.client().audio.transcriptions.create(model="whisper-tiny.en", file=f).text

    ths = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    [t.start() for t in ths]
    [t.join(300) for t in ths]
    assert got == [want] * 4  # one at a time behind the model's gate, each answered in full
    c = ct2.client()
    bad = tmp_path / "not_audio.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunk" * 4)
    with pytest.raises(openai.BadRequestError) as ei, open(bad, "rb") as f:
        c.audio.transcriptions.create(model="whisper-tiny.en", file=f)
    assert ei.value.body["code"] == "invalid_audio" and "not_audio.wav" in ei.value.body["message"]
    with pytest.raises(openai.BadRequestError) as ei, open(ESPEAK_WAV, "rb") as f:
        c.audio.transcriptions.create(model="whisper-tiny.en", file=f, language="fr")
    assert ei.value.body["param"] == "language"
    with pytest.raises(openai.BadRequestError) as ei, open(ESPEAK_WAV, "rb") as f:
        c.audio.transcriptions.create(model="whisper-tiny.en", file=f, prompt="Stella")
    assert ei.value.body["param"] == "prompt" and "not supported" in ei.value.body["message"]
    with pytest.raises(openai.BadRequestError) as ei, open(ESPEAK_WAV, "rb") as f:
        c.audio.transcriptions.create(model="stories260K", file=f)
    assert ei.value.body["code"] == "wrong_model_type"
    with pytest.raises(openai.BadRequestError) as ei, open(ESPEAK_WAV, "rb") as f:
        c.audio.transcriptions.create(model="whisper-tiny.en", file=f, temperature=3)
    assert ei.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as ei, open(ESPEAK_WAV, "rb") as f:  # beyond a double's range
        c.audio.transcriptions.create(model="whisper-tiny.en", file=f, extra_body={"temperature": "1e309"})
    assert ei.value.body["code"] == "invalid_value" and "got 1e309" in ei.value.body["message"], ei.value.body
    # no file part; a JSON body; a truncated multipart body; an empty file
    b = b"--b0\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-tiny.en\r\n--b0--\r\n"
    st, _, body = ct2.raw("POST", "/v1/audio/transcriptions", b, {"Content-Type": "multipart/form-data; boundary=b0"})
    assert st == 400 and json.loads(body)["error"]["param"] == "file"
    st, _, body = ct2.raw("POST", "/v1/audio/transcriptions", {"model": "whisper-tiny.en"})
    assert st == 400 and "multipart/form-data" in json.loads(body)["error"]["message"]
    st, _, body = ct2.raw("POST", "/v1/audio/transcriptions", b[:-8], {"Content-Type": "multipart/form-data; boundary=b0"})
    assert st == 400 and "truncated" in json.loads(body)["error"]["message"]
    e = b"--b0\r\nContent-Disposition: form-data; name=\"file\"; filename=\"e.wav\"\r\n\r\n\r\n--b0--\r\n"
    st, _, body = ct2.raw("POST", "/v1/audio/transcriptions", e, {"Content-Type": "multipart/form-data; boundary=b0"})
    assert st == 400 and "empty" in json.loads(body)["error"]["message"]
    assert ct2.metric("attn_audio_seconds_total") > 4 * 4


def test_translation_equals_cli(ct2):
    src = ["م ر ح ب ا", "ك ت ا ب", "ش ك ر ا"]
    out = cli("translate", "--model", AREN, "--beam", "4", "--n-best", "2", "--scores", *src).splitlines()
    ref = [(float(l.split("\t")[0]), l.split("\t")[1]) for l in out]
    st, _, body = ct2.raw("POST", "/v1/translations/text", {"model": "aren-transliteration", "input": src, "beam_size": 4, "n_best": 2})
    d = json.loads(body)
    assert st == 200 and [x["index"] for x in d["data"]] == [0, 1, 2]
    got = [(round(h["score"], 6), h["text"]) for x in d["data"] for h in x["translations"]]
    assert got == [(round(a, 6), t) for a, t in ref]  # the CLI prints scores with 6 decimals
    assert all(h["tokens"] == h["text"].split(" ") for x in d["data"] for h in x["translations"])
    assert d["data"][0]["source_tokens"] == src[0].split(" ") and d["usage"]["prompt_tokens"] == 13
    # token arrays are the same sentences; greedy by default, as attn translate
    st, _, body = ct2.raw("POST", "/v1/translations/text", {"model": "aren-transliteration", "input": [s.split(" ") for s in src]})
    greedy = cli("translate", "--model", AREN, *src).splitlines()
    assert [x["translations"][0]["text"] for x in json.loads(body)["data"]] == greedy
    for bad, param in (({"input": src, "beam_size": 2, "n_best": 3}, "n_best"), ({"input": []}, "input"), ({"input": [["a b"]]}, "input"),
                       ({"input": src, "beam_size": 0}, "beam_size"), ({"input": src, "sampling_topk": 5}, "sampling_topk")):
        st, _, body = ct2.raw("POST", "/v1/translations/text", {"model": "aren-transliteration", **bad})
        assert st == 400 and json.loads(body)["error"]["param"] == param, body


CHROMIUM = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome") if os.path.exists(p)), None)


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
    JSON messages ending in NUL, commands on the child's fd 3, replies on its fd 4)."""

    def __init__(self, tmp):
        r3, w3 = os.pipe()
        r4, w4 = os.pipe()

        def fds():  # in the child: the pipes become fds 3 and 4 (os.dup2's copies are inheritable)
            a, b = os.dup(r3), os.dup(w4)  # out of the way of 3 and 4 first
            os.dup2(a, 3)
            os.dup2(b, 4)

        # close_fds=False keeps the dup2'ed 3 and 4; Python's own descriptors are not inheritable
        # its own session, so that close() can end every process it started (a renderer left
        # spinning after the browser exited was seen)
        self.p = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                                   f"--user-data-dir={tmp}", "about:blank"], preexec_fn=fds, start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False)
        os.close(r3)
        os.close(w4)
        self.w, self.r = os.fdopen(w3, "wb", buffering=0), os.fdopen(r4, "rb", buffering=0)
        self.buf, self.n = b"", 0

    def cmd(self, method, session=None, timeout=60, **params):
        self.n += 1
        msg = {"id": self.n, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.w.write(json.dumps(msg).encode() + b"\0")
        end = time.time() + timeout
        while time.time() < end:
            while b"\0" not in self.buf:
                left = end - time.time()
                if left <= 0 or not select.select([self.r], [], [], left)[0]:
                    raise TimeoutError(f"chromium did not answer {method} within {timeout} s")
                chunk = self.r.read(65536)
                assert chunk, "chromium closed its pipe"
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            m = json.loads(raw)
            if m.get("id") == self.n:
                assert "error" not in m, m
                return m["result"]
        raise TimeoutError(method)

    def close(self):
        try:
            self.w.write(json.dumps({"id": 0, "method": "Browser.close", "params": {}}).encode() + b"\0")
            self.p.wait(10)
        except Exception:
            pass
        try:  # whatever is left of its process group
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium; scripts/setup.sh installs it): the chat page was not checked in a browser")
@pytest.mark.skipif("build-san" in os.environ.get("ATTN_BIN", ""),
                    reason="under the sanitizer build Chromium was seen spinning without answering (CI); the page is checked in the plain run")
def test_chat_page_in_chromium(srv, tmp_path):
    # GET / is the chat page: HTML from the binary, open without the API key
    st, h, body = srv.raw("GET", "/")
    assert st == 200 and h["Content-Type"].startswith("text/html") and b"/v1/chat/completions" in body
    b = Browser(str(tmp_path / "profile"))
    try:
        tid = b.cmd("Target.createTarget", url=srv.base + "/")["targetId"]
        sid = b.cmd("Target.attachToTarget", targetId=tid, flatten=True)["sessionId"]

        def js(expr):
            return b.cmd("Runtime.evaluate", session=sid, expression=expr, returnByValue=True)["result"].get("value")

        def wait(expr, want, seconds=120):
            end = time.time() + seconds
            while time.time() < end:
                v = js(expr)
                if v in want:
                    return v
                time.sleep(0.2)
            raise AssertionError(f"{expr} stayed {v!r}")

        # the select lists the chat models only (stories260K has no template, MiniLM embeds)
        wait("document.body && document.body.dataset.models", ("1",), 60)
        assert js("[...document.querySelectorAll('#model option')].map(o => o.value)") == [SMOL_NAME]
        c = srv.client()
        turns = ["What is the capital of France?", "And of <b>Germany</b>?"]
        history = []
        for t in turns:
            js(f"$('temp').value = '0'; $('maxtok').value = '16'; $('input').value = {json.dumps(t)}; $('form').requestSubmit(); 1")
            assert wait("document.body.dataset.state", ("done", "error")) == "done", js("document.getElementById('log').innerText")
            history.append({"role": "user", "content": t})
            r = c.chat.completions.create(model=SMOL_NAME, messages=history, temperature=0, max_tokens=16)
            ref = r.choices[0].message.content
            got = js("[...document.querySelectorAll('.assistant')].pop().textContent")
            assert got == ref and ref  # the page sends the whole conversation and joins the streamed deltas
            # the page counted one delta a token: as many as the same request streamed to the openai client
            deltas = [ch.choices[0].delta.content for ch in c.chat.completions.create(
                model=SMOL_NAME, messages=history, temperature=0, max_tokens=16, stream=True) if ch.choices]
            assert int(js("document.body.dataset.chunks")) == len([d for d in deltas if d]) > 1, deltas
            assert js("document.body.dataset.finish") == r.choices[0].finish_reason
            history.append({"role": "assistant", "content": ref})
        # text is shown as text, never parsed as HTML
        assert js("document.querySelectorAll('#log b').length") == 0
        assert js("[...document.querySelectorAll('.user')].pop().textContent") == turns[1]
    finally:
        b.close()


def test_batched_equals_alone_q4_1(srv):
    # Q4_1 weights: every weight-kernel tile computes a row with the same float operations
    # (tests/test_quant_rows.c) and prompts are fed in attn_llama_forward's 256-token pieces, so a
    # request batched with others gets exactly the reply it gets alone: each equals the CLI's
    # (one sequence). Was: replies parted at near-ties (logits up to 0.67 apart).
    # (the completions part at near-ties on the old kernels: "Once upon a time ..." at its first token)
    msgs = ["Name a fruit.", "What is 2 plus 2?", "Say hello in French.", "Name a planet."]
    prompts = ["Once upon a time, in a land far away, there lived a", "The capital of France is", "My favourite animal is the",
               "The history of the city of Lyon began " + "long ago, and the story of the river goes on " * 30]
    refs = [cli("chat", "--model", SMOL, "--temp", "0", "-n", "24", "--threads", "2", m).rstrip("\n") for m in msgs]
    refs += [cli("generate", "--model", SMOL, "--temp", "0", "-n", "24", "--threads", "2", "-p", p).rstrip("\n") for p in prompts]
    got = [None] * len(refs)

    def one(i):
        c = srv.client()
        if i < len(msgs):
            got[i] = c.chat.completions.create(model=SMOL_NAME, messages=[{"role": "user", "content": msgs[i]}], temperature=0,
                                               max_tokens=24).choices[0].message.content
        else:
            p = prompts[i - len(msgs)]
            r = c.completions.create(model=SMOL_NAME, prompt=p, temperature=0, max_tokens=24)
            assert r.usage.prompt_tokens > 256 or len(p) < 100  # the long one: two pieces
            got[i] = p + r.choices[0].text

    ths = [threading.Thread(target=one, args=(i,)) for i in range(len(got))]
    [t.start() for t in ths]
    [t.join(300) for t in ths]
    for i, (g, r) in enumerate(zip(got, refs)):
        assert g == r, f"request {i} batched parts from the CLI's reply alone"
