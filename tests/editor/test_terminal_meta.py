"""Zed's terminal `_meta` stream: new output only, bounded, in wire shape."""

from types import SimpleNamespace

from trio_acp import schema
from trio_acp.openhands.editor.terminal_meta import (
    TerminalMetaStream,
    merge_outputs,
    supports_terminal_meta,
)


def wire(update):
    return schema.to_wire(update)


def test_the_stream_sends_info_then_only_new_output_then_exit():
    stream = TerminalMetaStream("call_1", cwd="/w")
    start = wire(stream.start())
    assert start["content"] == [{"type": "terminal", "terminalId": "call_1"}]
    assert start["_meta"] == {"terminal_info": {"terminal_id": "call_1", "cwd": "/w"}}
    outputs = [wire(u) for u in stream.feed("hello\n") + stream.feed("world\n")]
    assert [o["_meta"]["terminal_output"]["data"] for o in outputs] == ["hello\n", "world\n"]
    assert all("content" not in o for o in outputs)  # no resend of what came before
    end = wire(stream.exit(0))
    assert end["_meta"] == {
        "terminal_exit": {"terminal_id": "call_1", "exit_code": 0, "signal": None}
    }
    assert stream.feed("late") == []


def test_the_stream_is_bounded_per_update_and_per_command():
    stream = TerminalMetaStream("c", max_chunk=4, max_total=10)
    datas = [u.meta["terminal_output"]["data"] for u in stream.feed("0123456789abcdef")]
    assert datas[:3] == ["0123", "4567", "89"]
    assert "rest of the output" in datas[3]
    assert stream.feed("more") == [] and stream.dropped == 10
    # Sent in all: linear in the output, whatever the number of pieces.
    assert sum(len(d) for d in datas[:3]) == 10


def test_merging_concatenates_consecutive_output_of_one_call():
    stream = TerminalMetaStream("c")
    other = TerminalMetaStream("d")
    updates = [
        stream.start(),
        *stream.feed("a"),
        *stream.feed("b"),
        *other.feed("x"),
        *stream.feed("c"),
        stream.exit(1),
    ]
    merged = merge_outputs(updates)
    datas = [
        (u.tool_call_id, u.meta["terminal_output"]["data"])
        for u in merged
        if "terminal_output" in (u.meta or {})
    ]
    assert datas == [("c", "ab"), ("d", "x"), ("c", "c")]
    assert len(merged) == 5


def test_only_clients_that_ask_and_have_no_real_terminal_get_it():
    def client(meta, terminal):
        return SimpleNamespace(capabilities=schema.ClientCapabilities(terminal=terminal, meta=meta))

    assert supports_terminal_meta(client({"terminal_output": True}, None))
    assert not supports_terminal_meta(client({"terminal_output": True}, True))
    assert not supports_terminal_meta(client(None, None))
    wired = schema.from_wire(schema.ClientCapabilities, {"_meta": {"terminal_output": True}})
    assert supports_terminal_meta(SimpleNamespace(capabilities=wired))
