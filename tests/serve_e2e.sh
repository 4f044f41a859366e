#!/usr/bin/env bash
# End to end checks of `vkmoe serve` against a real server process on
# 127.0.0.1 (CPU backend, a small synthetic model): every endpoint, streaming
# and not, OpenAI-shaped errors, a client that disconnects mid-stream, prefix
# reuse in usage.cached_tokens, 8 concurrent streaming clients matching their
# sequential replies, a clean exit 0 on SIGTERM during a generation, and a
# lost device failing its request and stopping the server with exit 1.
set -u
VKMOE=$1
T=$(mktemp -d)
PID=""
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; [ -n "${KEEP_LOG:-}" ] && cp "$T/serve.log" "$KEEP_LOG"; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; [ -f "$T/serve.log" ] && tail -30 "$T/serve.log"; exit 1; }

"$VKMOE" synth --set n_layer=2,n_vocab=768 -o "$T/tiny.gguf" 2>/dev/null || fail synth
# Option errors come before the model loads.
"$VKMOE" serve --port 99999 >/dev/null 2>"$T/err"; [ $? -eq 1 ] && grep -q "port must be at most" "$T/err" || fail "--port range"

# start_server LOG serve-options...: sets PID and URL (--port 0: any free port; the log says which).
start_server() {
  local log=$1; shift
  # Emptied here, not by the background redirection: a reused log must not show the last server's line.
  : >"$log"
  "$VKMOE" serve -m "$T/tiny.gguf" --port 0 "$@" >"$log" 2>&1 &
  PID=$!
  for _ in $(seq 1 300); do
    grep -q "^listening on http://" "$log" && break
    kill -0 "$PID" 2>/dev/null || fail "serve exited before listening"
    sleep 0.1
  done
  URL=$(grep -o "^listening on http://[0-9.]*:[0-9]*" "$log" | sed 's/^listening on //')
  [ -n "$URL" ] || fail "no 'listening on' line"
}
# wait_exit SECONDS: the server's exit status in rc, or a failure if it keeps running.
wait_exit() {
  for _ in $(seq 1 $(($1 * 10))); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$PID" 2>/dev/null && fail "serve still running $1 s later"
  wait "$PID"; rc=$?
  PID=""
}

start_server "$T/serve.log" --backend cpu -c 1024 --max-body 64KiB
grep -q "cpu (Highway SIMD kernels) | ctx 1024" "$T/serve.log" || fail "no startup summary"
# A port in use is an error (not shared through SO_REUSEPORT).
timeout 30 "$VKMOE" serve -m "$T/tiny.gguf" --backend cpu -c 64 --port "${URL##*:}" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "^vkmoe: error: cannot listen on 127.0.0.1:${URL##*:}" "$T/err" || { cat "$T/err"; fail "port in use"; }

python3 - "$URL" "$T/serve.log" "$PID" <<'PY' || fail "python checks"
import http.client, json, os, signal, socket, sys, threading, time, urllib.parse

url, log_path, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
u = urllib.parse.urlparse(url)
HOST, PORT = u.hostname, u.port

def call(method, path, body=None, raw=None):
    conn = http.client.HTTPConnection(HOST, PORT, timeout=120)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    payload = r.read()
    conn.close()
    assert r.getheader("Content-Type") == "application/json", (path, r.getheader("Content-Type"))
    return r.status, json.loads(payload)

def ok(method, path, body=None):
    status, j = call(method, path, body)
    assert status == 200, (path, status, j)
    return j

def error(expected_status, method, path, body=None, raw=None, param=None, code=None):
    status, j = call(method, path, body, raw)
    assert status == expected_status, (path, body if raw is None else raw[:80], status, j)
    e = j["error"]
    assert isinstance(e["message"], str) and e["message"] and e["type"] in ("invalid_request_error", "server_error"), j
    assert "code" in e and "param" in e, j
    if param is not None: assert e["param"] == param, (param, j)
    if code is not None: assert e["code"] == code, (code, j)
    return e

def stream(path, body):
    """The events of a streaming request; checks the SSE framing and [DONE]."""
    conn = http.client.HTTPConnection(HOST, PORT, timeout=120)
    conn.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream", (r.status, r.getheaders())
    text = r.read().decode()
    conn.close()
    assert text.endswith("data: [DONE]\n\n"), text[-200:]
    parts = text.split("\n\n")
    assert parts[-1] == "" and parts[-2] == "data: [DONE]", parts[-3:]
    assert all(p.startswith("data: ") for p in parts[:-2]), text[:300]
    return [json.loads(p[len("data: "):]) for p in parts[:-2]]

def chat_stream_text(events):
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}, events[0]
    out, finish = "", None
    for e in events:
        assert e["object"] == "chat.completion.chunk" and e["id"] == events[0]["id"] and e["model"] == "tiny.gguf", e
        if not e["choices"]:
            continue
        c = e["choices"][0]
        assert finish is None, "a chunk after the one with finish_reason"
        out += c["delta"].get("content", "")
        finish = c["finish_reason"]
    assert finish in ("stop", "length"), events[-1]
    return out, finish

def text_stream_text(events):
    out, finish = "", None
    for e in events:
        assert e["object"] == "text_completion" and e["id"] == events[0]["id"], e
        if not e["choices"]:
            continue
        assert finish is None
        out += e["choices"][0]["text"]
        finish = e["choices"][0]["finish_reason"]
    assert finish in ("stop", "length"), events[-1]
    return out, finish

def check_usage(u):
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u
    assert 0 <= u["prompt_tokens_details"]["cached_tokens"] < u["prompt_tokens"], u

# --- info endpoints ---
assert ok("GET", "/health")["status"] == "ok"
models = ok("GET", "/v1/models")
assert models["object"] == "list" and models["data"][0]["id"] == "tiny.gguf" and models["data"][0]["object"] == "model", models
toks = ok("POST", "/tokenize", {"content": "Hello world, once upon a time"})["tokens"]
assert toks and all(isinstance(t, int) for t in toks), toks
assert ok("POST", "/detokenize", {"tokens": toks})["content"] == "Hello world, once upon a time"
assert ok("POST", "/tokenize", {"content": "<|im_start|>user"})["tokens"][0] == ok("POST", "/tokenize", {"content": "<|im_start|>"})["tokens"][0]
msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
prompt = ok("POST", "/apply-template", {"messages": msgs})["prompt"]
assert prompt == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", prompt
tool_turns = [{"role": "user", "content": "hi"},
              {"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
              {"role": "tool", "content": "42", "tool_call_id": "1"}]
tc = ok("POST", "/apply-template", {"messages": tool_turns, "add_generation_prompt": False})["prompt"]
assert tc.endswith("<|im_start|>assistant\n<|im_end|>\n<|im_start|>tool\n42<|im_end|>\n"), tc

# --- chat: non-streaming and streaming give the same greedy reply ---
req = {"model": "anything", "messages": msgs, "temperature": 0, "max_tokens": 12}
c = ok("POST", "/v1/chat/completions", req)
assert c["object"] == "chat.completion" and c["id"].startswith("chatcmpl-") and c["model"] == "tiny.gguf", c
ch = c["choices"][0]
assert ch["index"] == 0 and ch["message"]["role"] == "assistant" and ch["finish_reason"] in ("stop", "length"), c
check_usage(c["usage"])
assert c["usage"]["completion_tokens"] <= 12 and (ch["finish_reason"] == "stop" or c["usage"]["completion_tokens"] == 12), c
assert c["usage"]["prompt_tokens"] == len(ok("POST", "/tokenize", {"content": prompt})["tokens"]), c
events = stream("/v1/chat/completions", dict(req, stream_options={"include_usage": True}))
text, finish = chat_stream_text(events)
assert (text, finish) == (ch["message"]["content"], ch["finish_reason"]), (text, c)
assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == c["usage"]["completion_tokens"], events[-1]
assert "usage" not in stream("/v1/chat/completions", req)[-1], "usage without include_usage"
# The same request again: the whole prompt but its last token comes from the cache.
again = ok("POST", "/v1/chat/completions", req)
assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == again["usage"]["prompt_tokens"] - 1, again["usage"]
assert again["choices"][0]["message"]["content"] == ch["message"]["content"]
# A continuing conversation reuses the first turn's KV cache.
turn2 = dict(req, messages=msgs + [{"role": "assistant", "content": ch["message"]["content"]},
                                   {"role": "user", "content": "And then?"}])
c2 = ok("POST", "/v1/chat/completions", turn2)
assert c2["usage"]["prompt_tokens_details"]["cached_tokens"] >= c["usage"]["prompt_tokens"] - 1, (c["usage"], c2["usage"])
# Content as text parts, the developer role, unknown fields ignored.
c3 = ok("POST", "/v1/chat/completions", dict(req, unknown_field={"x": 1}, messages=[
    {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
    {"role": "user", "content": "Hi there"}]))
assert c3["choices"][0]["message"]["content"] == ch["message"]["content"], c3

# --- completions ---
creq = {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 10}
t = ok("POST", "/v1/completions", creq)
assert t["object"] == "text_completion" and t["id"].startswith("cmpl-"), t
check_usage(t["usage"])
ttext, tfinish = t["choices"][0]["text"], t["choices"][0]["finish_reason"]
assert text_stream_text(stream("/v1/completions", creq)) == (ttext, tfinish)
assert ok("POST", "/v1/completions", dict(creq, prompt=[ok("POST", "/tokenize", {"content": "Once upon a time"})["tokens"]]))["choices"][0]["text"] == ttext
assert ok("POST", "/completions", creq)["choices"][0]["text"] == ttext  # alias without /v1
# Default max_tokens of completions is OpenAI's 16.
assert ok("POST", "/v1/completions", {"prompt": "Once", "temperature": 0})["usage"]["completion_tokens"] <= 16
# A stop string cuts the reply before it and finishes with "stop".
assert len(ttext) >= 6 and tfinish == "length", t
stop = ttext[3:5]
cut = ttext[:ttext.index(stop)]
for body in (dict(creq, stop=stop), dict(creq, stop=["zzzz-never", stop])):
    s = ok("POST", "/v1/completions", body)["choices"][0]
    assert (s["text"], s["finish_reason"]) == (cut, "stop"), (s, cut)
    assert text_stream_text(stream("/v1/completions", body)) == (cut, "stop")
# max_tokens beyond the context is capped by it.
ids = ok("POST", "/tokenize", {"content": "once upon a time " * 300})["tokens"]
assert len(ids) > 1024
big = ok("POST", "/v1/completions", {"prompt": ids[:1020], "temperature": 0, "max_tokens": 100000})
assert big["usage"]["total_tokens"] <= 1024, big["usage"]
assert big["choices"][0]["finish_reason"] == "stop" or big["usage"]["total_tokens"] == 1024, big
# Sampling with a seed is reproducible.
sreq = dict(creq, temperature=0.9, top_k=40, top_p=0.95, min_p=0.01, repeat_penalty=1.1, seed=1234)
assert ok("POST", "/v1/completions", sreq)["choices"][0]["text"] == ok("POST", "/v1/completions", sreq)["choices"][0]["text"]

# --- errors ---
error(400, "POST", "/v1/chat/completions", raw=b'{"messages": [', code="invalid_json")
error(400, "POST", "/v1/chat/completions", raw=b'[1, 2]', code="invalid_json")
error(400, "POST", "/v1/completions", raw=b'\xff\xfe', code="invalid_json")
error(400, "POST", "/v1/chat/completions", dict(req, temperature="hot"), param="temperature", code="invalid_type")
error(400, "POST", "/v1/chat/completions", dict(req, max_tokens=1.5), param="max_tokens")
error(400, "POST", "/v1/chat/completions", dict(req, stop=[1]), param="stop")
error(400, "POST", "/v1/chat/completions", dict(req, stream="yes"), param="stream")
error(400, "POST", "/v1/chat/completions", dict(req, messages=[{"role": "user"}]), param="messages[0].content")
error(400, "POST", "/v1/chat/completions", {"temperature": 0}, param="messages", code="missing_field")
error(400, "POST", "/v1/chat/completions", dict(req, n=2), param="n", code="unsupported_parameter")
error(400, "POST", "/v1/chat/completions", dict(req, presence_penalty=0.5), param="presence_penalty")
error(400, "POST", "/v1/completions", dict(creq, prompt=[5, 100000]), param="prompt")
error(400, "POST", "/v1/completions", dict(creq, prompt=""), param="prompt")
too_long = "once upon a time " * 300
e = error(400, "POST", "/v1/completions", dict(creq, prompt=too_long), param="prompt", code="context_length_exceeded")
assert "1024" in e["message"], e
error(400, "POST", "/v1/chat/completions", dict(req, messages=[{"role": "user", "content": too_long}], stream=True),
      code="context_length_exceeded")
error(413, "POST", "/v1/chat/completions", raw=b'{"messages": "' + b"x" * (100 * 1024) + b'"}', code="payload_too_large")
error(404, "GET", "/v2/nothing", code="not_found")
error(404, "POST", "/v1/embeddings", {"input": "x"}, code="not_found")
error(405, "GET", "/v1/chat/completions", code="method_not_allowed")
error(405, "POST", "/health", {}, code="method_not_allowed")
error(400, "POST", "/tokenize", {"content": 5}, param="content")
error(400, "POST", "/detokenize", {"tokens": [1, -1]}, param="tokens")
error(400, "POST", "/detokenize", {"tokens": "1"}, param="tokens")
error(400, "POST", "/apply-template", {"messages": []}, param="messages")
assert ok("GET", "/health")["status"] == "ok"

# --- a client that disconnects mid-stream: the generation stops, the server keeps serving ---
# A prompt whose greedy reply runs to max_tokens (no end-of-generation token).
LONG = 600
long_req = None
for p in ["The", "a", "Tell me a story", "The quick brown fox", "Hello world", "x", "1 2 3"]:
    r = ok("POST", "/v1/completions", {"prompt": p, "temperature": 0, "max_tokens": LONG})
    if r["choices"][0]["finish_reason"] == "length":
        long_req = {"prompt": p, "temperature": 0, "max_tokens": LONG, "stream": True}
        break
assert long_req, "no prompt of the synthetic model runs to max_tokens"

def open_stream(body, events):
    """A raw streaming request; returns the socket after `events` data events arrived."""
    sock = socket.create_connection((HOST, PORT), timeout=60)
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(data)).encode() + b"\r\n\r\n" + data)
    got = b""
    while got.count(b"data: ") < events:
        chunk = sock.recv(4096)
        assert chunk, got
        got += chunk
    return sock, got

def wait_log(words):
    deadline = time.time() + 30
    while True:
        lines = [l for l in open(log_path).read().splitlines() if words in l]
        if lines: return lines[-1]
        assert time.time() < deadline, "no '%s' in the log" % words
        time.sleep(0.05)

sock, _ = open_stream(long_req, 3)
sock.close()
line = wait_log("client disconnected")
assert int(line.split("reply ")[1].split()[0]) < LONG, line
assert ok("GET", "/health")["status"] == "ok"
assert ok("POST", "/v1/completions", creq)["choices"][0]["text"] == ttext

# --- load: 8 concurrent streaming clients, each as its sequential reply ---
N = 8
bodies = [{"messages": [{"role": "user", "content": "Story number %d: once upon a time" % i}],
           "temperature": 0, "max_tokens": 16} for i in range(N)]
sequential = [chat_stream_text(stream("/v1/chat/completions", b)) for b in bodies]
results, errors = [None] * N, []
def client(i):
    try:
        results[i] = chat_stream_text(stream("/v1/chat/completions", bodies[i]))
    except Exception as ex:  # noqa
        errors.append(repr(ex))
threads = [threading.Thread(target=client, args=(i,)) for i in range(N)]
t0 = time.time()
for th in threads: th.start()
health = ok("GET", "/health")  # answered while generations wait in line
for th in threads: th.join(timeout=120)
assert not errors, errors
assert all(not th.is_alive() for th in threads), "a client did not finish"
for i in range(N):
    assert results[i] == sequential[i], (i, results[i], sequential[i])
print("load: %d concurrent streams in %.2f s; health during load: %s" % (N, time.time() - t0, health))

# --- SIGTERM during a generation: the reply ends with an error event, the server exits 0 ---
sock, got = open_stream(long_req, 2)
os.kill(pid, signal.SIGTERM)
while True:
    chunk = sock.recv(65536)
    if not chunk: break
    got += chunk
    if got.endswith(b"0\r\n\r\n"): break
sock.close()
assert b"shutting_down" in got and b"[DONE]" not in got, got[-300:]
wait_log("cancelled: the server is stopping")
PY

wait_exit 15
[ $rc -eq 0 ] || fail "serve exited $rc after SIGTERM"
grep -q "SIGTERM: stopping" "$T/serve.log" || fail "no stop message"

# A lost Vulkan device (injected, GPU backend on whatever device there is): the
# request gets a device_lost error (JSON, or an SSE error event when streaming)
# and the server exits 1 with one error line. Greedy, so that the reply cannot end
# before the injected loss (a sampled one sometimes stopped after 4 tokens).
for stream in false true; do
  VKMOE_FAULT_DEVICE_LOST=after:10 start_server "$T/lost.log" -c 256
  python3 - "$URL" "$stream" <<'PY' || fail "device lost (stream $stream): reply"
import http.client, json, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
stream = sys.argv[2] == "true"
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
conn.request("POST", "/v1/completions", json.dumps({"prompt": "Hello", "max_tokens": 8, "temperature": 0, "stream": stream}),
             {"Content-Type": "application/json"})
r = conn.getresponse()
body = r.read().decode()
if stream:
    events = [json.loads(l[6:]) for l in body.splitlines() if l.startswith("data: {")]
    assert r.status == 200 and events and events[-1]["error"]["code"] == "device_lost", body
    assert "[DONE]" not in body, body
else:
    assert r.status == 500 and json.loads(body)["error"]["code"] == "device_lost", (r.status, body)
PY
  wait_exit 15
  [ $rc -eq 1 ] || { tail -5 "$T/lost.log"; fail "serve exited $rc after losing the device"; }
  [ "$(grep -c '^vkmoe: error: Vulkan device lost.*; the server stopped$' "$T/lost.log")" -eq 1 ] ||
    { tail -5 "$T/lost.log"; fail "no single device-lost error line"; }
done
echo "serve_e2e: all checks passed"
