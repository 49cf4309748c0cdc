"""Where the agent-server setting comes from (agent_server_config.py): flag, environment, file."""

from __future__ import annotations

import json
import os

import pytest

from trio_acp.openhands.backends.agent_server_config import (
    ENV_API_KEY,
    ENV_STALL_TIMEOUT,
    ENV_URL,
    SETTINGS_FILE,
    STALL_TIMEOUT,
    AgentServerConfigError,
    load_agent_server,
)

KEY = "s3cret-session-key"


def write(tmp_path, data, mode=0o600):
    path = tmp_path / SETTINGS_FILE
    path.write_text(json.dumps(data))
    os.chmod(path, mode)
    return path


def test_nothing_configured_means_local(tmp_path):
    assert load_agent_server({}, persistence_dir=tmp_path) is None


def test_environment(tmp_path):
    target = load_agent_server(
        {ENV_URL: "http://10.0.0.5:8000/", ENV_API_KEY: KEY}, persistence_dir=tmp_path
    )
    assert (target.url, target.api_key, target.source) == (
        "http://10.0.0.5:8000",
        KEY,
        f"${ENV_URL}",
    )


def test_flag_beats_environment_beats_file(tmp_path):
    write(tmp_path, {"url": "http://file:1"})
    env = {ENV_URL: "http://env:2"}
    assert (
        load_agent_server(env, flag_url="http://flag:3", persistence_dir=tmp_path).url
        == "http://flag:3"
    )
    assert load_agent_server(env, persistence_dir=tmp_path).url == "http://env:2"
    assert load_agent_server({}, persistence_dir=tmp_path).url == "http://file:1"


def test_file_key_from_a_named_variable(tmp_path):
    write(tmp_path, {"url": "https://agents.example", "api_key_env": "MY_KEY"}, mode=0o644)
    assert load_agent_server({"MY_KEY": KEY}, persistence_dir=tmp_path).api_key == KEY
    with pytest.raises(AgentServerConfigError, match=r"\$MY_KEY, which is not set"):
        load_agent_server({}, persistence_dir=tmp_path)


def test_file_key_only_in_a_private_file(tmp_path):
    path = write(tmp_path, {"url": "https://agents.example", "api_key": KEY}, mode=0o644)
    with pytest.raises(AgentServerConfigError, match="chmod 600") as refused:
        load_agent_server({}, persistence_dir=tmp_path)
    assert KEY not in str(refused.value)
    os.chmod(path, 0o600)
    assert load_agent_server({}, persistence_dir=tmp_path).api_key == KEY
    # The environment's key wins over the file's.
    assert load_agent_server({ENV_API_KEY: "other"}, persistence_dir=tmp_path).api_key == "other"


def test_persistence_dir_from_the_environment(tmp_path):
    write(tmp_path, {"url": "http://file:1"})
    assert load_agent_server({"OPENHANDS_PERSISTENCE_DIR": str(tmp_path)}).url == "http://file:1"


@pytest.mark.parametrize(
    "url, message",
    [
        ("ftp://host", "not an http"),
        ("localhost:8000", "not an http"),
        (f"http://user:{KEY}@host", "not in the URL"),
    ],
)
def test_bad_urls(tmp_path, url, message):
    with pytest.raises(AgentServerConfigError, match=message) as refused:
        load_agent_server({ENV_URL: url}, persistence_dir=tmp_path)
    assert KEY not in str(refused.value)


def test_bad_files(tmp_path):
    (tmp_path / SETTINGS_FILE).write_text("{not json")
    with pytest.raises(AgentServerConfigError, match="not valid JSON"):
        load_agent_server({}, persistence_dir=tmp_path)
    write(tmp_path, ["http://x"])
    with pytest.raises(AgentServerConfigError, match="JSON object"):
        load_agent_server({}, persistence_dir=tmp_path)


def test_the_key_is_not_in_repr(tmp_path):
    target = load_agent_server({ENV_URL: "http://h:1", ENV_API_KEY: KEY}, persistence_dir=tmp_path)
    assert KEY not in repr(target) and KEY not in str(target)
    assert "api_key=set" in repr(target)


def test_the_stall_timeout_comes_from_the_environment(tmp_path):
    env = {ENV_URL: "http://10.0.0.5:8000"}
    assert load_agent_server(env, persistence_dir=tmp_path).stall_timeout == STALL_TIMEOUT
    env[ENV_STALL_TIMEOUT] = "2.5"
    assert load_agent_server(env, persistence_dir=tmp_path).stall_timeout == 2.5
    for bad in ("soon", "0", "-1", "inf", "nan"):
        env[ENV_STALL_TIMEOUT] = bad
        with pytest.raises(AgentServerConfigError, match=ENV_STALL_TIMEOUT):
            load_agent_server(env, persistence_dir=tmp_path)


def test_a_persistence_dir_under_an_unknown_user_is_a_config_error_not_a_crash():
    # `~nobody-such/x` cannot be expanded: before, RuntimeError escaped at start-up and the
    # process died before `initialize`; now the session's opening says what to fix.
    env = {"OPENHANDS_PERSISTENCE_DIR": "~no-such-user-here/x"}
    with pytest.raises(
        AgentServerConfigError, match="OPENHANDS_PERSISTENCE_DIR=~no-such-user-here"
    ):
        load_agent_server(env)


def test_the_agent_server_command_says_what_is_wrong_with_the_persistence_dir(monkeypatch, capsys):
    # Before: `trio-acp agent-server` died with a RuntimeError traceback for this setting.
    from trio_acp.openhands.backends.agent_server_command import serve

    monkeypatch.setenv("OPENHANDS_PERSISTENCE_DIR", "~no-such-user-here/x")
    assert serve(host="127.0.0.1", port=0) == 2
    assert "OPENHANDS_PERSISTENCE_DIR=~no-such-user-here/x" in capsys.readouterr().err
