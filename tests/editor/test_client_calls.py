"""The wait a tool thread makes for a client answer: released by the answer, the turn's
cancel (which also cancels the client's request), a timeout, or the session closing."""

from __future__ import annotations

import pytest
import trio

from trio_acp.openhands.editor.client_calls import (
    ClientCallCancelled,
    ClientCallClosed,
    ClientCallFailed,
    ClientCalls,
    ClientCallTimeout,
)
from trio_acp.rpc import RequestError
from trio_acp.testing.editor import SESSION, EditorClient, editor_pair

# A guard against a hang (a broken wait would block the test forever), not a timing check.
GUARD = 10


def read(calls: ClientCalls, proxy, path: str, **kw):
    return calls.call(
        lambda: proxy.read_text_file(session_id=SESSION, path=path), what=f"reading {path}", **kw
    )


async def in_thread(fn, *args):
    """Run `fn` in a thread; its result or the exception it raised."""

    def run():
        try:
            return fn(*args)
        except BaseException as exc:
            return exc

    with trio.fail_after(GUARD):
        return await trio.to_thread.run_sync(run)


async def test_the_answer_releases_the_wait():
    client = EditorClient({"/w/a.py": "buffer\n"})
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        result = await in_thread(read, calls, proxy, "/w/a.py")
        assert result.content == "buffer\n"
        calls.close()


async def test_a_client_error_fails_the_call_with_the_clients_reason():
    client = EditorClient()
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        error = await in_thread(read, calls, proxy, "/w/missing.py")
        assert isinstance(error, ClientCallFailed)
        assert error.code == -32002 and "Resource not found: /w/missing.py" in str(error)
        calls.close()


async def test_a_refusal_under_a_generic_message_fails_the_call_with_its_details():
    """acpx answers a refused write `{"code":-32603,"message":"Internal error","data":
    {"details":"Permission denied for fs/write_text_file"}}`: the reason is the details."""

    class Refusing(EditorClient):
        async def write_text_file(self, params):
            raise RequestError(
                -32603, "Internal error", {"details": "Permission denied for fs/write_text_file"}
            )

    calls = ClientCalls()
    async with editor_pair(Refusing()) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        error = await in_thread(
            lambda: calls.call(
                lambda: proxy.write_text_file(session_id=SESSION, path="/w/new.py", content="x"),
                what="writing /w/new.py",
            )
        )
        assert isinstance(error, ClientCallFailed)
        assert "Permission denied for fs/write_text_file" in str(error)
        calls.close()


async def test_cancel_releases_a_wait_the_client_never_answers_and_cancels_its_request():
    client = EditorClient({"/w/a.py": "x"})
    client.hang = True
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        outcome = []

        async def tool():
            outcome.append(await in_thread(read, calls, proxy, "/w/a.py"))

        nursery.start_soon(tool)
        with trio.fail_after(GUARD):
            await client.received.wait()
        assert calls.pending == 1
        calls.cancel_turn()
        with trio.fail_after(GUARD):
            while not outcome or not client.cancelled:
                await trio.sleep(0.01)
        assert isinstance(outcome[0], ClientCallCancelled)
        # The client's handler was cancelled: `$/cancel_request` reached it.
        assert client.cancelled == ["fs/read_text_file"]
        # Until the next turn, no new client request starts.
        refused = await in_thread(read, calls, proxy, "/w/a.py")
        assert isinstance(refused, ClientCallCancelled)
        assert client.methods() == ["fs/read_text_file"]
        calls.begin_turn()
        client.hang = False
        assert (await in_thread(read, calls, proxy, "/w/a.py")).content == "x"
        calls.close()


async def test_a_timeout_releases_the_wait_and_cancels_the_request():
    client = EditorClient({"/w/a.py": "x"})
    client.hang = True
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        error = await in_thread(lambda: read(calls, proxy, "/w/a.py", timeout=0.2))
        assert isinstance(error, ClientCallTimeout)
        assert "reading /w/a.py timed out" in str(error)
        with trio.fail_after(GUARD):
            while not client.cancelled:
                await trio.sleep(0.01)
        assert client.cancelled == ["fs/read_text_file"]
        calls.close()


async def test_closing_the_session_releases_the_wait_and_refuses_new_calls():
    client = EditorClient({"/w/a.py": "x"})
    client.hang = True
    calls = ClientCalls()
    outcome = []

    def tool(proxy):
        try:
            read(calls, proxy, "/w/a.py")
        except Exception as exc:
            outcome.append(exc)

    async with editor_pair(client) as proxy:
        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                await nursery.start(calls.run)
                nursery.start_soon(trio.to_thread.run_sync, tool, proxy)
                await client.received.wait()
                nursery.cancel_scope.cancel()  # the session's nursery goes: run() closes
    assert len(outcome) == 1 and isinstance(outcome[0], ClientCallClosed)
    assert isinstance(await in_thread(read, calls, None, "/w/a.py"), ClientCallClosed)


async def test_cancel_from_another_thread_releases_the_wait():
    client = EditorClient({"/w/a.py": "x"})
    client.hang = True
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        outcome = []

        async def tool():
            outcome.append(await in_thread(read, calls, proxy, "/w/a.py"))

        nursery.start_soon(tool)
        with trio.fail_after(GUARD):
            await client.received.wait()
        # e.g. an executor's interrupt(), which the SDK calls from its own thread
        await trio.to_thread.run_sync(calls.cancel_turn)
        with trio.fail_after(GUARD):
            while not outcome or not client.cancelled:
                await trio.sleep(0.01)
        assert isinstance(outcome[0], ClientCallCancelled)
        calls.close()


async def test_call_refuses_to_run_on_the_trio_thread():
    calls = ClientCalls()
    async with trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        with pytest.raises(RuntimeError):
            calls.call(trio.sleep_forever)
        calls.close()
