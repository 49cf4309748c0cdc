"""`sdk/internals.py`: each read of the SDK's internals answers from objects shaped as the
SDK makes them (tests/openhands/test_sdk_drift.py checks the SDK still makes them so), and
answers nothing, never raising, from anything else."""

from __future__ import annotations

from types import SimpleNamespace as NS

from trio_acp.openhands.sdk import internals


def _conversation(*executors: object) -> NS:
    return NS(agent=NS(tools_map={f"tool{i}": NS(executor=e) for i, e in enumerate(executors)}))


def test_the_executors_of_the_tools_that_have_one():
    first, second = object(), object()
    assert internals.tool_executors(_conversation(first, None, second)) == [first, second]


def test_no_executors_before_the_agent_is_initialized():
    class Uninitialized:
        @property
        def tools_map(self) -> dict[str, object]:
            raise RuntimeError("the agent is not initialized")

    assert internals.tool_executors(NS(agent=Uninitialized())) == []
    assert internals.tool_executors(NS(agent=None)) == []
    assert internals.tool_executors(object()) == []


def test_the_terminal_shell_pid():
    executor = NS(_session=NS(terminal=NS(process=NS(pid=4242))))
    assert internals.terminal_shell_pid(executor) == 4242
    assert internals.terminal_shell_pid(NS(_session=NS(terminal=NS(process=None)))) is None
    assert internals.terminal_shell_pid(object()) is None


def test_the_file_editor_history_directory(tmp_path):
    def editor(directory: object) -> NS:
        return NS(editor=NS(_history_manager=NS(cache=NS(directory=directory))))

    assert internals.editor_history_dir(editor(tmp_path)) == tmp_path
    assert internals.editor_history_dir(editor(str(tmp_path))) is None
    assert internals.editor_history_dir(object()) is None


def test_what_a_conversation_was_given():
    view, provider = object(), object()
    calls: list[str] = []
    conversation = NS(
        _visualizer=view,
        _mcp_tool_provider=provider,
        _ensure_agent_ready=lambda: calls.append("ready"),
    )
    assert internals.visualizer(conversation) is view
    assert internals.mcp_tool_provider(conversation) is provider
    initializer = internals.agent_initializer(conversation)
    assert initializer is not None
    initializer()
    assert calls == ["ready"]
    bare = object()
    assert internals.visualizer(bare) is None
    assert internals.mcp_tool_provider(bare) is None
    assert internals.agent_initializer(NS(_ensure_agent_ready="not callable")) is None


def test_a_critic_with_a_chat_template():
    assert internals.has_chat_template(NS(_get_template_renderer=lambda: None))
    assert not internals.has_chat_template(object())
