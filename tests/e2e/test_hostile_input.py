"""Hostile input over the whole agent: the real `trio-acp` process, raw bytes on its stdin.

One agent process (module fixture) serves every case here, in file order: importing the SDK
costs seconds per process. After each case the agent must still be alive, every line it
wrote to stdout a valid JSON-RPC frame, and a prompt in the fixture's session must still
work. The last case checks that nothing outside the persistence directory and the workspace
was touched (a sentinel tree beside them, HOME and TMPDIR private to the agent) and that the
agent exits cleanly. A heavier randomized run lives in `bench/hostile.py`.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.raw_agent import RawAgent

# The first session/new imports the SDK (seconds; a minute or more on a loaded machine).
pytestmark = pytest.mark.timeout(300)

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
UNKNOWN_SESSION = -32002
SECRET = "sentinel-secret-7d1f"
# What the SDK writes to HOME whatever the persistence directory (known, reported): the
# public skills' cache (the clone the CLI makes too; offline only its lock). The terminal's
# shell keeps no history file and the LLM profile store is in the persistence directory
# (tests/e2e/test_prompt_blocks_and_home.py).
SDK_HOME_ENTRIES = {
    ".openhands",
    ".openhands/cache",
    ".openhands/cache/skills",
    ".openhands/cache/skills/public-skills.lock",
}


def tree(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every path under ``root`` with its size, mtime and (for files) content."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        out[str(path.relative_to(root))] = (
            st.st_size if path.is_file() else 0,
            st.st_mtime_ns,
            data,
        )
    return out


class World:
    def __init__(self, root: Path, llm: ScriptedLLM) -> None:
        self.root, self.llm = root, llm
        self.home, self.persist, self.ws = root / "home", root / "persist", root / "ws"
        self.outside, self.tmp = root / "outside", root / "tmp"
        for d in (self.home, self.persist, self.ws, self.outside / "deep", self.tmp):
            d.mkdir(parents=True)
        (self.outside / "secret.txt").write_text(SECRET)
        (self.outside / "deep" / "x").write_text("do not touch\n")
        (self.home / ".bashrc").write_text("# sentinel\n")
        self.before = {"outside": tree(self.outside), "home": tree(self.home)}
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=str(self.persist),
            HOME=str(self.home),
            TMPDIR=str(self.tmp),
            LLM_NUM_RETRIES="1",
            LLM_TIMEOUT="120",
            TRIO_ACP_DEFAULT_MODE="always-approve",
        )
        self.agent = RawAgent.spawn(env, cwd=str(self.ws))
        self.agent.initialize()
        self.sid = self.agent.new_session(str(self.ws))

    def heavy_prompt(self, blocks: list[dict], timeout: float = 120) -> dict:
        """A prompt in a session of its own, closed afterwards: what the model is sent for
        a heavy prompt stays heavy for every later call of that session."""
        sid = self.agent.new_session(str(self.ws))
        try:
            return self.agent.prompt(sid, blocks, timeout=timeout)
        finally:
            assert "result" in self.agent.request("session/close", {"sessionId": sid})

    def healthy(self) -> None:
        """Alive, stdout pure, and the next prompt works."""
        agent = self.agent
        assert agent.alive(), f"the agent died (exit status {agent.process.returncode})"
        reply = agent.prompt(self.sid, scenario_prompt("echo", "still there?"))
        assert reply.get("result", {}).get("stopReason") == "end_turn", reply
        assert agent.bad_lines == [], agent.bad_lines[:3]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with ScriptedLLM() as llm:
        w = World(tmp_path_factory.mktemp("hostile"), llm)
        try:
            yield w
        finally:
            if w.agent.alive():
                w.agent.close()


def error_code(reply: dict) -> int | None:
    return reply.get("error", {}).get("code")


def test_invalid_utf8_and_non_json(world):
    agent = world.agent
    for line in [
        b"\xff\xfe\xfd",
        b'{"jsonrpc":"2.0","id":1,"method":"\xc3\x28"}',
        b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"x":"\xed\xa0\x80"}}',
        b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"x":"\\ud800"}}',
        b"\x00\x00\x00",
        b"{",
        b"nul\x00l",
        b"[]",
        b"[1,2]",
        b"42",
        b'"str"',
        b"null",
    ]:
        n = len(agent.frames)
        agent.write(line + b"\n")
        reply = agent.read_until(lambda f: "error" in f, what=f"the error for {line[:40]!r}")
        assert reply["id"] is None, (line, reply)
        assert error_code(reply) in (PARSE_ERROR, INVALID_REQUEST), (line, reply)
        assert sum("error" in f for f in agent.frames[n:]) == 1
    # A lone surrogate inside a prompt is refused before it reaches the session.
    agent.write(
        b'{"jsonrpc":"2.0","id":"s","method":"session/prompt","params":{"sessionId":"'
        + world.sid.encode()
        + b'","prompt":[{"type":"text","text":"\\udc80"}]}}\n'
    )
    reply = agent.read_until(lambda f: "error" in f or f.get("id") == "s")
    assert reply["id"] is None and error_code(reply) == PARSE_ERROR, reply
    world.healthy()


def test_lines_of_60_mib_and_over_the_limit(world):
    agent = world.agent
    agent.write(b"x" * (60 << 20) + b"\n", timeout=120)
    assert error_code(agent.read_until(lambda f: "error" in f, timeout=120)) == PARSE_ERROR
    big = {
        "jsonrpc": "2.0",
        "id": "big",
        "method": "_hostile/none",
        "params": {"pad": "y" * (60 << 20)},
    }
    agent.send(big, timeout=120)
    assert error_code(agent.response("big", timeout=120)) == METHOD_NOT_FOUND
    # A prompt of a 60 MiB line whose text is short: the padding is in _meta.
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": "bigp",
            "method": "session/prompt",
            "params": {
                "sessionId": world.sid,
                "prompt": [{"type": "text", "text": scenario_prompt("echo", "padded")}],
                "_meta": {"pad": "z" * (60 << 20)},
            },
        },
        timeout=120,
    )
    assert agent.response("bigp", timeout=120)["result"]["stopReason"] == "end_turn"
    agent.write(b"w" * (65 << 20) + b"\n", timeout=120)  # over the 64 MiB frame limit
    reply = agent.read_until(lambda f: "error" in f, timeout=120)
    assert error_code(reply) == INVALID_REQUEST and "too large" in reply["error"]["message"]
    world.healthy()


def test_a_thousand_pipelined_requests_while_the_client_does_not_read(world):
    agent = world.agent
    method = "_hostile/" + "m" * 300  # long names: the error answers overflow the stdout pipe
    frames, expected = [], {}
    for i in range(1000):
        rid = f"p{i}"
        if i % 200 == 0:  # a few real prompts among them
            frames.append(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "session/prompt",
                    "params": {
                        "sessionId": world.sid,
                        "prompt": [{"type": "text", "text": scenario_prompt("echo", f"n{i}")}],
                    },
                }
            )
            expected[rid] = "end_turn"
        elif i % 3 == 0:
            frames.append(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "session/set_mode",
                    "params": {"sessionId": "0" * 32, "modeId": "x" * 300},
                }
            )
            expected[rid] = UNKNOWN_SESSION
        else:
            frames.append({"jsonrpc": "2.0", "id": rid, "method": method, "params": {"i": i}})
            expected[rid] = METHOD_NOT_FOUND
    data = b"".join(json.dumps(f).encode() + b"\n" for f in frames)
    assert len(data) > 4 * 65536
    agent.write(data, read=False, timeout=60)  # a Hang here is the deadlock
    for rid, want in expected.items():
        reply = agent.response(rid, timeout=60)
        if want == "end_turn":
            assert reply.get("result", {}).get("stopReason") == "end_turn", reply
        else:
            assert error_code(reply) == want, reply
    answers = [f for f in agent.frames if "method" not in f and str(f.get("id")).startswith("p")]
    assert sorted(f["id"] for f in answers) == sorted(expected)  # each exactly once
    world.healthy()


def test_deep_json(world):
    agent = world.agent
    deep = b"[" * 100_000 + b"]" * 100_000
    agent.write(b'{"jsonrpc":"2.0","id":"d1","method":"initialize","params":{"x":' + deep + b"}}\n")
    reply = agent.read_until(lambda f: "error" in f)
    assert error_code(reply) == PARSE_ERROR and reply["id"] is None
    agent.write(
        b'{"jsonrpc":"2.0","id":"d2","method":"initialize","params":'
        + b'{"a":' * 100_000
        + b"1"
        + b"}" * 100_001
        + b"\n"
    )
    assert error_code(agent.read_until(lambda f: "error" in f)) == PARSE_ERROR
    # Just under the decoder's depth limit, in the places an agent keeps and echoes.
    nested = b"[" * 1000 + b"]" * 1000
    agent.write(
        b'{"jsonrpc":"2.0","id":"d3","method":"session/prompt","params":{"sessionId":"'
        + world.sid.encode()
        + b'","_meta":{"x":'
        + nested
        + b'},"prompt":[{"type":"text","text":"'
        + scenario_prompt("echo", "deep").encode()
        + b'","_meta":{"y":'
        + nested
        + b"}}]}}\n"
    )
    assert agent.response("d3")["result"]["stopReason"] == "end_turn"
    world.healthy()


def test_ids_of_every_json_type(world):
    agent = world.agent
    valid = ["s", "", "ünïcødé ✓", "x" * 10_000, 0, -1, 7, 2**63 - 1, 2**70, -(2**70)]
    for rid in valid:
        for method, code in (("_hostile/none", METHOD_NOT_FOUND), ("initialize", None)):
            agent.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": method,
                    "params": {"protocolVersion": 1} if method == "initialize" else {},
                }
            )
            reply = agent.response(rid)
            assert type(reply["id"]) is type(rid) and reply["id"] == rid
            assert (error_code(reply) == code) if code else "result" in reply, (rid, reply)
    for raw in [
        b"1.5",
        b"1.0",
        b"-0.0",
        b"1e3",
        b"null",
        b"true",
        b"false",
        b"{}",
        b'{"a":1}',
        b"[]",
        b"[1]",
    ]:
        agent.write(
            b'{"jsonrpc":"2.0","id":'
            + raw
            + b',"method":"initialize","params":{"protocolVersion":1}}\n'
        )
        reply = agent.read_until(
            lambda f: "error" in f or "result" in f, what=f"an answer to id {raw!r}"
        )
        assert reply["id"] is None and error_code(reply) == INVALID_REQUEST, (raw, reply)
    # A notification (no id) gets no answer; responses to requests never made are dropped.
    for frame in [
        {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 424242, "result": {}},
        {"jsonrpc": "2.0", "id": "nope", "error": {"code": 1, "message": "x"}},
    ]:
        agent.send(frame)
    n = len(agent.frames)
    agent.drain(0.3)
    assert agent.frames[n:] == []
    world.healthy()


def test_duplicate_in_flight_ids(world):
    agent = world.agent
    slow = scenario_prompt("slow", "take your time", chunks=30, delay_ms=30)
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": "dup",
            "method": "session/prompt",
            "params": {"sessionId": world.sid, "prompt": [{"type": "text", "text": slow}]},
        }
    )
    agent.read_until(
        lambda f: (
            f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
    )
    for method, params in [
        ("initialize", {"protocolVersion": 1}),
        ("session/prompt", {"sessionId": world.sid, "prompt": [{"type": "text", "text": "x"}]}),
    ]:
        agent.send({"jsonrpc": "2.0", "id": "dup", "method": method, "params": params})
    agent.read_until(lambda f: f.get("id") == "dup" and "result" in f, timeout=60)
    answers = [f for f in agent.frames if f.get("id") == "dup" and "method" not in f]
    assert [error_code(f) for f in answers] == [INVALID_REQUEST, INVALID_REQUEST, None], answers
    assert answers[-1]["result"]["stopReason"] == "end_turn"
    world.healthy()


def test_ten_thousand_content_blocks(world):
    # Each becomes text, and adjacent text is one part of the SDK message (prompt.py
    # `merge_text`): the SDK's per-part cost on every model call is paid once
    # (`python -m bench hostile --blocks`). A short reply: an echo of the whole prompt would
    # stream ~700 KB back, which is not what this is about.
    blocks = [{"type": "text", "text": scenario_prompt("slow", "many", chunks=3, delay_ms=1)}]
    kinds = [
        lambda i: {"type": "text", "text": f"b{i}"},
        lambda i: {"type": "resource_link", "name": f"f{i}", "uri": f"file:///nowhere/{i}"},
        lambda i: {"type": "resource", "resource": {"uri": f"mem://{i}", "text": f"t{i}"}},
        lambda i: {
            "type": "image",
            "mimeType": "image/png",
            "data": "",
            "uri": f"file:///img/{i}.png",
        },
        # No audio: the scripted model takes none, so a prompt with audio is refused
        # outright (setup/audio_input.py; tests/openhands/test_audio.py).
        lambda i: {"type": "_x_hologram", "data": "AAAA"},
    ]
    blocks += [kinds[i % len(kinds)](i) for i in range(9_999)]
    reply = world.heavy_prompt(blocks)
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply
    world.healthy()


def test_a_20_mib_embedded_blob(world):
    blob = base64.b64encode(os.urandom(15 << 20)).decode()  # 20 MiB of base64
    reply = world.heavy_prompt(
        [
            {"type": "text", "text": scenario_prompt("echo", "blob")},
            {
                "type": "resource",
                "resource": {
                    "uri": "file:///data.bin",
                    "mimeType": "application/octet-stream",
                    "blob": blob,
                },
            },
        ]
    )
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply
    sent = json.dumps(world.llm.requests[-1].body)
    assert blob[:1000] not in sent and "bytes" in sent  # a note with the size, never the data
    world.healthy()


def test_resource_links_outside_the_workspace_are_not_read(world):
    secret = world.outside / "secret.txt"
    links = [
        f"file://{secret}",
        f"file://{world.ws}/../outside/secret.txt",
        "file:///etc/shadow",
        "file:///proc/self/environ",
        "file://host/share/x",
        "file:///dev/zero",
        "file:" + "/.." * 50,
        "https://example.invalid/x",
        "file:///%00nul",
        "file:///" + "a" * 5_000,
    ]
    # A reply that does not echo the prompt: the scripted server's echo of very long
    # lines is not what is tested here.
    blocks = [{"type": "text", "text": scenario_prompt("slow", "links", chunks=3, delay_ms=1)}]
    blocks += [
        {"type": "resource_link", "name": f"l{i}", "uri": uri} for i, uri in enumerate(links)
    ]
    blocks += [{"type": "resource", "resource": {"uri": uri, "blob": "AAAA"}} for uri in links]
    reply = world.heavy_prompt(blocks)
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply
    assert SECRET not in json.dumps(world.llm.requests[-1].body)
    world.healthy()


HOSTILE_CWDS = [
    "relative/dir",
    ".",
    "..",
    "",
    "~",
    "/nonexistent/x/y",
    "/dev/null",
    "/tmp/\x00x",
    "/" + "a" * 5000,
    "/a" * 3000,
    "\x00",
    "/proc/self/fd/0",
    12,
    None,
    [],
    {},
]


def test_hostile_cwd(world):
    agent = world.agent
    cwds = HOSTILE_CWDS + [str(world.outside / "secret.txt"), str(world.ws) + "/\x00"]
    for cwd in cwds:
        for method, extra in [
            ("session/new", {}),
            ("session/load", {"sessionId": world.sid}),
            ("session/resume", {"sessionId": world.sid}),
            ("session/list", {}),
        ]:
            if method == "session/list" and cwd is None:
                continue  # no filter
            if method == "session/list" and (isinstance(cwd, str) and cwd.startswith("/")):
                # A filter: an absolute path that is no directory matches no session.
                reply = agent.request(method, {"cwd": cwd})
                assert reply.get("result", {}).get("sessions", [None]) == [] or (
                    error_code(reply) == INVALID_PARAMS
                ), (cwd, reply)
                continue
            reply = agent.request(method, {"cwd": cwd, "mcpServers": [], **extra})
            assert error_code(reply) == INVALID_PARAMS, (method, cwd, reply)
    # The live session survived the loads and resumes refused for their cwd (it used to be
    # closed before the cwd was checked, and its next prompt answered "unknown session").
    reply = agent.prompt(world.sid, scenario_prompt("echo", "after the refused loads"))
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply
    # A cwd spelled with `..` that names a real directory is a real directory.
    odd = f"{world.ws}/../{world.ws.name}"
    sid = agent.new_session(odd)
    assert (
        agent.prompt(sid, scenario_prompt("echo", "odd cwd"))["result"]["stopReason"] == "end_turn"
    )
    assert "result" in agent.request("session/close", {"sessionId": sid})
    world.healthy()


HOSTILE_SIDS = [
    "../../x",
    "../../../../etc/passwd",
    "/etc/passwd",
    "..",
    ".",
    "",
    "\x00",
    "a\x00b",
    "x" * 1_000_000,
    "😀" * 100,
    "ünïcødé",
    "%2e%2e%2f",
    "C:\\Windows",
    "00000000-0000-0000-0000-000000000000",
    "0" * 32,
    12,
    None,
    [],
    {},
]


def test_hostile_session_ids(world):
    agent = world.agent
    ws = str(world.ws)
    methods = [
        ("session/load", {"cwd": ws, "mcpServers": []}),
        ("session/resume", {"cwd": ws, "mcpServers": []}),
        ("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}),
        ("session/set_mode", {"modeId": "always-ask"}),
        ("session/close", {}),
        ("session/set_config_option", {"configId": "mode", "value": "always-ask"}),
        ("session/fork", {"cwd": ws, "mcpServers": []}),
    ]
    for sid in HOSTILE_SIDS:
        agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        for method, params in methods:
            reply = agent.request(method, {**params, "sessionId": sid})
            code = error_code(reply)
            if isinstance(sid, str):
                assert code == UNKNOWN_SESSION, (method, sid[:50], reply)
            else:
                assert code == INVALID_PARAMS, (method, sid, reply)
        reply = agent.request("session/delete", {"sessionId": sid})
        assert "result" in reply or error_code(reply) == INVALID_PARAMS, (sid, reply)
    world.healthy()


def test_other_spellings_of_a_live_session_id_are_not_it(world):
    # uuid.UUID reads each of these as the live session's id: they opened, prompted and
    # closed it, and session/delete deleted it. Only the id session/new answered is one.
    agent, sid = world.agent, world.sid
    ws = str(world.ws)
    spellings = ["{" + sid + "}", "urn:uuid:" + sid, sid.upper(), sid.replace("-", "")]
    for other in spellings:
        for method, params in [
            ("session/load", {"cwd": ws, "mcpServers": []}),
            ("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}),
            ("session/close", {}),
        ]:
            reply = agent.request(method, {**params, "sessionId": other})
            assert error_code(reply) == UNKNOWN_SESSION, (method, other, reply)
        assert "result" in agent.request("session/delete", {"sessionId": other})
    listed = agent.result("session/list", {})["sessions"]
    assert sid in [s["sessionId"] for s in listed]
    world.healthy()


def test_nothing_touched_outside_the_persistence_directory_and_a_clean_exit(world):
    agent = world.agent
    assert agent.close() == 0
    assert agent.bad_lines == []
    assert tree(world.outside) == world.before["outside"]
    home = tree(world.home)
    assert home[".bashrc"] == world.before["home"][".bashrc"]
    # Known, from the SDK: the public skills' cache. Nothing else may appear.
    assert set(home) - {".bashrc"} <= SDK_HOME_ENTRIES, sorted(set(home) - SDK_HOME_ENTRIES)
    assert sorted(p.name for p in world.tmp.iterdir()) == []
    assert sorted(p.name for p in world.root.iterdir()) == [
        "home",
        "outside",
        "persist",
        "tmp",
        "ws",
    ]
