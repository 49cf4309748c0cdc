"""Where a session's conversation runs (agent.py asks `session_server`), and the local index of
remote sessions (store.py): no agent-server and no SDK import needed."""

from __future__ import annotations

import os
import uuid

import pytest
import trio

from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.backends.agent_server_config import AgentServerTarget
from trio_acp.openhands.backends.remote_conversation import delete_on_server, session_server
from trio_acp.openhands.sessions.store import SessionStore
from trio_acp.rpc import ErrorCode, RequestError
from trio_acp.testing import open_in_memory_pair, scripted_env

SERVER = AgentServerTarget(url="http://127.0.0.1:8123", api_key="k" * 24)
SID = uuid.UUID(int=7)


def test_a_new_session_runs_on_the_configured_server_or_here():
    assert session_server(SERVER, SID, None, existing=False) is SERVER
    assert session_server(None, SID, None, existing=False) is None


def test_a_stored_session_runs_where_it_lives():
    # A local session stays local with a server configured: its history is on this disk.
    assert session_server(SERVER, SID, None, existing=True) is None
    assert session_server(SERVER, SID, SERVER.url, existing=True) is SERVER


@pytest.mark.parametrize("configured", [None, AgentServerTarget(url="http://elsewhere:1")])
def test_a_remote_session_needs_its_own_server_configured(configured):
    with pytest.raises(RequestError) as refused:
        session_server(configured, SID, SERVER.url, existing=True)
    assert refused.value.code == ErrorCode.AUTH_REQUIRED
    assert SERVER.url in refused.value.message
    assert SERVER.api_key not in refused.value.message


@pytest.mark.parametrize("configured", [None, AgentServerTarget(url="http://elsewhere:1")])
async def test_deleting_a_remote_session_configured_elsewhere_warns_where_it_stays(configured):
    warning = await delete_on_server(configured, SID, SERVER.url)
    assert warning is not None
    assert f"{SERVER.url}/api/conversations/{SID}" in warning and "stays" in warning
    assert SERVER.api_key not in warning


async def test_deleting_a_remote_session_whose_server_is_gone_warns_where_it_stays():
    from trio_acp.testing.agent_server import free_port

    gone = AgentServerTarget(url=f"http://127.0.0.1:{free_port()}", api_key="k" * 24)
    with trio.fail_after(60):
        warning = await delete_on_server(gone, SID, gone.url)
    assert warning is not None and "did not answer" in warning and gone.url in warning
    assert gone.api_key not in warning


async def test_deleting_a_local_session_asks_no_server():
    assert await delete_on_server(SERVER, SID, None) is None


def test_the_index_of_a_remote_session_lists_and_exists(tmp_path):
    store = SessionStore(tmp_path / "conversations")
    cwd = str(tmp_path)
    assert not store.exists(SID)
    store.write_agent_server(SID, SERVER.url)
    store.write_index(SID, cwd=cwd, title="on the server")
    assert store.exists(SID)
    assert store.agent_server(SID) == SERVER.url
    page, _ = store.list(cwd, None)
    assert [(s.session_id, s.title) for s in page] == [(str(SID), "on the server")]
    assert SERVER.api_key not in (store.dir_for(SID) / "trio_acp_session.json").read_text()


class NoSdk:
    """A loader that must not be asked: the setting is refused before the SDK is needed."""

    ready = False

    async def get(self):
        raise AssertionError("the SDK import was waited for")


class Client:
    async def session_update(self, params):
        pass

    async def request_permission(self, params):
        raise AssertionError("nothing runs here")


async def test_an_unusable_setting_fails_session_new_at_once(tmp_path):
    env = dict(os.environ)
    env.update(scripted_env("http://127.0.0.1:9"))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=str(tmp_path / "home"),
        TRIO_ACP_AGENT_SERVER_URL="http://user:secret@127.0.0.1:8000",
    )
    with trio.fail_after(30):
        async with open_openhands_agent(env=env, sdk_loader=NoSdk()) as agent:
            async with open_in_memory_pair(agent, Client()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                with pytest.raises(RequestError) as refused:
                    await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert refused.value.code == ErrorCode.AUTH_REQUIRED
    assert "TRIO_ACP_AGENT_SERVER_API_KEY" in refused.value.message
    assert "secret" not in refused.value.message


async def test_a_server_that_is_down_fails_session_new_clearly(tmp_path):
    from trio_acp.openhands.sdk import SdkLoader
    from trio_acp.testing.agent_server import free_port

    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = dict(os.environ)
    env.update(scripted_env("http://127.0.0.1:9"))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=str(tmp_path / "home"),
        TRIO_ACP_AGENT_SERVER_API_KEY=SERVER.api_key,
        TRIO_ACP_PUBLIC_SKILLS="0",
    )
    with trio.fail_after(240):  # the SDK import, then one refused connection: no hang
        async with open_openhands_agent(
            env=env, sdk_loader=SdkLoader(), agent_server_url=down
        ) as agent:
            async with open_in_memory_pair(agent, Client()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                with pytest.raises(RequestError) as failed:
                    await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])
                listed = await conn.agent.list_sessions()
    assert down in failed.value.message and "refused" in failed.value.message
    assert SERVER.api_key not in failed.value.message
    assert listed.sessions == [], "a session that never started is listed"
