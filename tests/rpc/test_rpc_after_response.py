"""after_response(): what must follow a response on the wire, never precede it."""

import pytest
import trio
import trio.testing

from trio_acp.rpc import after_response, open_peer


class Handler:
    def __init__(self):
        self.peer = None

    async def handle_request(self, method, params):
        async def follow_up():
            await self.peer.notify("followed", {"after": method})

        after_response(follow_up)
        return {"ok": True}

    async def handle_notification(self, method, params):
        pass


class Recorder:
    def __init__(self):
        self.seen = []

    async def handle_request(self, method, params):
        return None

    async def handle_notification(self, method, params):
        self.seen.append(("notification", method))


class Tap(trio.abc.ReceiveStream):
    """Records the bytes as they come off the wire."""

    def __init__(self, inner):
        self.inner, self.data = inner, b""

    async def receive_some(self, max_bytes=None):
        chunk = await self.inner.receive_some(max_bytes)
        self.data += chunk
        return chunk

    async def aclose(self):
        await self.inner.aclose()


async def test_follow_up_goes_out_after_the_response():
    a, b = trio.testing.memory_stream_pair()
    tap = Tap(b.receive_stream)
    handler, recorder = Handler(), Recorder()
    async with (
        open_peer(a, handler) as server,
        open_peer(trio.StapledStream(b.send_stream, tap), recorder) as client,
    ):
        handler.peer = server
        assert await client.request("x", {}) == {"ok": True}
        with trio.fail_after(5):
            while not recorder.seen:
                await trio.sleep(0.01)
    lines = tap.data.decode().splitlines()
    assert '"result"' in lines[0] and '"followed"' in lines[1]


def test_after_response_outside_a_handler_is_an_error():
    with pytest.raises(RuntimeError):
        after_response(lambda: None)
