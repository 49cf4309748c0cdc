"""The client's system prompt (`systemPrompt` on session/new, load, resume and fork).

What the client sends is checked here (the spec: an agent that cannot apply it MUST answer
an error instead of creating, loading, resuming or forking the session) and then laid on
the SDK `Agent` the session is built with:

- **append**: after the agent's own instructions, in the `AgentContext`'s
  `system_message_suffix` — which the SDK renders into the system message's dynamic part,
  after the working directory and OS lines (`setup/agent_spec.py`). System-level, as the
  spec asks, not a user turn.
- **override**: the SDK's own escape hatch, `Agent.system_prompt`, replaces the built-in
  default instructions verbatim; the SDK still adds the loaded tools' guidance and the
  dynamic context (cwd, OS, skills), which is what the spec allows ("does not change tool
  availability... context from the workspace MAY still be included").

The SDK writes the system message into the conversation once, as its first event
(`Agent.init_state` skips it when the history has one): a stored conversation keeps the
instructions it was created with. So the prompt is kept beside the conversation
(`system_prompt.json`), and load/resume/fork accept a `systemPrompt` only when it is the
one the conversation has; another one is refused rather than silently ignored. An omitted
`systemPrompt` on those keeps the stored one (the history cannot be re-instructed).

No trio and no SDK import here: the agent is only `model_copy`'d.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from trio_acp.rpc import RequestError
from trio_acp.schema import unstable

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import AgentBase

log = logging.getLogger(__name__)

#: The file beside the conversation that keeps its client system prompt.
SYSTEM_PROMPT_FILE = "system_prompt.json"

#: The modes this agent honours; advertised in `initialize` (`capabilities`).
MODES = ("append", "override")


@attrs.frozen
class ClientSystemPrompt:
    """A checked client system prompt: its mode and its text."""

    mode: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"mode": self.mode, "text": self.text}


def capabilities() -> unstable.SessionSystemPromptCapabilities:
    """`sessionCapabilities.systemPrompt`: append (implied) and override."""
    return unstable.SessionSystemPromptCapabilities(
        mode=unstable.SessionSystemPromptModeCapabilities(
            override=unstable.SessionSystemPromptOverrideCapabilities()
        )
    )


def parse(prompt: unstable.SystemPrompt | None) -> ClientSystemPrompt | None:
    """The request's `systemPrompt`, checked; -32602 for what cannot be honoured."""
    if prompt is None:
        return None
    if prompt.mode not in MODES:
        raise RequestError.invalid_params(
            f"systemPrompt mode {prompt.mode!r} is not supported (supported: append, override)"
        )
    if not prompt.content:
        raise RequestError.invalid_params("systemPrompt content must not be empty")
    texts: list[str] = []
    for block in prompt.content:
        text = getattr(block, "text", None)
        if type(block).__name__ != "TextContent" or not isinstance(text, str):
            # An unknown block keeps its wire tag; a known one is named by its class.
            kind = getattr(block, "tag", None) or type(block).__name__
            raise RequestError.invalid_params(
                f"systemPrompt content blocks must be text; a {kind} block is not supported"
            )
        texts.append(text)
    return ClientSystemPrompt(mode=prompt.mode, text="\n\n".join(texts))


def apply[A: AgentBase](agent: A, prompt: ClientSystemPrompt | None) -> A:
    """The SDK `Agent` with the client's instructions (see the module's docstring)."""
    if prompt is None:
        return agent
    if prompt.mode == "override":
        return agent.model_copy(update={"system_prompt": prompt.text})
    context = agent.agent_context
    suffix = context.system_message_suffix if context is not None else None
    combined = f"{suffix}\n\n{prompt.text}" if suffix else prompt.text
    if context is None:
        # Every session agent has a context (agent_spec.py); an embedder's may not: the
        # agent's own model builds one from the field's value.
        return type(agent).model_validate(
            {**agent.model_dump(), "agent_context": {"system_message_suffix": combined}}
        )
    return agent.model_copy(
        update={"agent_context": context.model_copy(update={"system_message_suffix": combined})}
    )


def read_stored(directory: Path) -> ClientSystemPrompt | None:
    """The system prompt a stored conversation was created with, or None."""
    try:
        data = json.loads((directory / SYSTEM_PROMPT_FILE).read_text(encoding="utf-8"))
        return ClientSystemPrompt(mode=str(data["mode"]), text=str(data["text"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        log.warning("unreadable %s in %s", SYSTEM_PROMPT_FILE, directory, exc_info=True)
        return None


def write_stored(directory: Path, prompt: ClientSystemPrompt | None) -> None:
    """Keep the prompt beside the conversation (nothing for None)."""
    if prompt is None:
        return
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SYSTEM_PROMPT_FILE).write_text(json.dumps(prompt.to_json()), encoding="utf-8")


def for_existing(
    requested: ClientSystemPrompt | None, stored: ClientSystemPrompt | None
) -> ClientSystemPrompt | None:
    """The prompt a reopened (loaded, resumed, forked) conversation runs with.

    Its history starts with the system message it was created with; a different
    `systemPrompt` cannot reach the model faithfully, so it is refused (-32602).
    """
    if requested is None or requested == stored:
        return stored
    raise RequestError.invalid_params(
        "this session's system instructions were fixed when it was created (they are the "
        "first message of its history); a different systemPrompt needs a new session"
    )
