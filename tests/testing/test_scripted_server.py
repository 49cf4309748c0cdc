"""The scripted LLM server at the HTTP level (no litellm, no SDK)."""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import trio

from trio_acp.testing import (
    FINISHED_TEXT,
    Reply,
    RequestContext,
    Scenario,
    ScriptedLLM,
    ToolCall,
    Turn,
    load_script_file,
    message_text,
    parse_tags,
    scenario_prompt,
)
from trio_acp.testing.scenarios import DEMO_DEFAULT_PATH, long_scenario


def body(*messages, stream=True, usage=True, **extra):
    msgs = [m if isinstance(m, dict) else {"role": "user", "content": m} for m in messages]
    b = {"model": "scripted", "messages": msgs, "stream": stream, **extra}
    if stream and usage:
        b["stream_options"] = {"include_usage": True}
    return b


# one client for the module: creating an httpx.Client costs ~50 ms (SSL context)
HTTP = httpx.Client(timeout=10.0)


def sse(url, payload, timeout=10.0):
    """POST and parse the SSE stream: (list of chunk dicts, saw [DONE])."""
    chunks, done = [], False
    with HTTP.stream("POST", url + "/chat/completions", json=payload, timeout=timeout) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if not line:
                continue
            assert line.startswith("data: ")
            data = line[len("data: ") :]
            if data == "[DONE]":
                done = True
                continue
            chunks.append(json.loads(data))
    return chunks, done


def assemble(chunks):
    """Reassemble streamed chunks the way an OpenAI client does."""
    out = {
        "reasoning": "",
        "text": "",
        "tool_calls": {},
        "finish": None,
        "usage": None,
        "order": [],
    }
    for c in chunks:
        if c.get("usage"):
            out["usage"] = c["usage"]
        for ch in c["choices"]:
            d = ch["delta"]
            if d.get("reasoning_content"):
                out["reasoning"] += d["reasoning_content"]
                out["order"].append("reasoning")
            if d.get("content"):
                out["text"] += d["content"]
                out["order"].append("text")
            for tc in d.get("tool_calls") or []:
                slot = out["tool_calls"].setdefault(
                    tc["index"], {"id": None, "name": "", "args": ""}
                )
                if "id" in tc:
                    slot["id"] = tc["id"]
                    slot["name"] = tc["function"]["name"]
                    assert tc["type"] == "function"
                slot["args"] += tc["function"].get("arguments", "")
                out["order"].append("tool")
            if ch["finish_reason"]:
                out["finish"] = ch["finish_reason"]
    return out


def dedupe(order):
    return [k for i, k in enumerate(order) if i == 0 or order[i - 1] != k]


# -- selection ------------------------------------------------------------------------------------


def test_tags_and_message_text():
    # The last occurrence wins: the SDK merges consecutive user messages (after an
    # interrupted turn), and the newest prompt comes last.
    assert parse_tags("[scenario:edit] do [path:/a/b.txt] [path:/x]") == {
        "scenario": "edit",
        "path": "/x",
    }
    assert parse_tags("[scenario:slow]\n[scenario:echo] after") == {"scenario": "echo"}
    assert message_text({"role": "user", "content": "hi"}) == "hi"
    assert (
        message_text({"content": [{"type": "text", "text": "a"}, {"type": "image_url"}, "b"]})
        == "a\nb"
    )
    assert message_text({"content": None}) == ""
    assert scenario_prompt("edit", "go", path="/p") == "[scenario:edit] [path:/p] go"


def test_step_is_assistant_messages_after_last_user():
    ctx = RequestContext.from_body(
        body(
            {"role": "system", "content": "sys"},
            "first [word:alpha]",
            {"role": "assistant", "content": "r1"},
            {"role": "user", "content": [{"type": "text", "text": "second [x:1]"}]},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "content": "out", "tool_call_id": "c"},
            {"role": "assistant", "content": "more"},
            {"role": "tool", "content": "out2", "tool_call_id": "d"},
        )
    )
    assert ctx.step == 2
    assert ctx.prompt == "second [x:1]"
    assert ctx.earlier_prompts == ("first [word:alpha]",)
    assert ctx.tags == {"x": "1"}
    assert ctx.int_tag("x", 5) == 1 and ctx.int_tag("y", 5) == 5
    assert [m["role"] for m in ctx.messages_since_prompt] == [
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


def test_rules_tag_default_and_past_end():
    two = Scenario("two", [Reply(text="one"), Reply(text="two")])
    server = ScriptedLLM(
        [
            ("needle", two),
            (re.compile(r"^re\d+$"), "plan"),
            (lambda p: p.endswith("!"), [Reply(text="bang")]),
        ],
        scenarios=[Scenario("custom", [Reply(text="custom!")])],
    )

    def reply(*msgs):
        return server.reply_for(body(*msgs))

    assert reply("a needle here").text == "one"
    assert reply("needle", {"role": "assistant", "content": "one"}).text == "two"
    assert reply("needle", {"role": "assistant"}, {"role": "assistant"}).text == FINISHED_TEXT
    assert reply("re42").tool_calls[0].name == "task_tracker"
    assert reply("hey!").text == "bang"
    # the explicit tag wins over rules; unknown tags fall through to rules/default
    assert reply("[scenario:custom] needle").text == "custom!"
    assert reply("[scenario:nope] needle").text == "one"
    assert reply("just talk").text == "Echo: just talk"
    assert reply().text == "Echo: "  # no user message at all
    with pytest.raises(KeyError):
        ScriptedLLM([("x", "no-such-scenario")])


def test_builtin_scenarios_shapes():
    server = ScriptedLLM()

    def replies(prompt, n=6):
        out = []
        for step in range(n):
            t = server.reply_for(body(prompt, *[{"role": "assistant"}] * step))
            out.append(t)
            if t.text == FINISHED_TEXT:
                break
        return out

    term = replies("[scenario:terminal]")
    assert term[0].tool_calls[0].name == "terminal"
    assert term[0].tool_calls[0].arguments["command"] == "echo hello from terminal"
    assert term[0].effective_finish_reason == "tool_calls"
    assert term[1].tool_calls[0].name == "finish"
    assert term[2].text == FINISHED_TEXT
    assert (
        replies("[scenario:terminal] [command:ls /]")[0].tool_calls[0].arguments["command"]
        == "ls /"
    )
    assert (
        replies("[scenario:sleep] [seconds:3]")[0].tool_calls[0].arguments["command"] == "sleep 3"
    )
    edit = replies("[scenario:edit] [path:/tmp/x.txt]")
    assert [t.tool_calls[0].arguments.get("command") for t in edit[:2]] == ["create", "str_replace"]
    assert edit[2].tool_calls[0].name == "finish"
    assert "needs an absolute path" in replies("[scenario:edit]")[0].text
    plan = replies("[scenario:plan]")
    assert len(plan[0].tool_calls[0].arguments["task_list"]) == 3
    demo = replies("[scenario:demo]")
    assert demo[0].reasoning and demo[0].text
    assert [t.tool_calls[0].name for t in demo[:4]] == [
        "terminal",
        "file_editor",
        "task_tracker",
        "finish",
    ]
    assert demo[1].tool_calls[0].arguments["path"] == DEMO_DEFAULT_PATH
    # the demo writes into the working directory reported by the terminal result
    cwd_demo = server.reply_for(
        body(
            "[scenario:demo]",
            {"role": "assistant"},
            {
                "role": "tool",
                "content": "hi\n[Current working directory: /w/s]",
                "tool_call_id": "c",
            },
        )
    )
    assert cwd_demo.tool_calls[0].arguments["path"] == "/w/s/trio-acp-demo.txt"
    for t in (*term, *edit, *plan, *demo):
        for tc in t.tool_calls:
            if tc.name != "finish":
                assert tc.arguments["security_risk"] == "LOW" and tc.arguments["summary"]
    assert len(replies("[scenario:long] [tokens:100]")[0].text) == 400
    assert replies("[scenario:error500]")[0].http_status == 500
    assert replies("[scenario:stall]")[0].fault == "stall"
    assert replies("[scenario:truncate]")[0].fault == "truncate"
    # remember: the word comes from an EARLIER user message
    remember = server.reply_for(
        body(
            "my word is [word:pineapple]",
            {"role": "assistant", "content": "ok"},
            "[scenario:remember]",
        )
    )
    assert remember.text == "You said earlier: pineapple"
    assert (
        server.reply_for(body("I like kiwis", "[scenario:remember]")).text
        == "You said earlier: kiwis"
    )
    assert "don't remember" in server.reply_for(body("[scenario:remember]")).text


def test_reply_validation():
    assert Turn is Reply  # the former name still works
    with pytest.raises(ValueError):
        Reply(fault="explode")
    with pytest.raises(ValueError):
        Reply(finish_reason="whatever")
    assert Reply(fault="http429").http_status == 429
    assert Reply(fault="context_length").http_status == 400
    assert Reply(fault="reset").http_status is None and Reply(fault="badjson").http_status is None
    assert Reply(text="x", finish_reason="length").effective_finish_reason == "length"
    assert ToolCall("t", '{"raw": 1}').arguments_json() == '{"raw": 1}'


# -- HTTP ---------------------------------------------------------------------------------------


def test_models_and_health(llm):
    r = HTTP.get(llm.base_url + "/models")
    assert r.status_code == 200 and r.json()["data"][0]["id"] == "scripted"
    assert HTTP.get(llm.url + "/health").json() == {"status": "ok"}
    assert HTTP.get(llm.base_url + "/nope").status_code == 404
    bad = HTTP.post(llm.base_url + "/chat/completions", content=b"{nope", timeout=5)
    assert bad.status_code == 400


def test_stream_order_fragments_and_usage(llm):
    chunks, done = sse(llm.base_url, body(scenario_prompt("demo", delay_ms=0)))
    assert done
    out = assemble(chunks)
    assert dedupe(out["order"]) == ["reasoning", "text", "tool"]
    assert out["reasoning"].startswith("The user wants a demo")
    assert out["text"] == "Let me show you what I can do. First, a shell command."
    (call,) = out["tool_calls"].values()
    assert call["name"] == "terminal" and call["id"].startswith("call_")
    assert json.loads(call["args"])["command"] == "echo hello from terminal"
    assert out["finish"] == "tool_calls"
    # first chunk carries the role; tool-call continuation fragments carry no id/name
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    frags = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    assert frags[0]["function"]["arguments"] == "" and "id" in frags[0]
    assert all("id" not in f and "name" not in f["function"] for f in frags[1:])
    # usage chunk last, with empty choices
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == out["usage"]
    u = out["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert u["completion_tokens_details"]["reasoning_tokens"] == -(-len(out["reasoning"]) // 4)
    # without include_usage, usage rides on the finish chunk
    chunks, _ = sse(llm.base_url, body("plain", usage=False))
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["usage"]


def test_non_streaming(llm):
    r = HTTP.post(
        llm.base_url + "/chat/completions", json=body("[scenario:demo]", stream=False), timeout=5
    )
    assert r.status_code == 200
    data = r.json()
    msg = data["choices"][0]["message"]
    assert data["object"] == "chat.completion"
    assert msg["reasoning_content"].startswith("The user wants") and msg["content"].startswith(
        "Let me"
    )
    assert msg["tool_calls"][0]["function"]["name"] == "terminal"
    assert data["choices"][0]["finish_reason"] == "tool_calls"
    assert data["usage"]["completion_tokens"] > 0
    r = HTTP.post(llm.base_url + "/chat/completions", json=body("hi", stream=False), timeout=5)
    assert r.json()["choices"][0]["message"] == {"role": "assistant", "content": "Echo: hi"}


def test_long_is_one_token_per_chunk(llm):
    chunks, done = sse(llm.base_url, body(scenario_prompt("long", tokens=3000)))
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert done and len(content) == 3000
    assert all(len(c["choices"][0]["delta"]["content"]) == 4 for c in content)
    assert chunks[-1]["usage"]["completion_tokens"] == 3000
    assert (
        long_scenario(10, chunk_size=8)
        .reply_for(RequestContext.from_body(body("x")))
        .text.count(" ")
        == 10
    )


def test_chunk_delay_paces_the_stream(llm):
    t0 = time.monotonic()
    arrivals = []
    with HTTP.stream(
        "POST",
        llm.base_url + "/chat/completions",
        json=body(scenario_prompt("slow", chunks=10, delay_ms=40)),
        timeout=10,
    ) as r:
        for line in r.iter_lines():
            if '"content"' in line:
                arrivals.append(time.monotonic() - t0)
    assert len(arrivals) == 10
    assert arrivals[-1] - arrivals[0] >= 0.3  # 9 gaps of 40 ms


def test_faults_over_http(llm):
    r = HTTP.post(llm.base_url + "/chat/completions", json=body("[scenario:error500]"), timeout=5)
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    # truncate: some chunks, then the connection closes mid-body (incomplete chunked read)
    got = []
    with pytest.raises(httpx.RemoteProtocolError):
        with HTTP.stream(
            "POST", llm.base_url + "/chat/completions", json=body("[scenario:truncate]"), timeout=5
        ) as resp:
            for line in resp.iter_lines():
                got.append(line)
    assert any('"content"' in line for line in got) and "data: [DONE]" not in got
    # truncate without streaming: half a JSON body
    with pytest.raises(httpx.RemoteProtocolError):
        HTTP.post(
            llm.base_url + "/chat/completions",
            json=body("[scenario:truncate]", stream=False),
            timeout=5,
        )
    # stall: some chunks then silence; the client's read timeout fires
    got = []
    t0 = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        with HTTP.stream(
            "POST", llm.base_url + "/chat/completions", json=body("[scenario:stall]"), timeout=0.5
        ) as resp:
            for line in resp.iter_lines():
                got.append(line)
    assert time.monotonic() - t0 < 3
    assert any('"content"' in line for line in got)
    recs = llm.wait_for_requests(1, predicate=lambda rs: rs[-1].finished is not None, timeout=5)
    assert recs[-1].outcome == "stall" and recs[-1].chunks_sent == 4
    custom = ScriptedLLM(
        [("x", [Reply(text="abcdefgh", chunk_size=1, fault="truncate", fault_after=3)])]
    )
    with custom:
        with pytest.raises(httpx.RemoteProtocolError):
            with HTTP.stream(
                "POST", custom.base_url + "/chat/completions", json=body("x"), timeout=5
            ) as resp:
                list(resp.iter_lines())
        assert custom.requests[0].chunks_sent == 3 and custom.requests[0].outcome == "truncate"


def test_openai_shaped_errors_and_retry_after(llm):
    def post(prompt):
        return HTTP.post(llm.base_url + "/chat/completions", json=body(prompt), timeout=5)

    expected = {
        "error400": (400, "invalid_request_error", None),
        "error401": (401, "invalid_request_error", "invalid_api_key"),
        "error403": (403, "request_forbidden", "unsupported_country_region_territory"),
        "error404": (404, "invalid_request_error", "model_not_found"),
        "error502": (502, "server_error", None),
        "error503": (503, "server_error", None),
    }
    for name, (status, type_, code) in expected.items():
        r = post(f"[scenario:{name}]")
        error = r.json()["error"]
        assert (r.status_code, error["type"], error["code"]) == (status, type_, code), name
        assert set(error) == {"message", "type", "param", "code"} and error["message"]
        assert "retry-after" not in r.headers
    assert "`scripted`" in post("[scenario:error404]").json()["error"]["message"]
    limited = post("[scenario:error429] [retry_after:7]")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert post("[scenario:error429]").headers["retry-after"] == "1"
    # a condenser's summary call (no tools) fits; the agent's (with tools) does not
    with_tools = body(
        "[scenario:context_too_long]", tools=[{"type": "function", "function": {"name": "t"}}]
    )
    overflow = HTTP.post(llm.base_url + "/chat/completions", json=with_tools, timeout=5)
    assert (
        overflow.status_code == 400
        and overflow.json()["error"]["code"] == "context_length_exceeded"
    )
    assert "maximum context length" in overflow.json()["error"]["message"]
    chunks, done = sse(llm.base_url, body("[scenario:context_too_long]"))
    assert done and "Summary" in assemble(chunks)["text"]


def test_badjson_and_reset_over_http(llm):
    lines = []
    with HTTP.stream(
        "POST", llm.base_url + "/chat/completions", json=body("[scenario:badjson]"), timeout=5
    ) as r:
        lines = [line for line in r.iter_lines() if line]
    broken = [line for line in lines if line.startswith("data: {") and not _is_json(line[6:])]
    assert len(broken) == 1 and lines[-1] == "data: [DONE]"
    assert lines.index(broken[0]) > 1  # some good chunks came first
    # reset: no response at all, the connection is reset (RST)
    with pytest.raises(httpx.TransportError):
        HTTP.post(llm.base_url + "/chat/completions", json=body("[scenario:reset]"), timeout=5)
    assert (
        llm.wait_for_requests(1, predicate=lambda rs: rs[-1].outcome == "reset")[-1].chunks_sent
        == 0
    )
    # [after:N]: N chunks of the stream, then the reset
    got = []
    with pytest.raises(httpx.TransportError):
        with HTTP.stream(
            "POST",
            llm.base_url + "/chat/completions",
            json=body("[scenario:reset] [after:3]"),
            timeout=5,
        ) as r:
            got.extend(line for line in r.iter_lines() if line)
    assert len(got) == 3 and "data: [DONE]" not in got
    # non-streaming badjson: a body of the right length that is not JSON
    r = HTTP.post(
        llm.base_url + "/chat/completions", json=body("[scenario:badjson]", stream=False), timeout=5
    )
    assert r.status_code == 200 and not _is_json(r.text)


def _is_json(text):
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_close_ends_a_stall():
    server = ScriptedLLM().start()
    errors = []

    def client():
        try:
            with HTTP.stream(
                "POST",
                server.base_url + "/chat/completions",
                json=body("[scenario:stall]"),
                timeout=30,
            ) as r:
                list(r.iter_lines())
        except httpx.HTTPError as e:
            errors.append(e)

    th = threading.Thread(target=client)
    th.start()
    server.wait_for_requests(1, predicate=lambda rs: rs[0].outcome == "stall", timeout=5)
    t0 = time.monotonic()
    server.close()
    th.join(5)
    assert not th.is_alive() and errors
    assert time.monotonic() - t0 < 2
    server.close()  # idempotent


def test_request_log(llm):
    llm.clear_requests()
    HTTP.post(llm.base_url + "/chat/completions", json=body("logged", stream=False), timeout=5)
    (rec,) = llm.requests
    assert rec.prompt == "logged" and rec.scenario == "echo" and rec.step == 0
    assert rec.outcome == "complete" and rec.finished >= rec.started
    assert rec.messages == [{"role": "user", "content": "logged"}] and not rec.stream
    assert llm.bodies[0]["messages"][0]["content"] == "logged"
    with pytest.raises(TimeoutError):
        llm.wait_for_requests(5, timeout=0.05)


def test_many_concurrent_conversations(llm):
    """Stateless selection: interleaved conversations each get their own step sequence."""

    def conversation(i):
        history = [{"role": "user", "content": f"[scenario:plan] conv {i}"}]
        names = []
        for _ in range(3):
            chunks, done = sse(llm.base_url, body(*history))
            out = assemble(chunks)
            assert done
            names.append(out["tool_calls"][0]["name"] if out["tool_calls"] else out["text"])
            history.append({"role": "assistant", "content": out["text"]})
            history.append({"role": "tool", "content": "ok", "tool_call_id": "x"})
        slow, _ = sse(llm.base_url, body(scenario_prompt("slow", f"c{i}", chunks=5, delay_ms=10)))
        return names, assemble(slow)["text"]

    with ThreadPoolExecutor(24) as pool:
        results = list(pool.map(conversation, range(48)))
    for names, slow_text in results:
        assert names == ["task_tracker", "finish", FINISHED_TEXT]
        assert slow_text == "w0001 w0002 w0003 w0004 w0005 "


def test_script_file(tmp_path):
    f = tmp_path / "script.json"
    f.write_text(
        json.dumps(
            {
                "default": "greet",
                "scenarios": {
                    "greet": [
                        {"text": "Hello ${name}, you said: ${prompt}", "chunk_size": 3},
                        {
                            "tool_calls": [
                                {"name": "finish", "arguments": {"message": "bye ${name}"}}
                            ]
                        },
                    ],
                    "boom": [{"fault": "http503"}],
                },
                "rules": [
                    {"match": "explode", "scenario": "boom"},
                    {"regex": "^plan", "scenario": "plan"},
                ],
            }
        )
    )
    script = load_script_file(f)
    assert set(script.scenarios) == {"greet", "boom"} and script.default == "greet"
    server = ScriptedLLM.from_file(f)
    t0 = server.reply_for(body("[name:Ann] hi"))
    assert t0.text == "Hello Ann, you said: [name:Ann] hi" and t0.chunk_size == 3
    t1 = server.reply_for(body("[name:Ann] hi", {"role": "assistant"}))
    assert t1.tool_calls[0].arguments == {"message": "bye Ann"}
    assert server.reply_for(body("please explode")).http_status == 503
    assert server.reply_for(body("plan it")).tool_calls[0].name == "task_tracker"
    assert server.reply_for(body("[scenario:echo] x")).text == "Echo: [scenario:echo] x"


async def test_trio_usage():
    async with ScriptedLLM() as server:

        def call():
            return HTTP.post(
                server.base_url + "/chat/completions",
                json=body("from trio", stream=False),
                timeout=5,
            ).json()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, call)
            recs = await server.await_requests(1, timeout=5)
        assert recs[0].prompt == "from trio"
        with pytest.raises(trio.TooSlowError):
            await server.await_requests(2, timeout=0.05)
    assert "stopped" in repr(server)


def test_client_going_away_is_recorded(llm):
    llm.clear_requests()
    with HTTP.stream(
        "POST",
        llm.base_url + "/chat/completions",
        json=body(scenario_prompt("slow", chunks=200, delay_ms=20)),
    ) as r:
        for line in r.iter_lines():
            if '"content"' in line:
                break  # leave after the first piece: httpx closes the connection
    recs = llm.wait_for_requests(1, predicate=lambda rs: rs[0].finished is not None, timeout=5)
    assert recs[0].outcome == "disconnected" and recs[0].chunks_sent < 50


def test_broken_scenario_answers_500():
    def boom(ctx):
        raise RuntimeError("scenario bug")

    with ScriptedLLM([("x", [boom])]) as server:
        r = HTTP.post(server.base_url + "/chat/completions", json=body("x"))
        assert r.status_code == 500 and "scenario bug" in r.json()["error"]["message"]
        assert server.requests[0].outcome == "error"


def test_transient_faults_response_ids_html_and_big_error_bodies(llm):
    def post(prompt, **kw):
        return HTTP.post(llm.base_url + "/chat/completions", json=body(prompt, **kw), timeout=10)

    llm.clear_requests()
    # flaky_stream: the first [times:N] requests with these messages are cut, then whole.
    prompt = "[scenario:flaky_stream] [times:2] [id:same]"
    for _ in range(2):
        with pytest.raises(httpx.RemoteProtocolError):
            sse(llm.base_url, body(prompt))
    chunks, done = sse(llm.base_url, body(prompt))
    assert done and {c["id"] for c in chunks} == {"same"}
    assert [r.outcome for r in llm.requests] == ["truncate", "truncate", "complete"]
    # same_id: every reply under one id, streamed or not.
    chunks, _ = sse(llm.base_url, body("[scenario:same_id] one"))
    assert {c["id"] for c in chunks} == {"x"}
    assert post("[scenario:same_id] [id:y]", stream=False).json()["id"] == "y"
    # html: HTTP 200 and a web page, streamed or not.
    page = post("[scenario:html]", stream=True)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.text.startswith("<!DOCTYPE html>")
    assert post("[scenario:html]", stream=False).headers["content-type"].startswith("text/html")
    # error500_big: OpenAI's error, its message padded to [bytes:N].
    big = post("[scenario:error500_big] [bytes:100000]")
    assert big.status_code == 500 and 99_000 < len(big.content) <= 100_100
    assert big.json()["error"]["message"].startswith("The server had an error")
    once = "[scenario:error500_big] [bytes:2000] [times:1] hi"
    assert post(once, stream=False).status_code == 500
    reply = post(once, stream=False).json()
    assert reply["choices"][0]["message"]["content"].startswith("Echo: ")
